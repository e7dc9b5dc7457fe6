//! The disk tier: cached KV blocks kept in files below the CPU tier, so a prefix outlives
//! its eviction from memory and the process itself. An agent's session that went quiet while
//! a tool ran, or a server restarted for a deploy, reads its blocks back instead of
//! computing its prompt again.
//!
//! Blocks reach the disk by write-behind: the KV events of the prefix cache name each block
//! as it is cached ([`DiskTier::note`]), and [`DiskTier::read_batch`] reads queued blocks by
//! key, from the GPU or the CPU tier, wherever they are still cached (a block evicted before
//! its turn is skipped), for the folder's [`DiskFiles`] to write, on another thread if the
//! caller likes ([`DiskTier::save`] does both). Under memory pressure a block can fall out of the
//! CPU tier before its turn: the engine hands over the blocks the CPU tier drops, with their
//! bytes ([`Engine::enable_spill`]), and those not on disk are written then
//! ([`DiskTier::spilled`]), so the disk holds what memory lets go. They come back for the
//! requests at the head of the waiting queue (`restore.rs`): the prompt's full blocks after
//! those cached in memory, as far as the files go on, are imported into the CPU tier, where
//! the request's lookup finds them and the scheduler restores them as it does any cold
//! block. So the CPU tier must be on; at most its capacity comes back per request.
//!
//! Files are kept per model and engine (`dir/<fingerprint>/`): the model's identity, kiln's
//! version, the adapter and driver, the kernel family, the KV layout and the weights' storage,
//! since each changes the bytes of the KV; a folder only ever serves the engine that wrote it.
//! Keys are the prefix cache's own chained hashes (cache salt included), and a file is loaded
//! only if its key, its parent's key, its tokens and a hash of its bytes all check out.

mod files;
mod restore;

use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use kiln_scheduler::KvEvent;

use crate::{Engine, EngineError, SavedBlock};
use files::BlockFiles;
pub use restore::{Loaded, ReadJob};

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
    files: DiskFiles,
    queue: VecDeque<u64>,
    queued: HashSet<u64>,
    restored: u64,
    /// Held requests whose blocks are being read ([`DiskTier::plan_reads`]).
    reading: HashSet<u64>,
    /// Blocks read for them, waiting to be imported ([`DiskTier::import_loaded`]).
    loaded: Vec<Loaded>,
}

/// The folder's files: writes the blocks [`DiskTier::read_batch`] reads from the cache, and
/// reads the blocks [`DiskTier::plan_reads`] asks for; cloned onto other threads, it keeps
/// the encoding, the writing and the reading off the engine's.
#[derive(Clone)]
pub struct DiskFiles {
    files: Arc<Mutex<BlockFiles>>,
    dir: PathBuf,
    written: Arc<AtomicU64>,
}

impl DiskFiles {
    fn files(&self) -> MutexGuard<'_, BlockFiles> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `blocks`, each as the newest file; stops at the first that fails.
    pub fn write(&self, blocks: &[SavedBlock]) -> io::Result<()> {
        for b in blocks {
            let len = files::write_file(&self.dir, b)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.dir.display())))?;
            self.files().written(b.key, len);
            self.written.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Fills in what the folder holds and what was written: every field of `s` but
    /// `blocks_restored` and `pending`.
    pub fn fill(&self, s: &mut DiskTierStats) {
        let files = self.files();
        s.blocks_written = self.written.load(Ordering::Relaxed);
        s.blocks_evicted = files.evicted;
        s.blocks_resident = files.len();
        s.bytes_resident = files.bytes();
    }
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
            files: DiskFiles {
                files: Arc::new(Mutex::new(files)),
                dir,
                written: Arc::default(),
            },
            queue: VecDeque::new(),
            queued: HashSet::new(),
            restored: 0,
            reading: HashSet::new(),
            loaded: Vec::new(),
        })
    }

    /// The folder this engine's blocks are kept in.
    pub fn dir(&self) -> &Path {
        &self.files.dir
    }

    /// The folder's files, to write the batches [`Self::read_batch`] reads, and read the
    /// jobs [`Self::plan_reads`] plans, elsewhere.
    pub fn files(&self) -> DiskFiles {
        self.files.clone()
    }

    /// Keys waiting to be saved.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    pub fn stats(&self) -> DiskTierStats {
        let mut s = DiskTierStats {
            blocks_restored: self.restored,
            pending: self.queue.len(),
            ..DiskTierStats::default()
        };
        self.files.fill(&mut s);
        s
    }

    /// Queues the blocks the events announce cached that are not on disk yet. The engine's
    /// KV events must be on ([`Engine::enable_kv_events`]).
    pub fn note(&mut self, events: &[KvEvent]) {
        for e in events {
            match e {
                KvEvent::BlockStored { hashes, .. } => {
                    let mut files = self.files.files();
                    for &key in hashes {
                        if !files.present(key) && self.queued.insert(key) {
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

    /// Of the blocks the CPU tier dropped (the engine's [`Engine::take_spilled`]), those not
    /// on disk yet, for the writer: a block falling out of memory is written then, whether
    /// or not its turn in the queue came.
    pub fn spilled(&mut self, blocks: Vec<SavedBlock>) -> Vec<SavedBlock> {
        let mut files = self.files.files();
        blocks
            .into_iter()
            .filter(|b| !files.present(b.key))
            .collect()
    }

    /// Removes every block file in the folder (with the prefix cache's reset) and forgets
    /// what waits to be written; returns how many files were removed. Reads in flight find
    /// nothing.
    pub fn clear(&mut self) -> io::Result<usize> {
        self.forget_queue();
        self.files.files().clear()
    }

    /// Drops the queue (the engine was rebuilt: its blocks are gone).
    pub fn forget_queue(&mut self) {
        self.queue.clear();
        self.queued.clear();
    }

    /// Reads up to `most` queued blocks that are still cached, for the writer. Blocks in the
    /// CPU tier while a step is in flight wait in the queue.
    pub async fn read_batch(
        &mut self,
        engine: &mut Engine,
        most: usize,
    ) -> Result<Vec<SavedBlock>, EngineError> {
        let mut keys = Vec::new();
        {
            let mut files = self.files.files();
            while keys.len() < most {
                let Some(key) = self.queue.pop_front() else {
                    break;
                };
                self.queued.remove(&key);
                if !files.present(key) {
                    keys.push(key);
                }
            }
        }
        let (blocks, later) = engine.read_cached(&keys).await?;
        for key in later {
            if self.queued.insert(key) {
                self.queue.push_back(key);
            }
        }
        Ok(blocks)
    }

    /// Reads up to `most` queued blocks and writes them here; returns how many were written.
    pub async fn save(&mut self, engine: &mut Engine, most: usize) -> Result<usize, EngineError> {
        let blocks = self.read_batch(engine, most).await?;
        self.files
            .write(&blocks)
            .map_err(|e| EngineError::Config(e.to_string()))?;
        Ok(blocks.len())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_named_by_its_bytes_not_its_place() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for d in [&a, &b] {
            std::fs::write(d.path().join("model.gguf"), &bytes).unwrap();
        }
        let id = |p: &Path| model_files_id(p).unwrap();
        let file = id(&a.path().join("model.gguf"));
        assert_eq!(file, id(&b.path().join("model.gguf")));
        assert_eq!(id(a.path()), id(b.path()), "a folder, by its files");
        // A change in the header, the tail or the length names another model.
        let n = bytes.len();
        for (at, len) in [(Some(100), n), (Some(n - 10), n), (None, n - 1)] {
            let mut other = bytes[..len].to_vec();
            if let Some(at) = at {
                other[at] ^= 1;
            }
            std::fs::write(b.path().join("model.gguf"), &other).unwrap();
            assert_ne!(
                file,
                id(&b.path().join("model.gguf")),
                "{at:?}, length {len}"
            );
        }
        std::fs::write(b.path().join("model.gguf"), &bytes).unwrap();
        std::fs::write(b.path().join("config.json"), b"{}").unwrap();
        assert_ne!(id(a.path()), id(b.path()), "another file in the folder");
    }
}
