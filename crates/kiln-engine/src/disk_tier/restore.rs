//! Blocks read back from disk for the requests about to be admitted: a prompt's full blocks
//! after those cached in memory, as far as the files go on, imported into the CPU tier,
//! where the request's lookup finds them.
//!
//! In three parts, so the files can be read on another thread while steps run:
//! [`DiskTier::plan_reads`] picks the requests at the head of the waiting queue whose next
//! blocks are on disk, holds each (admission stops at it; running requests go on) and
//! names what to read ([`ReadJob`]); [`DiskFiles::read_job`] reads it ([`Loaded`]), on any
//! thread; [`DiskTier::import_loaded`] imports what was read into the CPU tier and lets the
//! request go. [`DiskTier::restore`] reads one prompt's blocks in place.
//!
//! Blocks come back when their request is about to use them, not while it waits behind others
//! whose imports would push them out again: the first waiting request, and up to 8 in all
//! while half the CPU tier holds them. Memory may change while a job is read (blocks said to
//! be cached evicted, others cached by a request that ran meanwhile): the import skips what is
//! cached and stops where the chain before it is gone, and the request computes the rest.

use kiln_core::BLOCK_SIZE;
use kiln_scheduler::prefix_keys;

use super::{DiskFiles, DiskTier};
use crate::{Engine, EngineError};

/// Most waiting requests whose blocks are read back at once.
const HEADS: usize = 8;

/// The blocks of a waiting request's prompt to read from disk.
#[derive(Clone, Debug)]
pub struct ReadJob {
    id: u64,
    /// The prompt's keys up to the last block on disk.
    keys: Vec<u64>,
    /// The tokens of those blocks.
    tokens: Vec<u32>,
    salt: Option<String>,
    /// Leading blocks cached in memory (not read).
    cached: usize,
    per_block: usize,
}

/// What [`DiskFiles::read_job`] read: the job, cut to the blocks that checked out, and their
/// bytes.
#[derive(Debug)]
pub struct Loaded {
    job: ReadJob,
    data: Vec<u8>,
}

impl Loaded {
    /// Blocks read.
    pub fn len(&self) -> usize {
        self.job.keys.len() - self.job.cached
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl DiskFiles {
    /// Reads a job's blocks in order, stopping at the first that is gone or does not check
    /// out (its key, its parent's key, its tokens, its bytes). Holds the folder's listing only
    /// between files.
    pub fn read_job(&self, job: ReadJob) -> Loaded {
        let mut data = Vec::with_capacity((job.keys.len() - job.cached) * job.per_block);
        let mut n = job.cached;
        while n < job.keys.len() {
            let key = job.keys[n];
            let Some(path) = self.files().locate(key) else {
                break;
            };
            let block = super::files::read_file(&path, key, job.per_block);
            self.files().was_read(key, block.is_some());
            let parent = n.checked_sub(1).map(|p| job.keys[p]);
            match block {
                Some(b)
                    if b.parent == parent
                        && b.tokens[..] == job.tokens[n * BLOCK_SIZE..][..BLOCK_SIZE] =>
                {
                    data.extend_from_slice(&b.data)
                }
                _ => break,
            }
            n += 1;
        }
        let mut job = job;
        job.keys.truncate(n);
        job.tokens.truncate(n * BLOCK_SIZE);
        Loaded { job, data }
    }
}

impl DiskTier {
    /// The requests at the head of the waiting queue whose next blocks only the disk holds:
    /// each is held until its blocks are imported ([`Self::import_loaded`]), and its job is
    /// returned, to be read by [`DiskFiles::read_job`] and handed back by [`Self::loaded`].
    /// A request already being read for is passed over.
    pub fn plan_reads(&mut self, engine: &mut Engine) -> Vec<ReadJob> {
        let room = engine.runner_config().num_cpu_blocks;
        let per_block = engine.kv_layout().bytes_per_block() as usize;
        // The first request always; up to HEADS after it while half the CPU tier holds them.
        let mut budget = room / 2;
        let mut jobs = Vec::new();
        for (i, h) in engine.waiting_heads(HEADS).into_iter().enumerate() {
            if i > 0 && h.keys.len() > budget {
                break;
            }
            budget = budget.saturating_sub(h.keys.len());
            if !self.reading.contains(&h.id) {
                let cached = (h.cached_blocks, room, per_block);
                jobs.extend(self.job_for(h.id, h.keys, h.tokens, h.salt, cached));
            }
        }
        jobs.retain(|j| engine.hold_request(j.id));
        self.reading.extend(jobs.iter().map(|j| j.id));
        jobs
    }

    /// The job that reads the blocks of `tokens` after the `cached` ones in memory, as far
    /// as the files go on (at most `room`, the CPU tier's capacity); `None` if the disk has
    /// none of them.
    fn job_for(
        &self,
        id: u64,
        keys: &[u64],
        tokens: &[u32],
        salt: Option<&str>,
        (cached, room, per_block): (usize, usize, usize),
    ) -> Option<ReadJob> {
        let mut n = cached;
        let mut files = self.files.files();
        while n < keys.len() && n - cached < room && files.present(keys[n]) {
            n += 1;
        }
        (n > cached).then(|| ReadJob {
            id,
            keys: keys[..n].to_vec(),
            tokens: tokens[..n * BLOCK_SIZE].to_vec(),
            salt: salt.map(str::to_string),
            cached,
            per_block,
        })
    }

    /// Takes the blocks read for a job of [`Self::plan_reads`]; dropped if this tier did
    /// not plan it (one opened before the engine was rebuilt did).
    pub fn loaded(&mut self, loaded: Loaded) {
        if self.reading.contains(&loaded.job.id) {
            self.loaded.push(loaded);
        }
    }

    /// Imports the blocks read into the CPU tier and lets their requests be admitted; returns
    /// how many were imported. Waits (returns 0) while a step in flight moves blocks to the
    /// CPU tier ([`Engine::can_import`]).
    pub fn import_loaded(&mut self, engine: &mut Engine) -> Result<usize, EngineError> {
        if !engine.can_import() {
            return Ok(0);
        }
        let mut stored = 0;
        let mut failed = None;
        for l in std::mem::take(&mut self.loaded) {
            match self.import(engine, &l) {
                Ok(n) => stored += n,
                Err(e) => failed = Some(e),
            }
            self.reading.remove(&l.job.id);
            engine.release_request(l.job.id);
        }
        failed.map_or(Ok(stored), Err)
    }

    fn import(&mut self, engine: &mut Engine, l: &Loaded) -> Result<usize, EngineError> {
        if l.is_empty() {
            return Ok(0);
        }
        let j = &l.job;
        let stored =
            engine.import_blocks_after(j.cached, &j.keys, &j.tokens, j.salt.as_deref(), &l.data)?;
        self.restored += stored as u64;
        Ok(stored)
    }

    /// Brings back from disk the full blocks of `tokens` (under `salt`) that follow those
    /// cached in memory, into the CPU tier, reading the files here; returns how many were
    /// imported (0 while [`Engine::can_import`] says no).
    pub fn restore(
        &mut self,
        engine: &mut Engine,
        tokens: &[u32],
        salt: Option<&str>,
    ) -> Result<usize, EngineError> {
        if !engine.can_import() {
            return Ok(0);
        }
        let keys = prefix_keys(tokens, salt);
        let cached = engine.scheduler().cached_prefix_blocks(&keys, tokens, salt);
        let room = engine.runner_config().num_cpu_blocks;
        let per_block = engine.kv_layout().bytes_per_block() as usize;
        match self.job_for(u64::MAX, &keys, tokens, salt, (cached, room, per_block)) {
            Some(job) => {
                let loaded = self.files.read_job(job);
                self.import(engine, &loaded)
            }
            None => Ok(0),
        }
    }
}
