//! The block-table writes launch (`table_writes.wgsl`) against a CPU scatter: more writes than
//! its invocations (so each strides), to entries in random order, the rest of the table kept.

mod common;

use common::*;
use kiln_gpu::{Kernels, ops};
use rand::Rng;
use rand::seq::SliceRandom;

#[test]
fn writes_land_where_they_point_and_nothing_else_changes() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(11);
    for (entries, n) in [(37, 1), (3001, 2503), (5000, 0)] {
        let before: Vec<u32> = (0..entries).map(|_| r.random()).collect();
        let mut targets: Vec<u32> = (0..entries as u32).collect();
        targets.shuffle(&mut r);
        let mut writes = vec![n as u32];
        let mut want = before.clone();
        for &e in &targets[..n] {
            let block = r.random();
            writes.extend([e, block]);
            want[e as usize] = block;
        }
        let tables = buf_u32(&ctx, &before);
        let launch = ops::table_writes(&ctx, &k, &buf_u32(&ctx, &writes), &tables);
        run_launches(&ctx, &[&launch], 1, 0);
        assert_eq!(read_u32(&ctx, &tables, entries), want, "{n} writes");
    }
}
