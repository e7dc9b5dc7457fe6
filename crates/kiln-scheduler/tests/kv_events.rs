//! KV-cache events against the cache itself: an agent-loop workload (conversations that grow
//! turn by turn, so prefixes are shared and reused) on a pool small enough to evict to the CPU
//! tier and out of it, with aborts. After every step, replaying the events gives exactly the
//! cache's blocks per medium, with their parents and tokens; no parent is announced before it
//! was stored; no block is removed from a medium it was not announced on. Blocks computed
//! through a LoRA adapter are announced with its id, on the GPU and in the CPU tier.

mod common;

use std::collections::{HashMap, HashSet};

use common::tokens;
use kiln_core::BLOCK_SIZE;
use kiln_scheduler::testing::Sim;
use kiln_scheduler::{KvEvent, LoraRef, Medium, Request, Scheduler, SchedulerConfig};

/// A subscriber's view, built only from events.
#[derive(Default)]
struct View {
    blocks: HashMap<(u64, Medium), (Option<u64>, Vec<u32>)>,
    ever_stored: HashSet<u64>,
    cleared: bool,
    stored: usize,
    removed: usize,
    /// Each stored event's tokens, adapter and medium.
    loras: Vec<(Vec<u32>, Option<u32>, Medium)>,
}

impl View {
    fn apply(&mut self, events: Vec<KvEvent>) {
        for e in events {
            match e {
                KvEvent::AllBlocksCleared => {
                    assert!(!self.cleared, "AllBlocksCleared only at start");
                    self.cleared = true;
                    self.blocks.clear();
                }
                KvEvent::BlockStored {
                    hashes,
                    parent,
                    tokens,
                    lora_id,
                    medium,
                } => {
                    self.loras.push((tokens.clone(), lora_id, medium));
                    assert!(self.cleared, "events before AllBlocksCleared");
                    assert_eq!(
                        tokens.len(),
                        hashes.len() * BLOCK_SIZE,
                        "block_size tokens per hash"
                    );
                    let mut parent = parent;
                    for (i, h) in hashes.iter().enumerate() {
                        if let Some(p) = parent {
                            assert!(
                                self.ever_stored.contains(&p),
                                "parent {p:x} of {h:x} never announced"
                            );
                        }
                        let t = tokens[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE].to_vec();
                        let old = self.blocks.insert((*h, medium), (parent, t));
                        assert!(old.is_none(), "{h:x} stored twice on {medium:?}");
                        self.ever_stored.insert(*h);
                        parent = Some(*h);
                        self.stored += 1;
                    }
                }
                KvEvent::BlockRemoved { hashes, medium } => {
                    for h in hashes {
                        assert!(
                            self.blocks.remove(&(h, medium)).is_some(),
                            "{h:x} removed from {medium:?} but not stored there"
                        );
                        self.removed += 1;
                    }
                }
            }
        }
    }

    fn assert_matches(&self, sched: &Scheduler) {
        let cache: HashMap<(u64, Medium), (Option<u64>, Vec<u32>)> = sched
            .cached_blocks()
            .into_iter()
            .map(|(k, p, t, m)| ((k, m), (p, t.to_vec())))
            .collect();
        assert_eq!(
            self.blocks.len(),
            cache.len(),
            "announced blocks vs cached blocks"
        );
        for (k, v) in &cache {
            assert_eq!(self.blocks.get(k), Some(v), "block {:x} on {:?}", k.0, k.1);
        }
    }
}

fn agent_loop(
    num_gpu_blocks: usize,
    num_cpu_blocks: usize,
    agents: u32,
    turns: usize,
) -> (View, usize) {
    let mut sim = Sim::new(Scheduler::new(SchedulerConfig {
        max_num_batched_tokens: 256,
        max_num_seqs: 8,
        num_gpu_blocks,
        num_cpu_blocks,
        enable_prefix_caching: true,
        max_model_len: 4096,
        ..SchedulerConfig::default()
    }));
    sim.sched.enable_kv_events();
    let mut view = View::default();
    view.apply(sim.sched.take_kv_events());
    let system = tokens(0, 40);
    let mut convs: Vec<Vec<u32>> = (0..agents)
        .map(|a| [system.clone(), tokens(a + 1, 20)].concat())
        .collect();
    let mut id = 0u64;
    for turn in 0..turns {
        let mut ids = Vec::new();
        for (a, conv) in convs.iter().enumerate() {
            id += 1;
            ids.push((a, id));
            sim.sched
                .add_request(Request {
                    seed: id,
                    ignore_eos: true,
                    ..Request::new(id, conv.clone(), 12 + (a + turn) % 9)
                })
                .unwrap();
        }
        let mut steps = 0;
        while sim.sched.has_unfinished() {
            sim.step().expect("a step");
            steps += 1;
            // One agent of each turn gives up midway (an abort frees its blocks).
            if steps == 3 {
                sim.sched.abort(ids[turn % ids.len()].1);
            }
            view.apply(sim.sched.take_kv_events());
            view.assert_matches(&sim.sched);
        }
        for (a, rid) in ids {
            let out = sim.outputs.remove(&rid).unwrap_or_default();
            convs[a].extend(out);
            convs[a].extend(tokens(1000 + a as u32 * 50 + turn as u32, 5 + turn % 7));
        }
    }
    let steps = sim.steps;
    (view, steps)
}

#[test]
fn events_replay_to_the_cache_with_eviction_to_the_cpu_tier() {
    // 6 agents whose conversations reach ~300 tokens on a 48-block (768-token) pool: the
    // prefix cache keeps evicting to a 24-block CPU tier, which overflows too.
    let (view, steps) = agent_loop(48, 24, 6, 8);
    assert!(
        view.stored > 200 && view.removed > 100,
        "too little churn: {} stored, {} removed in {steps} steps",
        view.stored,
        view.removed
    );
    assert!(
        view.blocks.keys().any(|(_, m)| *m == Medium::Cpu),
        "nothing on the CPU tier at the end"
    );
}

#[test]
fn events_replay_to_the_cache_without_a_cpu_tier() {
    let (view, _) = agent_loop(40, 0, 5, 6);
    assert!(view.blocks.keys().all(|(_, m)| *m == Medium::Gpu));
    assert!(view.removed > 0, "no eviction");
}

#[test]
fn events_are_off_unless_enabled() {
    let mut sim = Sim::new(Scheduler::new(common::cfg(32, 256, 4)));
    sim.sched
        .add_request(Request::new(1, tokens(1, 70), 5))
        .unwrap();
    sim.run_to_completion(100);
    assert!(sim.sched.take_kv_events().is_empty());
    assert!(!sim.sched.cached_blocks().is_empty());
}

/// A prompt through adapter 2 and one through none, then a third prompt that pushes both out
/// to the CPU tier: every block of the first is announced with `lora_id` 2, on both media,
/// and no other block with any.
#[test]
fn blocks_through_an_adapter_carry_its_id() {
    let mut sim = Sim::new(Scheduler::new(SchedulerConfig {
        lora_slots: 1,
        lora_loads: true,
        num_cpu_blocks: 16,
        ..common::cfg(12, 256, 4)
    }));
    sim.sched.enable_kv_events();
    let mut view = View::default();
    view.apply(sim.sched.take_kv_events());
    let adapted = tokens(1, 3 * BLOCK_SIZE);
    sim.sched
        .add_request(Request {
            lora: Some(LoraRef {
                id: 2,
                fingerprint: 0,
            }),
            // The engine salts an adapter's blocks; the scheduler only carries it.
            cache_salt: Some("adapter 2".into()),
            ..Request::new(1, adapted.clone(), 2)
        })
        .unwrap();
    sim.sched
        .add_request(Request::new(2, tokens(2, 3 * BLOCK_SIZE), 2))
        .unwrap();
    sim.run_to_completion(100);
    sim.sched
        .add_request(Request::new(3, tokens(3, 8 * BLOCK_SIZE), 2))
        .unwrap();
    sim.run_to_completion(100);
    view.apply(sim.sched.take_kv_events());
    let ours = |t: &[u32]| adapted.chunks(BLOCK_SIZE).any(|c| c == t);
    let mut media = HashSet::new();
    for (t, lora, medium) in &view.loras {
        assert_eq!(*lora, ours(t).then_some(2), "a block on {medium:?}");
        if ours(t) {
            media.insert(*medium);
        }
    }
    assert_eq!(
        media.len(),
        2,
        "the adapter's blocks on both media: {media:?}"
    );
}
