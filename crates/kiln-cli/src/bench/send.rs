//! One streamed request, timed chunk by chunk.

use std::time::Instant;

use futures_util::StreamExt;
use serde_json::Value;

use super::{Args, Record};

/// Sends one streaming request and times its chunks.
pub async fn send(client: &reqwest::Client, a: &Args, path: &str, body: &Value) -> Record {
    let start = Instant::now();
    let mut rec = Record::default();
    let mut req = client.post(format!("{}{path}", a.base_url)).json(body);
    if let Some(k) = &a.api_key {
        req = req.bearer_auth(k);
    }
    let resp = match req.send().await {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            rec.error = Some(format!(
                "{}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            ));
            return rec;
        }
        Err(e) => {
            rec.error = Some(e.to_string());
            return rec;
        }
    };
    let mut stream = resp.bytes_stream();
    let (mut buf, mut last, mut chunks) = (String::new(), None::<Instant>, 0usize);
    while let Some(bytes) = stream.next().await {
        let Ok(bytes) = bytes else {
            rec.error = Some("stream broken".into());
            return rec;
        };
        buf.push_str(&String::from_utf8_lossy(&bytes));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            // Chat and completions send `data:` lines; the Responses API names each event
            // on an `event:` line before its `data:`.
            let Some(data) = event
                .lines()
                .find_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
            else {
                continue;
            };
            if data == "[DONE]" {
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            let text = match v["type"].as_str() {
                Some(kind) => match responses_event(&mut rec, kind, &v) {
                    Ok(text) => text,
                    Err(e) => {
                        rec.error = Some(e);
                        return rec;
                    }
                },
                None => {
                    if let Some(e) = v.get("error") {
                        rec.error = Some(e.to_string());
                        return rec;
                    }
                    if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                        rec.prompt_tokens = count(&u["prompt_tokens"]);
                        rec.completion_tokens = count(&u["completion_tokens"]);
                        rec.cached_tokens = count(&u["prompt_tokens_details"]["cached_tokens"]);
                    }
                    let c = &v["choices"][0];
                    c["delta"]["content"]
                        .as_str()
                        .or(c["text"].as_str())
                        .unwrap_or("")
                }
            };
            if !text.is_empty() {
                let now = Instant::now();
                match last {
                    None => rec.ttft = (now - start).as_secs_f64(),
                    Some(l) => rec.itl.push((now - l).as_secs_f64()),
                }
                last = Some(now);
                chunks += 1;
                rec.text.push_str(text);
            }
        }
    }
    rec.e2e = start.elapsed().as_secs_f64();
    if rec.completion_tokens == 0 {
        rec.completion_tokens = chunks;
    }
    rec.ok = true;
    rec
}

fn count(v: &Value) -> usize {
    v.as_u64().unwrap_or(0) as usize
}

/// One Responses API event: the answer text it adds; its counts and the response's id go
/// into `rec`; an error or failure ends the request.
fn responses_event<'a>(rec: &mut Record, kind: &str, v: &'a Value) -> Result<&'a str, String> {
    match kind {
        "response.output_text.delta" => Ok(v["delta"].as_str().unwrap_or("")),
        "response.created" => {
            rec.response_id = v["response"]["id"].as_str().map(str::to_string);
            Ok("")
        }
        "response.completed" | "response.incomplete" => {
            let u = &v["response"]["usage"];
            rec.prompt_tokens = count(&u["input_tokens"]);
            rec.completion_tokens = count(&u["output_tokens"]);
            rec.cached_tokens = count(&u["input_tokens_details"]["cached_tokens"]);
            Ok("")
        }
        "error" | "response.failed" => Err(v.to_string()),
        _ => Ok(""),
    }
}
