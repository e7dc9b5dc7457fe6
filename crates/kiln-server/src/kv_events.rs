//! KV-cache events over ZeroMQ, in the stream format vLLM publishes and llm-d's KV-cache
//! indexer consumes, so a router can send each request to the replica holding its prefix.
//!
//! A PUB socket sends one multipart message per engine step that changed the prefix cache:
//! `[topic, sequence (8 bytes, big-endian), msgpack payload]`, the topic
//! `kv@<pod>@<served model name>`, the payload `[timestamp, [event, ...], null]` with events
//! `["BlockStored", [hash], parent or null, [token ids], block_size, lora_id or null, medium]`
//! (`lora_id`: the engine's id of the LoRA adapter the blocks were computed through),
//! `["BlockRemoved", [hash], medium]` and `["AllBlocksCleared"]` (medium "GPU" or "CPU").
//! A ROUTER socket answers a client's `["", start sequence]` with every buffered message from
//! that sequence on, as `[identity, "", sequence, payload]`, then `[identity, "", -1, ""]`.
//!
//! The engine thread hands each step's events over a channel; one tokio task owns the sockets.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kiln_engine::{KvEvent, Medium};
use zeromq::{PubSocket, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// Where and how to publish.
#[derive(Clone, Debug)]
pub struct KvEventsConfig {
    /// The PUB socket, e.g. `tcp://*:5557`.
    pub endpoint: String,
    /// The replay ROUTER socket, e.g. `tcp://*:5558`.
    pub replay_endpoint: Option<String>,
    /// `kv@<pod>@<served model name>`.
    pub topic: String,
    /// Messages kept for replay.
    pub buffer: usize,
}

/// The sequence number that ends a replay.
pub const END_SEQ: [u8; 8] = (-1i64).to_be_bytes();

/// ZeroMQ's `*` (any interface) as the address tokio binds.
fn bindable(endpoint: &str) -> String {
    endpoint.replacen("://*:", "://0.0.0.0:", 1)
}

/// Binds the sockets and starts the publishing task. Returns the sender the engine thread
/// feeds with each step's events.
pub async fn start(cfg: KvEventsConfig) -> anyhow::Result<flume::Sender<Vec<KvEvent>>> {
    let mut publisher = PubSocket::new();
    publisher
        .bind(&bindable(&cfg.endpoint))
        .await
        .map_err(|e| anyhow::anyhow!("--kv-events-endpoint {}: {e}", cfg.endpoint))?;
    let replay = match &cfg.replay_endpoint {
        Some(ep) => {
            let mut r = RouterSocket::new();
            r.bind(&bindable(ep))
                .await
                .map_err(|e| anyhow::anyhow!("--kv-events-replay-endpoint {ep}: {e}"))?;
            Some(r)
        }
        None => None,
    };
    tracing::info!(
        "publishing KV events on {} (topic {}), replay on {:?}",
        cfg.endpoint,
        cfg.topic,
        cfg.replay_endpoint
    );
    let (tx, rx) = flume::unbounded::<Vec<KvEvent>>();
    tokio::spawn(run(cfg, publisher, replay, rx));
    Ok(tx)
}

async fn run(
    cfg: KvEventsConfig,
    mut publisher: PubSocket,
    mut replay: Option<RouterSocket>,
    rx: flume::Receiver<Vec<KvEvent>>,
) {
    let topic = Bytes::from(cfg.topic.clone());
    let mut seq: u64 = 0;
    let mut buffer: VecDeque<(u64, Bytes)> = VecDeque::new();
    loop {
        tokio::select! {
            batch = rx.recv_async() => {
                let Ok(events) = batch else { return };
                let payload = Bytes::from(encode_batch(&events));
                let msg = ZmqMessage::try_from(vec![topic.clone(), Bytes::copy_from_slice(&seq.to_be_bytes()), payload.clone()])
                    .expect("three frames");
                if let Err(e) = publisher.send(msg).await {
                    tracing::warn!("KV events: publish failed: {e}");
                }
                buffer.push_back((seq, payload));
                if buffer.len() > cfg.buffer {
                    buffer.pop_front();
                }
                seq += 1;
            }
            req = async {
                match replay.as_mut() {
                    Some(r) => r.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                let Ok(req) = req else { continue };
                let frames = req.into_vec();
                let (identity, start) = match frames.as_slice() {
                    [id, empty, start] if empty.is_empty() && start.len() == 8 => (id.clone(), u64::from_be_bytes(start[..].try_into().unwrap())),
                    _ => {
                        tracing::warn!("KV events: malformed replay request ({} frames)", frames.len());
                        continue;
                    }
                };
                let r = replay.as_mut().expect("replay socket");
                for (s, payload) in buffer.iter().filter(|(s, _)| *s >= start) {
                    let msg = ZmqMessage::try_from(vec![identity.clone(), Bytes::new(), Bytes::copy_from_slice(&s.to_be_bytes()), payload.clone()])
                        .expect("four frames");
                    if r.send(msg).await.is_err() {
                        break;
                    }
                }
                let end = ZmqMessage::try_from(vec![identity, Bytes::new(), Bytes::copy_from_slice(&END_SEQ), Bytes::new()]).expect("four frames");
                let _ = r.send(end).await;
            }
        }
    }
}

/// `[timestamp, [events...], null]` in msgpack.
pub fn encode_batch(events: &[KvEvent]) -> Vec<u8> {
    use rmp::encode::*;
    let mut b = Vec::new();
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    // Writing into a Vec cannot fail.
    write_array_len(&mut b, 3).unwrap();
    write_f64(&mut b, ts).unwrap();
    write_array_len(&mut b, events.len() as u32).unwrap();
    let medium = |b: &mut Vec<u8>, m: Medium| write_str(b, m.as_str()).unwrap();
    let u64s = |b: &mut Vec<u8>, v: &[u64]| {
        write_array_len(b, v.len() as u32).unwrap();
        for &x in v {
            write_uint(b, x).unwrap();
        }
    };
    for e in events {
        match e {
            KvEvent::BlockStored {
                hashes,
                parent,
                tokens,
                lora_id,
                medium: m,
            } => {
                write_array_len(&mut b, 7).unwrap();
                write_str(&mut b, "BlockStored").unwrap();
                u64s(&mut b, hashes);
                match parent {
                    Some(p) => write_uint(&mut b, *p).map(|_| ()).unwrap(),
                    None => write_nil(&mut b).unwrap(),
                }
                write_array_len(&mut b, tokens.len() as u32).unwrap();
                for &t in tokens {
                    write_uint(&mut b, t as u64).unwrap();
                }
                write_uint(&mut b, e.block_size() as u64).unwrap();
                match lora_id {
                    Some(l) => write_uint(&mut b, *l as u64).map(|_| ()).unwrap(),
                    None => write_nil(&mut b).unwrap(),
                }
                medium(&mut b, *m);
            }
            KvEvent::BlockRemoved { hashes, medium: m } => {
                write_array_len(&mut b, 3).unwrap();
                write_str(&mut b, "BlockRemoved").unwrap();
                u64s(&mut b, hashes);
                medium(&mut b, *m);
            }
            KvEvent::AllBlocksCleared => {
                write_array_len(&mut b, 1).unwrap();
                write_str(&mut b, "AllBlocksCleared").unwrap();
            }
        }
    }
    write_nil(&mut b).unwrap(); // data-parallel rank
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lora_id` is the sixth field of a stored block: the adapter's id, or nil.
    #[test]
    fn stored_blocks_carry_their_adapters_id() {
        let stored = |lora_id| KvEvent::BlockStored {
            hashes: vec![7],
            parent: None,
            tokens: vec![1, 2],
            lora_id,
            medium: Medium::Gpu,
        };
        let payload = encode_batch(&[stored(Some(5)), stored(None)]);
        let v = rmpv::decode::read_value(&mut &payload[..]).unwrap();
        let events = v[1].as_array().unwrap();
        assert_eq!(events[0][0].as_str(), Some("BlockStored"));
        assert_eq!(events[0][5].as_u64(), Some(5));
        assert!(events[1][5].is_nil());
    }
}
