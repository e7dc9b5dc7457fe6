//! KV events over ZeroMQ from a running server (tiny random model, a small KV pool with a CPU
//! tier so blocks are evicted and moved): subscribed from Rust with a SUB socket and replayed
//! through the ROUTER socket from sequence 0. Checks the wire format (topic, 8-byte big-endian
//! sequence, msgpack `[timestamp, [events], null]`), that replay and live stream agree, that
//! the stream starts with AllBlocksCleared, that every parent was announced before its child
//! and every block carries block_size token ids, that removals match earlier stores per
//! medium, and that each prompt's full blocks were announced as a chain of its own tokens.
//! CI runs four turns; `KILN_KV_EVENTS_SECONDS=600` keeps the agent loop going for ten
//! minutes (conversations that reach the context start over).

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use kiln_server::kv_events::{END_SEQ, KvEventsConfig};
use serde_json::json;
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, SubSocket, ZmqMessage};

const BS: usize = kiln_core::BLOCK_SIZE;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[derive(Default)]
struct View {
    /// Every block ever announced stored: hash -> (parent, tokens).
    ever: HashMap<u64, (Option<u64>, Vec<u64>)>,
    live: HashSet<(u64, String)>,
    mediums: HashSet<String>,
    events: usize,
}

impl View {
    fn apply(&mut self, payload: &[u8], first: bool) {
        let v = rmpv::decode::read_value(&mut &payload[..]).expect("msgpack payload");
        let top = v.as_array().expect("payload is an array");
        assert_eq!(top.len(), 3, "[timestamp, events, dp rank]");
        assert!(
            top[0].as_f64().is_some_and(|t| t > 1.6e9),
            "timestamp {:?}",
            top[0]
        );
        assert!(top[2].is_nil());
        for (i, e) in top[1].as_array().expect("event list").iter().enumerate() {
            let e = e.as_array().expect("event is an array");
            let tag = e[0].as_str().expect("tag");
            self.events += 1;
            if first && i == 0 {
                assert_eq!(tag, "AllBlocksCleared", "the stream starts empty");
            }
            match tag {
                "AllBlocksCleared" => {
                    assert!(first && i == 0, "AllBlocksCleared only at start-up");
                    assert_eq!(e.len(), 1);
                }
                "BlockStored" => {
                    assert_eq!(e.len(), 7, "{e:?}");
                    let hashes: Vec<u64> = e[1]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|h| h.as_u64().unwrap())
                        .collect();
                    let mut parent = if e[2].is_nil() {
                        None
                    } else {
                        Some(e[2].as_u64().expect("parent hash"))
                    };
                    let tokens: Vec<u64> = e[3]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| t.as_u64().unwrap())
                        .collect();
                    assert_eq!(e[4].as_u64(), Some(BS as u64), "block_size");
                    assert!(e[5].is_nil(), "lora_id");
                    let medium = e[6].as_str().unwrap().to_string();
                    assert!(medium == "GPU" || medium == "CPU", "{medium}");
                    assert_eq!(
                        tokens.len(),
                        hashes.len() * BS,
                        "block_size token ids per hash"
                    );
                    for (k, h) in hashes.iter().enumerate() {
                        if let Some(p) = parent {
                            assert!(
                                self.ever.contains_key(&p),
                                "parent {p:x} of {h:x} not announced before"
                            );
                        }
                        assert!(
                            self.live.insert((*h, medium.clone())),
                            "{h:x} stored twice on {medium}"
                        );
                        self.ever
                            .insert(*h, (parent, tokens[k * BS..(k + 1) * BS].to_vec()));
                        parent = Some(*h);
                    }
                    self.mediums.insert(medium);
                }
                "BlockRemoved" => {
                    assert_eq!(e.len(), 3);
                    let medium = e[2].as_str().unwrap().to_string();
                    for h in e[1].as_array().unwrap() {
                        let h = h.as_u64().unwrap();
                        assert!(
                            self.live.remove(&(h, medium.clone())),
                            "{h:x} removed from {medium} but not stored there"
                        );
                    }
                }
                other => panic!("unknown event {other}"),
            }
        }
    }

    /// The prompt's full blocks were announced as a chain of its own tokens.
    fn assert_chain(&self, prompt: &[u32]) {
        let mut parent = None;
        for (k, chunk) in prompt.chunks_exact(BS).enumerate() {
            let want: Vec<u64> = chunk.iter().map(|&t| t as u64).collect();
            let found = self
                .ever
                .iter()
                .find(|(_, (p, t))| *p == parent && *t == want);
            let (h, _) =
                found.unwrap_or_else(|| panic!("block {k} of a prompt was never announced"));
            parent = Some(*h);
        }
    }
}

async fn replay_from(port: u16, start: u64) -> Vec<(u64, Bytes)> {
    let mut d = DealerSocket::new();
    d.connect(&format!("tcp://127.0.0.1:{port}")).await.unwrap();
    d.send(
        ZmqMessage::try_from(vec![
            Bytes::new(),
            Bytes::copy_from_slice(&start.to_be_bytes()),
        ])
        .unwrap(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), d.recv())
            .await
            .expect("replay answers")
            .unwrap()
            .into_vec();
        assert_eq!(m.len(), 3, "[\"\", seq, payload]");
        assert!(m[0].is_empty());
        if m[1][..] == END_SEQ {
            assert!(m[2].is_empty());
            return out;
        }
        out.push((
            u64::from_be_bytes(m[1][..].try_into().expect("8-byte sequence")),
            m[2].clone(),
        ));
    }
}

#[tokio::test]
async fn kv_events_follow_the_cache_over_zeromq() {
    let (pub_port, replay_port) = (free_port(), free_port());
    let base = start_tiny(|sc, ec| {
        sc.kv_events = Some(KvEventsConfig {
            endpoint: format!("tcp://127.0.0.1:{pub_port}"),
            replay_endpoint: Some(format!("tcp://127.0.0.1:{replay_port}")),
            topic: "kv@test-pod@tiny".into(),
            buffer: 10_000_000,
        });
        ec.kv = kiln_engine::KvSize::Blocks(20);
        ec.cpu_kv_bytes = 1 << 20;
        ec.max_num_seqs = 4;
    });
    let mut sub = SubSocket::new();
    sub.connect(&format!("tcp://127.0.0.1:{pub_port}"))
        .await
        .unwrap();
    sub.subscribe("kv@").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Read the live stream while the workload runs (a PUB socket drops what a slow reader
    // cannot take); once it is done, stop after 3 s of silence. (A turn may be silent for
    // longer than that on a loaded machine, so silence alone does not end the reading.)
    let workload_done = Arc::new(AtomicBool::new(false));
    let done = workload_done.clone();
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(3), sub.recv()).await {
                Ok(Ok(m)) => got.push(m.into_vec()),
                Ok(Err(e)) => panic!("live stream: {e}"),
                Err(_) if done.load(Ordering::SeqCst) => return got,
                Err(_) => {}
            }
        }
    });

    // An agent loop: three conversations sharing a system prompt, each turn extending its own,
    // on a pool of 20 blocks, so cached blocks are evicted to the CPU tier and restored.
    let system: Vec<u32> = (0..40).map(|i| 3 + i * 7 % 200).collect();
    let mut convs: Vec<Vec<u32>> = (0..3u32)
        .map(|a| [system.clone(), (0..20).map(|i| 5 + a * 31 + i).collect()].concat())
        .collect();
    let mut last_prompts = convs.clone();
    let seconds: u64 = std::env::var("KILN_KV_EVENTS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let start = std::time::Instant::now();
    let mut turn = 0u32;
    while turn < 4 || start.elapsed().as_secs() < seconds {
        // A conversation near the longest sequence the pool holds (320) starts over.
        for (a, c) in convs.iter_mut().enumerate() {
            if c.len() > 280 {
                let fresh = (0..20).map(|i| 5 + (a as u32 + turn) * 31 % 250 + i);
                *c = [system.clone(), fresh.collect()].concat();
            }
        }
        last_prompts = convs.clone();
        let bodies: Vec<_> = convs.iter().map(|c| json!({"model": "tiny", "prompt": c, "max_tokens": 6, "temperature": 0, "ignore_eos": true})).collect();
        let results = futures_util::future::join_all(
            bodies.iter().map(|b| post(&base, "/v1/completions", b)),
        )
        .await;
        for (c, (s, r)) in convs.iter_mut().zip(results) {
            assert_eq!(s, 200, "{r}");
            let (_, t) = post(&base, "/tokenize", &json!({"model": "tiny", "prompt": r["choices"][0]["text"], "add_special_tokens": false})).await;
            c.extend(
                t["tokens"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as u32),
            );
            c.extend((0..9).map(|i| 7 + (turn * 13 + i) % 280));
        }
        turn += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    workload_done.store(true, Ordering::SeqCst);

    let replayed = replay_from(replay_port, 0).await;
    assert!(!replayed.is_empty());
    let mut view = View::default();
    for (i, (seq, payload)) in replayed.iter().enumerate() {
        assert_eq!(
            *seq, i as u64,
            "replay sequence numbers count from 0 without gaps"
        );
        view.apply(payload, i == 0);
    }
    eprintln!(
        "{turn} turns ({} requests) in {elapsed:.0} s: {} messages, {} events, every parent announced before its child",
        3 * turn,
        replayed.len(),
        view.events
    );
    assert!(
        view.mediums.contains("CPU"),
        "no block moved to the CPU tier: make the pool smaller"
    );
    // Every full block of each last prompt was announced (its prefill registered them).
    for p in &last_prompts {
        view.assert_chain(&p[..p.len() / BS * BS]);
    }

    // The live stream: the topic, and the same payload as the replay for each sequence number.
    let by_seq: HashMap<u64, &Bytes> = replayed.iter().map(|(s, p)| (*s, p)).collect();
    let mut live = Vec::new();
    for m in reader.await.unwrap() {
        assert_eq!(m.len(), 3);
        assert_eq!(&m[0][..], b"kv@test-pod@tiny");
        let seq = u64::from_be_bytes(m[1][..].try_into().expect("8-byte sequence"));
        assert_eq!(
            by_seq.get(&seq).map(|p| &p[..]),
            Some(&m[2][..]),
            "live message {seq} differs from its replay"
        );
        live.push(seq);
    }
    // Subscribed before any request: it may miss only the start-up AllBlocksCleared (seq 0),
    // and then sees every message, in order, up to the last one.
    let n = replayed.len() as u64;
    assert!(n > 4, "only {n} messages for the whole workload");
    assert!(
        live.first().is_some_and(|&f| f <= 1),
        "live stream {live:?}"
    );
    assert_eq!(
        live,
        (live[0]..n).collect::<Vec<_>>(),
        "live sequence numbers in order, without gaps, to the end"
    );
    // A replay from the middle starts there.
    let mid = replayed.len() as u64 / 2;
    let tail = replay_from(replay_port, mid).await;
    assert_eq!(tail.first().map(|t| t.0), Some(mid));
    assert_eq!(tail.len() as u64, replayed.len() as u64 - mid);
}

/// The events' tags in one message's payload.
fn tags(payload: &[u8]) -> Vec<String> {
    let v = rmpv::decode::read_value(&mut &payload[..]).expect("msgpack payload");
    (v[1].as_array().expect("event list").iter())
        .map(|e| e[0].as_str().expect("tag").to_string())
        .collect()
}

/// Sleep mode: when the engine sleeps, subscribers are told its blocks are gone (not only
/// when it wakes), and the woken engine announces what it caches again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_engine_clears_its_blocks_for_subscribers() {
    let (pub_port, replay_port) = (free_port(), free_port());
    let base = start_tiny(|sc, _| {
        sc.kv_events = Some(KvEventsConfig {
            endpoint: format!("tcp://127.0.0.1:{pub_port}"),
            replay_endpoint: Some(format!("tcp://127.0.0.1:{replay_port}")),
            topic: "kv@test-pod@tiny".into(),
            buffer: 10_000,
        });
        sc.sleep_mode = true;
    });
    let prompt: Vec<u32> = (0..40).map(|i| 3 + i * 7 % 200).collect();
    let body = json!({"prompt": prompt, "max_tokens": 4, "temperature": 0});
    let sleep = || async {
        let r = (client().post(format!("{base}/sleep")).send().await).unwrap();
        assert_eq!(r.status().as_u16(), 200);
    };
    assert_eq!(post(&base, "/v1/completions", &body).await.0, 200);
    sleep().await;
    assert_eq!(post(&base, "/v1/completions", &body).await.0, 200);
    // The events of the second request's step reach the publisher after its reply.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let seen = loop {
        let seen: Vec<Vec<String>> = (replay_from(replay_port, 0).await.iter())
            .map(|(_, p)| tags(p))
            .collect();
        let stored = |s: &[Vec<String>]| s.iter().flatten().filter(|t| *t == "BlockStored").count();
        if seen.len() >= 4 && stored(&seen[2..]) > 0 {
            break seen;
        }
        assert!(std::time::Instant::now() < deadline, "{seen:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Cleared at start, blocks stored, cleared at the sleep, cleared again by the woken
    // engine, blocks stored again.
    let flat: Vec<&str> = seen.iter().flatten().map(String::as_str).collect();
    let cleared: Vec<usize> = (flat.iter().enumerate())
        .filter(|(_, t)| **t == "AllBlocksCleared")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(cleared.len(), 3, "{flat:?}");
    assert_eq!(cleared[0], 0, "{flat:?}");
    assert!(flat[1..cleared[1]].contains(&"BlockStored"), "{flat:?}");
    assert!(flat[cleared[2]..].contains(&"BlockStored"), "{flat:?}");
}
