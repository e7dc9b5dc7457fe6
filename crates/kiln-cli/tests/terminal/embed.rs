//! `kiln embed`: one unit vector per input, as JSON lines, equal for equal inputs; an input
//! longer than the context refused by its index.

use kiln_model::testing::TinyConfig;

use super::{kiln, model};

/// `kiln embed`'s vectors, one per JSON line: `(index, tokens, embedding)`.
fn embeddings(stdout: &[u8]) -> Vec<(u64, u64, Vec<f64>)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            let e = v["embedding"].as_array().expect("embedding");
            let floats = e.iter().map(|x| x.as_f64().unwrap()).collect();
            (
                v["index"].as_u64().unwrap(),
                v["tokens"].as_u64().unwrap(),
                floats,
            )
        })
        .collect()
}

#[test]
fn embed_prints_a_unit_vector_per_input() {
    let dir = model("embed", 512);
    let d = dir.to_str().unwrap();
    let inputs = ["the cat sat", "a dog ran", "the cat sat"];
    let mut args = vec!["embed", "--model", d];
    for i in inputs {
        args.extend(["--input", i]);
    }
    let out = kiln(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = embeddings(&out.stdout);
    assert_eq!(e.len(), 3);
    let width = TinyConfig::default().hidden_size;
    for (i, (index, tokens, v)) in e.iter().enumerate() {
        assert_eq!(*index, i as u64);
        assert!(*tokens >= 3, "{tokens}");
        assert_eq!(v.len(), width);
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
    let diff = |a: &[f64], b: &[f64]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    };
    assert!(diff(&e[0].2, &e[2].2) < 1e-5, "equal inputs");
    assert!(diff(&e[0].2, &e[1].2) > 1e-3, "different inputs");
    // An input longer than the context is refused by its index.
    let long = "word ".repeat(600);
    let out = kiln(&["embed", "--model", d, "--input", "x", "--input", &long]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("input 1"), "{err}");
}
