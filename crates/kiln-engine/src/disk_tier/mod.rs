//! The disk tier: cached KV blocks kept in files below the CPU tier, so a prefix outlives
//! its eviction from memory and the process itself. An agent's session that went quiet while
//! a tool ran, or a server restarted for a deploy, reads its blocks back instead of
//! computing its prompt again.
//!
//! Blocks reach the disk by write-behind: the KV events of the prefix cache name each block
//! as it is cached ([`DiskTier::note`]), and [`DiskTier::save`] reads queued blocks by key,
//! from the GPU or the CPU tier, wherever they are still cached, and writes them (a block
//! evicted before its turn is skipped). They come back by [`DiskTier::restore`] when a
//! request is added: the prompt's full blocks after those cached in memory, as far as the
//! files go on, are imported into the CPU tier, where the request's lookup finds them and the
//! scheduler restores them as it does any cold block. So the CPU tier must be on; at most its
//! capacity comes back per request.
//!
//! Files are kept per model and engine (`dir/<fingerprint>/`): the model's identity, kiln's
//! version, the adapter and driver, the kernel family, the KV layout and the weights' storage,
//! since each changes the bytes of the KV; a folder only ever serves the engine that wrote it.
//! Keys are the prefix cache's own chained hashes (cache salt included), and a file is loaded
//! only if its key, its parent's key, its tokens and a hash of its bytes all check out.

mod files;

use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};

use kiln_core::BLOCK_SIZE;
use kiln_scheduler::{KvEvent, prefix_keys};

use crate::{Engine, EngineError};
use files::BlockFiles;

/// Most keys waiting to be saved; older ones are dropped beyond it.
const MAX_QUEUE: usize = 1 << 16;

/// Where the disk tier keeps its files and how much it may keep.
#[derive(Clone, Debug)]
pub struct DiskTierConfig {
    pub dir: PathBuf,
    pub max_bytes: u64,
    /// Names the model's bytes ([`model_files_id`] of its files).
    pub model_id: String,
}

/// What the disk tier has done since it was opened, and holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskTierStats {
    pub blocks_written: u64,
    pub blocks_restored: u64,
    pub blocks_evicted: u64,
    pub blocks_resident: usize,
    pub bytes_resident: u64,
    /// Keys waiting to be saved.
    pub pending: usize,
}

pub struct DiskTier {
    files: BlockFiles,
    dir: PathBuf,
    queue: VecDeque<u64>,
    queued: HashSet<u64>,
    written: u64,
    restored: u64,
}

impl DiskTier {
    /// Opens the folder for `engine` under `cfg.dir`, listing the blocks already there.
    pub fn open(cfg: &DiskTierConfig, engine: &Engine) -> io::Result<Self> {
        let rc = engine.runner_config();
        let numerics = format!(
            "model {}\nkiln {}\nadapter {}\nkernels {:?}\nkv {:?}\nweights {:?}\n",
            cfg.model_id,
            env!("CARGO_PKG_VERSION"),
            engine.gpu().describe(),
            rc.kernels,
            engine.kv_layout(),
            rc.weights,
        );
        let mut h = DefaultHasher::new();
        numerics.hash(&mut h);
        let dir = cfg.dir.join(format!("{:016x}", h.finish()));
        let files = BlockFiles::open(&dir, cfg.max_bytes)?;
        std::fs::write(dir.join("engine.txt"), numerics)?;
        Ok(Self {
            files,
            dir,
            queue: VecDeque::new(),
            queued: HashSet::new(),
            written: 0,
            restored: 0,
        })
    }

    /// The folder this engine's blocks are kept in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn stats(&self) -> DiskTierStats {
        DiskTierStats {
            blocks_written: self.written,
            blocks_restored: self.restored,
            blocks_evicted: self.files.evicted,
            blocks_resident: self.files.len(),
            bytes_resident: self.files.bytes(),
            pending: self.queue.len(),
        }
    }

    /// Queues the blocks the events announce cached that are not on disk yet. The engine's
    /// KV events must be on ([`Engine::enable_kv_events`]).
    pub fn note(&mut self, events: &[KvEvent]) {
        for e in events {
            match e {
                KvEvent::BlockStored { hashes, .. } => {
                    for &key in hashes {
                        if !self.files.present(key) && self.queued.insert(key) {
                            self.queue.push_back(key);
                        }
                    }
                }
                KvEvent::AllBlocksCleared => self.forget_queue(),
                KvEvent::BlockRemoved { .. } => {}
            }
        }
        while self.queue.len() > MAX_QUEUE {
            let key = self.queue.pop_front().expect("queue is not empty");
            self.queued.remove(&key);
        }
    }

    /// Drops the queue (the engine was rebuilt: its blocks are gone).
    pub fn forget_queue(&mut self) {
        self.queue.clear();
        self.queued.clear();
    }

    /// Saves up to `most` queued blocks; returns how many were written. Blocks in the CPU
    /// tier while a step is in flight wait in the queue.
    pub async fn save(&mut self, engine: &mut Engine, most: usize) -> Result<usize, EngineError> {
        let mut keys = Vec::new();
        while keys.len() < most {
            let Some(key) = self.queue.pop_front() else {
                break;
            };
            self.queued.remove(&key);
            if !self.files.present(key) {
                keys.push(key);
            }
        }
        let (blocks, later) = engine.read_cached(&keys).await?;
        for key in later {
            if self.queued.insert(key) {
                self.queue.push_back(key);
            }
        }
        for b in &blocks {
            self.files
                .write(b)
                .map_err(|e| EngineError::Config(format!("{}: {e}", self.dir.display())))?;
            self.written += 1;
        }
        Ok(blocks.len())
    }

    /// Brings back from disk the full blocks of `tokens` (under `salt`) that follow those
    /// cached in memory, into the CPU tier; returns how many were imported.
    pub fn restore(
        &mut self,
        engine: &mut Engine,
        tokens: &[u32],
        salt: Option<&str>,
    ) -> Result<usize, EngineError> {
        let keys = prefix_keys(tokens, salt);
        let cached = engine.scheduler().cached_prefix_blocks(tokens, salt);
        let room = engine.runner_config().num_cpu_blocks;
        let per_block = engine.kv_layout().bytes_per_block() as usize;
        let mut data = Vec::new();
        let mut n = cached;
        while n < keys.len() && n - cached < room && self.files.present(keys[n]) {
            let parent = n.checked_sub(1).map(|p| keys[p]);
            match self.files.read(keys[n], per_block) {
                Some(b)
                    if b.parent == parent
                        && b.tokens[..] == tokens[n * BLOCK_SIZE..][..BLOCK_SIZE] =>
                {
                    data.extend_from_slice(&b.data)
                }
                _ => break,
            }
            n += 1;
        }
        if n == cached {
            return Ok(0);
        }
        let stored = engine.import_blocks_after(
            cached,
            &keys[..n],
            &tokens[..n * BLOCK_SIZE],
            salt,
            &data,
        )?;
        self.restored += stored as u64;
        Ok(stored)
    }
}

/// Names a model's bytes without reading them all: for a file, or each file of a folder (in
/// name order, not descending), its name, its length, its first MiB (a GGUF file's header
/// and tensor list; a Hugging Face folder's config) and its last 64 KiB.
pub fn model_files_id(path: &Path) -> io::Result<String> {
    let mut paths = if path.is_dir() {
        std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.path()))
            .filter(|p| p.as_ref().map_or(true, |p| p.is_file()))
            .collect::<io::Result<Vec<_>>>()?
    } else {
        vec![path.to_path_buf()]
    };
    paths.sort();
    let mut h = DefaultHasher::new();
    for p in paths {
        let mut f = std::fs::File::open(&p)?;
        let len = f.metadata()?.len();
        p.file_name().hash(&mut h);
        len.hash(&mut h);
        let mut head = Vec::new();
        (&mut f).take(1 << 20).read_to_end(&mut head)?;
        head.hash(&mut h);
        let tail_at = len.saturating_sub(64 << 10).max(head.len() as u64);
        f.seek(io::SeekFrom::Start(tail_at))?;
        let mut tail = Vec::new();
        f.read_to_end(&mut tail)?;
        tail.hash(&mut h);
    }
    Ok(format!("{:016x}", h.finish()))
}
