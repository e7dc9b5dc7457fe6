//! The disk tier's files: one file per KV block, named by its prefix-cache key, in a folder
//! per model and engine, least recently used removed first when the folder outgrows its size.
//!
//! A file is written whole under a temporary name and renamed, so a reader never sees half a
//! block; it carries its key, its parent's key, its tokens and a hash of its bytes, and one
//! that does not check out (damaged, truncated, another layout) is deleted, never loaded.
//!
//! Engines may share a folder: a block another one wrote after the listing is found by its
//! name when asked for (`present`), and one it removed is forgotten when its read fails.
//! Each keeps the folder within its size over the files it knows of.
//!
//! Files are written and read without holding the listing ([`write_file`], [`read_file`]),
//! which is told after ([`BlockFiles::written`], [`BlockFiles::was_read`]).
//!
//! Cost: `contains` is O(1), `present` one `stat` when the block is not listed; a write and
//! a read are one file each plus O(log n) for the recency order; opening reads the folder's
//! listing, not the files.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use kiln_core::BLOCK_SIZE;

use crate::SavedBlock;

const MAGIC: &[u8; 8] = b"KILNKVB1";
/// Magic, key, parent flag and key, tokens, data length, data hash.
const HEADER: usize = 8 + 8 + 1 + 8 + 4 * BLOCK_SIZE + 8 + 8;
const EXT: &str = "kvb";

pub(crate) struct BlockFiles {
    dir: PathBuf,
    max_bytes: u64,
    bytes: u64,
    /// Key to (file length, last use).
    files: HashMap<u64, (u64, u64)>,
    /// Last use to key, oldest first.
    recency: BTreeMap<u64, u64>,
    tick: u64,
    pub evicted: u64,
}

impl BlockFiles {
    /// Opens (creating) `dir`, lists the blocks already there, oldest first by modification
    /// time, and removes what a crash left half written.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".tmp") {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let Some(key) = name
                .strip_suffix(&format!(".{EXT}"))
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            else {
                continue;
            };
            let meta = entry.metadata()?;
            let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
            found.push((modified, key, meta.len()));
        }
        found.sort();
        let mut files = Self {
            dir: dir.to_path_buf(),
            max_bytes,
            bytes: 0,
            files: HashMap::new(),
            recency: BTreeMap::new(),
            tick: 0,
            evicted: 0,
        };
        for (_, key, len) in found {
            files.add(key, len);
        }
        files.evict();
        Ok(files)
    }

    pub fn contains(&self, key: u64) -> bool {
        self.files.contains_key(&key)
    }

    /// Whether the block under `key` is here: listed, or written since the listing by
    /// another engine sharing the folder (then listed from now on, as the newest).
    pub fn present(&mut self, key: u64) -> bool {
        if self.contains(key) {
            return true;
        }
        match std::fs::metadata(self.path(key)) {
            Ok(meta) if meta.is_file() => {
                self.add(key, meta.len());
                self.evict();
                self.contains(key)
            }
            _ => false,
        }
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn path(&self, key: u64) -> PathBuf {
        self.dir.join(format!("{key:016x}.{EXT}"))
    }

    fn add(&mut self, key: u64, len: u64) {
        self.tick += 1;
        if let Some((old_len, used)) = self.files.insert(key, (len, self.tick)) {
            self.recency.remove(&used);
            self.bytes -= old_len;
        }
        self.recency.insert(self.tick, key);
        self.bytes += len;
    }

    fn forget(&mut self, key: u64) {
        if let Some((len, used)) = self.files.remove(&key) {
            self.recency.remove(&used);
            self.bytes -= len;
        }
        let _ = std::fs::remove_file(self.path(key));
    }

    /// Removes the least recently used files until the folder fits its size.
    fn evict(&mut self) {
        while self.bytes > self.max_bytes {
            let Some((_, key)) = self.recency.pop_first() else {
                break;
            };
            self.forget(key);
            self.evicted += 1;
        }
    }

    /// Writes `b` as the newest file (a block larger than the whole folder is not kept).
    #[cfg(test)]
    pub fn write(&mut self, b: &SavedBlock) -> io::Result<()> {
        let len = write_file(&self.dir, b)?;
        self.written(b.key, len);
        Ok(())
    }

    /// Lists a block [`write_file`] wrote, `len` bytes, as the newest.
    pub fn written(&mut self, key: u64, len: u64) {
        self.add(key, len);
        self.evict();
    }

    /// Removes every block file in the folder, those other engines sharing it wrote too;
    /// returns how many.
    pub fn clear(&mut self) -> io::Result<usize> {
        let mut removed = 0;
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == EXT) {
                match std::fs::remove_file(&path) {
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.files.clear();
        self.recency.clear();
        self.bytes = 0;
        Ok(removed)
    }

    /// Reads the block under `key` if it is here and whole with `data_len` bytes of KV
    /// ([`Self::locate`], [`read_file`], [`Self::was_read`] in one).
    #[cfg(test)]
    pub fn read(&mut self, key: u64, data_len: usize) -> Option<SavedBlock> {
        let path = self.locate(key)?;
        let block = read_file(&path, key, data_len);
        self.was_read(key, block.is_some());
        block
    }

    /// The file of the block under `key`, if it is here; for [`read_file`], which needs
    /// no hold on the listing, and then [`Self::was_read`].
    pub fn locate(&mut self, key: u64) -> Option<PathBuf> {
        self.present(key).then(|| self.path(key))
    }

    /// After [`read_file`]: a block read becomes the most recently used; a file that did not
    /// check out is deleted, and one gone (removed by another engine sharing the folder) is
    /// forgotten.
    pub fn was_read(&mut self, key: u64, ok: bool) {
        if !ok {
            return self.forget(key);
        }
        if let Some(&(len, _)) = self.files.get(&key) {
            self.add(key, len);
            // The recency order outlives a restart through the modification time.
            let _ = std::fs::File::options()
                .write(true)
                .open(self.path(key))
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        }
    }
}

/// Reads the block file at `path` if it is whole, under `key`, with `data_len` bytes of KV.
pub(crate) fn read_file(path: &Path, key: u64, data_len: usize) -> Option<SavedBlock> {
    let bytes = std::fs::read(path).ok()?;
    decode(&bytes, key, data_len)
}

/// Writes `b`'s file into `dir` (whole, then renamed); returns its length. Lists nothing:
/// the caller tells the folder's [`BlockFiles`] ([`BlockFiles::written`]), so the encoding and
/// the writing need not hold it.
pub(crate) fn write_file(dir: &Path, b: &SavedBlock) -> io::Result<u64> {
    let bytes = encode(b);
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!("{:016x}.{EXT}", b.key));
    // A name of its own, so writers sharing the folder never write into one file.
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(
        "{:016x}.{}-{serial}.tmp",
        b.key,
        std::process::id()
    ));
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(&tmp, &path)?;
    Ok(bytes.len() as u64)
}

fn data_hash(data: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(data);
    h.finish()
}

fn encode(b: &SavedBlock) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + b.data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&b.key.to_le_bytes());
    out.push(b.parent.is_some() as u8);
    out.extend_from_slice(&b.parent.unwrap_or(0).to_le_bytes());
    for t in b.tokens {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.extend_from_slice(&(b.data.len() as u64).to_le_bytes());
    out.extend_from_slice(&data_hash(&b.data).to_le_bytes());
    out.extend_from_slice(&b.data);
    out
}

fn decode(bytes: &[u8], key: u64, data_len: usize) -> Option<SavedBlock> {
    if bytes.len() != HEADER + data_len || &bytes[..8] != MAGIC {
        return None;
    }
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    if u64_at(8) != key || u64_at(HEADER - 16) != data_len as u64 {
        return None;
    }
    let parent = match bytes[16] {
        0 => None,
        1 => Some(u64_at(17)),
        _ => return None,
    };
    let mut tokens = [0u32; BLOCK_SIZE];
    for (i, t) in tokens.iter_mut().enumerate() {
        let at = 25 + 4 * i;
        *t = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    }
    let data = &bytes[HEADER..];
    (data_hash(data) == u64_at(HEADER - 8)).then(|| SavedBlock {
        key,
        parent,
        tokens,
        data: data.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(key: u64, fill: u8) -> SavedBlock {
        SavedBlock {
            key,
            parent: key.checked_sub(1),
            tokens: std::array::from_fn(|i| key as u32 * 100 + i as u32),
            data: vec![fill; 100],
        }
    }

    #[test]
    fn blocks_round_trip_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = BlockFiles::open(dir.path(), 1 << 20).unwrap();
        f.write(&block(0, 7)).unwrap();
        f.write(&block(1, 9)).unwrap();
        assert_eq!(f.read(1, 100), Some(block(1, 9)));
        assert_eq!(f.read(1, 99), None, "another layout's block is refused");
        assert!(!f.contains(1), "and deleted");
        let mut again = BlockFiles::open(dir.path(), 1 << 20).unwrap();
        assert_eq!((again.len(), again.bytes()), (1, (HEADER + 100) as u64));
        assert_eq!(again.read(0, 100), Some(block(0, 7)));
    }

    #[test]
    fn a_damaged_or_half_written_file_is_never_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = BlockFiles::open(dir.path(), 1 << 20).unwrap();
        f.write(&block(5, 1)).unwrap();
        f.write(&block(6, 1)).unwrap();
        let path = f.path(5);
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(f.read(5, 100), None);
        assert!(!path.exists());
        // A file renamed to another key's name does not pass as that block.
        std::fs::rename(f.path(6), f.path(8)).unwrap();
        std::fs::write(dir.path().join("0000000000000009.tmp"), b"half").unwrap();
        let mut f = BlockFiles::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(f.read(8, 100), None);
        assert!(!dir.path().join("0000000000000009.tmp").exists());
        assert_eq!(f.len(), 0);
    }

    #[test]
    fn blocks_another_engine_writes_or_removes_are_found_or_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let mut mine = BlockFiles::open(dir.path(), 1 << 20).unwrap();
        let mut theirs = BlockFiles::open(dir.path(), 1 << 20).unwrap();
        theirs.write(&block(3, 4)).unwrap();
        assert!(!mine.contains(3));
        assert_eq!(mine.read(3, 100), Some(block(3, 4)));
        assert_eq!((mine.len(), mine.bytes()), (1, (HEADER + 100) as u64));
        theirs.forget(3);
        assert_eq!(mine.read(3, 100), None);
        assert_eq!((mine.len(), mine.bytes()), (0, 0));
        assert!(!mine.present(4));
        // Clearing removes every block file, another engine's too, and nothing else.
        theirs.write(&block(5, 1)).unwrap();
        mine.write(&block(6, 1)).unwrap();
        std::fs::write(dir.path().join("engine.txt"), b"kept").unwrap();
        assert_eq!(mine.clear().unwrap(), 2);
        assert_eq!((mine.len(), mine.bytes()), (0, 0));
        assert!(!mine.present(5) && !mine.present(6));
        assert!(dir.path().join("engine.txt").exists());
    }

    #[test]
    fn the_least_recently_used_files_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let one = (HEADER + 100) as u64;
        let mut f = BlockFiles::open(dir.path(), 3 * one).unwrap();
        for k in 0..3 {
            f.write(&block(k, 0)).unwrap();
        }
        assert!(f.read(0, 100).is_some()); // 0 is now the newest
        f.write(&block(3, 0)).unwrap();
        assert!(!f.contains(1) && f.contains(0) && f.contains(2) && f.contains(3));
        assert_eq!((f.evicted, f.bytes()), (1, 3 * one));
        assert!(!f.path(1).exists());
        // A smaller limit on reopening trims the folder.
        let f = BlockFiles::open(dir.path(), 2 * one).unwrap();
        assert_eq!(f.len(), 2);
    }
}
