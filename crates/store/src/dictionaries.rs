//! The database's compression dictionaries: the set it holds, and
//! training one from its own events.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::ops::Bound;

use heed::RwTxn;
use nostrwire_event::{Kind, PreimageFields};
use nostrwire_wire::compress::DictSet;

use crate::lmdb::{Db, LmdbStore, OpenOptions};
use crate::value::decode;
use crate::{StoreError, StoreResult};

/// Most stored records a trained dictionary set learns from (the newest).
pub(crate) const DICTIONARY_SAMPLES: usize = 20_000;

impl LmdbStore {
    /// The dictionary set records are compressed with: the one the database
    /// holds, else the configured file (then stored), else none. A database
    /// keeps its set for good: its records name the set's ids.
    pub(crate) fn dictionaries(
        wtxn: &mut RwTxn<'_>,
        meta: Db,
        options: &OpenOptions,
    ) -> StoreResult<(&'static DictSet, Option<Vec<u8>>)> {
        let bad = |what: String| StoreError::Dictionaries(what);
        let configured = match &options.dictionaries {
            Some(path) => Some(
                std::fs::read(path)
                    .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?,
            ),
            None => None,
        };
        let stored = meta.get(wtxn, b"dicts")?.map(<[u8]>::to_vec);
        let bytes = match (stored, configured) {
            (Some(stored), Some(configured)) if stored != configured => {
                return Err(bad(
                    "the database already holds a different dictionary set; \
                     records compressed with it need it, so it cannot be replaced"
                        .into(),
                ))
            }
            (Some(stored), _) => Some(stored),
            (None, Some(configured)) => {
                meta.put(wtxn, b"dicts", &configured)?;
                Some(configured)
            }
            (None, None) => None,
        };
        let level = options.compression_level.max(1);
        let set = match &bytes {
            Some(bytes) => {
                // The configured level, not the one the set file names
                // (`dict train` defaults to 19, several times the CPU of 3).
                DictSet::from_bytes_at_level(bytes, level)
                    .map_err(|e| bad(format!("bad dictionary set: {e}")))?
            }
            None => DictSet::new(level, Vec::new())
                .map_err(|e| bad(format!("cannot prepare zstd: {e}")))?,
        };
        // One small, bounded leak per opened store (normally once per process).
        Ok((Box::leak(Box::new(set)), bytes))
    }

    /// The dictionary set records are compressed with now.
    pub(crate) fn dicts(&self) -> &'static DictSet {
        *self.dicts.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Samples for a dictionary set: the newest stored records (at most
    /// [`DICTIONARY_SAMPLES`]), uncompressed, with their kinds.
    pub(crate) fn dictionary_samples(&self) -> StoreResult<Vec<(Kind, Vec<u8>)>> {
        let txn = self.env.read_txn()?;
        let mut samples = Vec::new();
        let all = (Bound::Unbounded, Bound::Unbounded);
        for item in self
            .stored_range(&txn, &all, true)?
            .take(DICTIONARY_SAMPLES)
        {
            let (k, value) = item?;
            let (_, record) = self.read_value(&txn, k, value)?;
            let kind = decode(&record)?.kind();
            samples.push((kind, record.into_owned()));
        }
        Ok(samples)
    }
}
