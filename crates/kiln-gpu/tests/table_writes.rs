//! The block-table writes launch (`table_writes.wgsl`) against a CPU copy: more runs than its
//! workgroups and runs longer than its invocations (so both stride), runs of awkward lengths
//! at random places, the rest of the table kept.

mod common;

use common::*;
use kiln_gpu::{Kernels, ops};
use rand::Rng;

#[test]
fn runs_land_where_they_point_and_nothing_else_changes() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(11);
    // (rows, entries per row, runs): each run writes the tail of its own row.
    for (rows, per_row, n) in [(3, 37, 1), (40, 150, 37), (8, 500, 0)] {
        let entries = rows * per_row;
        let before: Vec<u32> = (0..entries).map(|_| r.random()).collect();
        let mut want = before.clone();
        let (mut headers, mut blocks) = (Vec::new(), Vec::new());
        for row in 0..n {
            let from = r.random_range(0..per_row);
            let len = r.random_range(1..=per_row - from);
            let first = row * per_row + from;
            let tail: Vec<u32> = (0..len).map(|_| r.random()).collect();
            want[first..first + len].copy_from_slice(&tail);
            headers.push([first as u32, len as u32, blocks.len() as u32]);
            blocks.extend(tail);
        }
        let at = 1 + 3 * n as u32;
        let mut w = vec![n as u32];
        w.extend(headers.iter().flat_map(|&[f, l, o]| [f, l, at + o]));
        w.extend(blocks);
        let tables = buf_u32(&ctx, &before);
        let launch = ops::table_writes(&ctx, &k, &buf_u32(&ctx, &w), &tables);
        run_launches(&ctx, &[&launch], 1, 0);
        assert_eq!(read_u32(&ctx, &tables, entries), want, "{n} runs");
    }
}
