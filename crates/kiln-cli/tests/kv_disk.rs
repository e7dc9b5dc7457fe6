//! `kiln generate --kv-disk-dir`: a second run whose prompt starts as the first's reads the
//! first's blocks back from the folder instead of computing them, and says so, with the same
//! greedy reply as a run without the folder.

mod common;

use common::generate;
use kiln_model::testing::{TinyConfig, write_tiny_llama};

/// The speed line's `(prompt tokens, cached tokens, blocks from disk)`, e.g. from
/// `prefill: 75 tokens, 64 cached (4 blocks from disk) in 0.20 s ...`.
fn prefill(err: &str) -> (usize, usize, usize) {
    let line = err.lines().find(|l| l.starts_with("prefill: ")).expect(err);
    // The number just before `what`, 0 if `what` is not in the line.
    let before = |what: &str| {
        line.find(what).map_or(0, |at| {
            line[..at]
                .rsplit([' ', '('])
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
    };
    (
        before(" tokens"),
        before(" cached"),
        before(" blocks from disk"),
    )
}

#[test]
fn a_second_run_reads_the_firsts_blocks_from_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    write_tiny_llama(&model, &TinyConfig::default(), 5).unwrap();
    let disk = tmp.path().join("kv");
    let d = ["--kv-disk-dir", disk.to_str().unwrap()];
    let words = "the cat sat on the mat and the dog ran to the park ".repeat(6);
    let again = format!("{words}then it rained");

    let (_, err) = generate(&model, &words, &d);
    let (tokens, cached, from_disk) = prefill(&err);
    assert_eq!((cached, from_disk), (0, 0), "{err}");
    assert!(tokens >= 48, "three full blocks at least: {err}");
    let files = std::fs::read_dir(&disk).unwrap().next().expect("a folder");
    let written = std::fs::read_dir(files.unwrap().path()).unwrap().count();
    assert!(written > 3, "the blocks and engine.txt: {written}");

    let (reply, err) = generate(&model, &again, &d);
    let (_, cached, from_disk) = prefill(&err);
    assert!(from_disk >= 3 && cached == 16 * from_disk, "{err}");
    let (plain, _) = generate(&model, &again, &[]);
    assert_eq!(
        reply, plain,
        "the reply from restored blocks is the computed one"
    );
}
