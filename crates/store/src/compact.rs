//! Compaction: a packed copy of the database, in key order.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::path::Path;

use heed::types::Bytes;
use heed::{Env, EnvFlags, EnvOpenOptions, PutFlags};

use crate::lmdb::{Db, LmdbStore, MAX_TABLES, SEARCH_DIR};
use crate::schema::key;
use crate::schema::{self, table, TIME_SUFFIX};
use crate::{StoreError, StoreResult};

/// Entries per write transaction of a compacted copy (bounds its dirty
/// pages).
pub(crate) const COMPACT_CHUNK: u64 = 100_000;

/// Merges the blocks of a time-ordered index, read in key order, into full
/// blocks (`compact_to`).
pub(crate) struct BlockPacker {
    pub(crate) prefix_len: usize,
    pub(crate) max_bytes: usize,
    pub(crate) prefix: Vec<u8>,
    pub(crate) entries: Vec<schema::TimeEntry>,
}

/// Receives each packed block: key, value.
pub(crate) type EmitBlock<'a> = dyn FnMut(&[u8], &[u8]) -> StoreResult<()> + 'a;

impl BlockPacker {
    /// Entries held before the full blocks among them are emitted.
    const HELD: usize = 4096;

    pub(crate) fn new(prefix_len: usize, max_bytes: usize) -> BlockPacker {
        BlockPacker {
            prefix_len,
            max_bytes,
            prefix: Vec::new(),
            entries: Vec::new(),
        }
    }

    pub(crate) fn push(
        &mut self,
        key: &[u8],
        value: &[u8],
        emit: &mut EmitBlock<'_>,
    ) -> StoreResult<()> {
        if key.len() != self.prefix_len + TIME_SUFFIX {
            return Err(StoreError::Corrupt("bad time-ordered index key".into()));
        }
        if key[..self.prefix_len] != self.prefix[..] {
            self.flush(emit, true)?;
            self.prefix = key[..self.prefix_len].to_vec();
        }
        let before = self.entries.len();
        schema::decode_time_block(key, value, &mut self.entries).map_err(StoreError::Corrupt)?;
        if before > 0 && self.entries[before] <= self.entries[before - 1] {
            return Err(StoreError::Corrupt("overlapping index blocks".into()));
        }
        if self.entries.len() >= Self::HELD {
            self.flush(emit, false)?;
        }
        Ok(())
    }

    /// Emits the blocks held; all of them, or all but the last (which may
    /// take the next entries).
    pub(crate) fn flush(&mut self, emit: &mut EmitBlock<'_>, all: bool) -> StoreResult<()> {
        let mut blocks = schema::encode_time_blocks(&self.entries, self.max_bytes);
        let kept = if all { None } else { blocks.pop() };
        for (suffix, value) in &blocks {
            emit(&key(&[&self.prefix, suffix]), value)?;
        }
        match kept.and_then(|(suffix, _)| schema::split_time_suffix(&suffix)) {
            Some(first_kept) => {
                let at = self.entries.partition_point(|e| *e < first_kept);
                self.entries.drain(..at);
            }
            None => self.entries.clear(),
        }
        Ok(())
    }

    pub(crate) fn finish(&mut self, emit: &mut EmitBlock<'_>) -> StoreResult<()> {
        self.flush(emit, true)
    }
}

impl LmdbStore {
    /// Writes a compacted copy of the database to `dir/data.mdb` (and of
    /// the search index to `dir/search/data.mdb`): every
    /// table copied in key order with `MDB_APPEND`, so leaves are packed
    /// full (inserts in the middle of a tree leave them half full), the
    /// blocks of the time-ordered indexes merged into full blocks, and free
    /// pages gone. The copy is a consistent snapshot (one read
    /// transaction) and may be taken while the relay writes. `dir` is
    /// created if needed; an existing `data.mdb` there is refused, never
    /// overwritten. `progress` is told each table and the entries copied so
    /// far. Returns the size of the copy in bytes.
    pub fn compact_to(&self, dir: &Path, progress: &mut dyn FnMut(&str, u64)) -> StoreResult<u64> {
        let io = |e: std::io::Error| StoreError::Lmdb(heed::Error::Io(e));
        std::fs::create_dir_all(dir).map_err(io)?;
        let target = dir.join("data.mdb");
        if target.exists() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} already exists", target.display()),
            )));
        }
        // The search index first: its snapshot is then older than the
        // events', which hold every event it indexes and the removal rows
        // of every event removed since.
        let mut search_size = 0;
        if let Some(index) = &self.search {
            let search_dir = dir.join(SEARCH_DIR);
            std::fs::create_dir_all(&search_dir).map_err(io)?;
            search_size =
                self.copy_packed(&index.env, &search_dir, false, &mut |name, copied| {
                    progress(&format!("{SEARCH_DIR}/{name}"), copied)
                })?;
        }
        Ok(self.copy_packed(&self.env, dir, true, progress)? + search_size)
    }

    /// Copies every table of `source` into a new environment in `dir`, in
    /// key order with `MDB_APPEND` (packed leaves, no free pages), merging
    /// the blocks of the time-ordered indexes on the way when
    /// `merge_blocks` (the events' environment); one read snapshot,
    /// transactions of [`COMPACT_CHUNK`] entries, one sync at the end.
    /// Returns the size of the copy's file.
    pub(crate) fn copy_packed(
        &self,
        source: &Env,
        dir: &Path,
        merge_blocks: bool,
        progress: &mut dyn FnMut(&str, u64),
    ) -> StoreResult<u64> {
        let io = |e: std::io::Error| StoreError::Lmdb(heed::Error::Io(e));
        let target = dir.join("data.mdb");
        if target.exists() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} already exists", target.display()),
            )));
        }
        let mut options = EnvOpenOptions::new();
        options.map_size(source.info().map_size).max_dbs(MAX_TABLES);
        // SAFETY: a new environment in a directory that holds no database
        // (checked above), opened once, by this function only; without
        // syncs until the one at the end (a copy cut short is not used).
        let copy = unsafe {
            options.flags(EnvFlags::NO_SYNC);
            options.open(dir)?
        };
        let rtxn = source.read_txn()?;
        // Every table the environment holds, as its main database lists
        // them: a table added later is copied without being named here.
        let mut tables = Vec::new();
        if let Some(main) = source.open_database::<Bytes, Bytes>(&rtxn, None)? {
            for item in main.iter(&rtxn)? {
                let name = String::from_utf8_lossy(item?.0).into_owned();
                if let Some(db) = source.open_database::<Bytes, Bytes>(&rtxn, Some(&name))? {
                    tables.push((name, db));
                }
            }
        }
        for (name, table) in &tables {
            let mut wtxn = copy.write_txn()?;
            let target: Db = copy.create_database(&mut wtxn, Some(name))?;
            let mut copied = 0u64;
            // The time-ordered indexes are merged into full blocks on the way.
            let mut packer = (merge_blocks && table::TIME_ORDERED.contains(&name.as_str()))
                .then(|| BlockPacker::new(schema::time_prefix_len(name), self.block_bytes));
            for item in table.iter(&rtxn)? {
                let (k, v) = item?;
                let mut append = |k: &[u8], v: &[u8]| -> StoreResult<()> {
                    target.put_with_flags(&mut wtxn, PutFlags::APPEND, k, v)?;
                    Ok(())
                };
                match packer.as_mut() {
                    Some(packer) => packer.push(k, v, &mut append)?,
                    None => append(k, v)?,
                }
                copied += 1;
                if copied % COMPACT_CHUNK == 0 {
                    wtxn.commit()?;
                    wtxn = copy.write_txn()?;
                    progress(name, copied);
                }
            }
            if let Some(packer) = packer.as_mut() {
                packer.finish(&mut |k, v| {
                    target.put_with_flags(&mut wtxn, PutFlags::APPEND, k, v)?;
                    Ok(())
                })?;
            }
            wtxn.commit()?;
            progress(name, copied);
        }
        copy.force_sync()?;
        drop(copy);
        Ok(std::fs::metadata(&target).map_err(io)?.len())
    }
}
