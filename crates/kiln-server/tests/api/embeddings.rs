//! `POST /v1/embeddings`: unit vectors of the model's width, one per input in order, equal
//! for equal inputs (text or its token ids) and unequal otherwise, as floats or base64;
//! bad bodies refused naming the field.

use base64::Engine as _;

use super::*;

async fn embed(body: Value) -> (u16, Value) {
    post(server(), "/v1/embeddings", &body).await
}

fn floats(v: &Value) -> Vec<f32> {
    (v.as_array().unwrap().iter())
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4)
}

#[tokio::test]
async fn embeddings_are_unit_vectors_one_per_input() {
    let (s, r) =
        embed(json!({"model": "tiny", "input": ["the cat sat", "a dog ran", "the cat sat"]})).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["object"], "list");
    let data = r["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    let v: Vec<Vec<f32>> = data.iter().map(|d| floats(&d["embedding"])).collect();
    for (i, d) in data.iter().enumerate() {
        assert_eq!(
            (d["index"].as_u64(), &d["object"]),
            (Some(i as u64), &json!("embedding"))
        );
        let norm = v[i].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
    assert!(v[0].len() >= 16);
    assert!(close(&v[0], &v[2]), "equal inputs");
    assert!(!close(&v[0], &v[1]), "different inputs");
    // The same text as token ids, and as base64 of little-endian f32s.
    let (_, t) = post(server(), "/tokenize", &json!({"prompt": "the cat sat"})).await;
    let ids = t["tokens"].clone();
    assert_eq!(
        r["usage"]["prompt_tokens"],
        2 * t["count"].as_u64().unwrap() + {
            let (_, d) = post(server(), "/tokenize", &json!({"prompt": "a dog ran"})).await;
            d["count"].as_u64().unwrap()
        }
    );
    let (_, by_ids) = embed(json!({"input": ids})).await;
    assert!(
        close(&floats(&by_ids["data"][0]["embedding"]), &v[0]),
        "{by_ids}"
    );
    let (_, b64) = embed(json!({"input": "the cat sat", "encoding_format": "base64"})).await;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let decoded: Vec<f32> = (bytes.chunks(4))
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(close(&decoded, &v[0]));
    let width = v[0].len();
    let (s, _) = embed(json!({"input": "x", "dimensions": width})).await;
    assert_eq!(s, 200);
    // Refusals name the field.
    let long = "word ".repeat(600);
    for (body, field) in [
        (
            json!({"input": "x", "encoding_format": "int8"}),
            "encoding_format",
        ),
        (json!({"input": "x", "dimensions": width - 1}), "dimensions"),
        (json!({"input": []}), "input"),
        (json!({"input": [[]]}), "input"),
        (json!({"input": long}), "input"),
        (json!({"input": [1_000_000]}), "input"),
        (json!({"input": "x", "pooling": "mean"}), "pooling"),
    ] {
        refused(server(), "/v1/embeddings", &body, field).await;
    }
    still_answers(server()).await;
}
