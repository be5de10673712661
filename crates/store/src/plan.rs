//! The query planner: which index a filter walks, and the resumable state of
//! a walk (so long scans can be time-sliced).

use std::collections::HashSet;
use std::sync::Arc;

use nostrwire_event::{EventId, Filter};

use crate::schema::{self, table};
use crate::Found;
use crate::ReadGate;

/// Largest authors × kinds product walked on the pubkey+kind index; above it
/// the author index alone is used.
const MAX_PAIR_PREFIXES: usize = 256;

/// One index range being walked newest → oldest.
#[derive(Clone, Debug)]
pub(crate) struct Range {
    pub(crate) prefix: Vec<u8>,
    /// Exclusive upper bound: the last entry (created_at, serial) already
    /// examined.
    pub(crate) resume_below: Option<schema::TimeEntry>,
    pub(crate) done: bool,
}

/// The access path chosen for a filter.
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    /// Direct id lookups (`ids`).
    Ids { ids: Vec<EventId>, next: usize },
    /// Reverse range scans over one index, one range per prefix, merged by time.
    Index {
        table: &'static str,
        ranges: Vec<Range>,
        /// Stored events whose entries still wait in `pending` and have a
        /// key in this index under one of the prefixes, as (created_at,
        /// serial), oldest first; read by the first slice, merged by time
        /// with the ranges, and consumed from the end.
        tail: Option<Vec<(u64, u64)>>,
    },
    /// NIP-50, first part: the stored events above the index's mark,
    /// tokenized a slice at a time (`lmdb.rs`, `scan_search_tail`); then
    /// [`Plan::Search`].
    SearchTail(Box<SearchTail>),
    /// NIP-50: the rarest term's postings walked newest serial first, each
    /// candidate probed for the other terms (`lmdb.rs`, `scan_search`).
    Search {
        /// Term key prefixes with their idf, rarest first.
        terms: Vec<(Vec<u8>, f64)>,
        /// Mean indexed length of an event (BM25).
        avg_len: f64,
        /// Matches among the stored events the index does not hold yet
        /// (serial, score), ranked by the first slice.
        tail: Vec<(u64, f64)>,
        /// Exclusive upper bound: the last serial examined.
        resume_below: Option<u64>,
        /// Index entries read so far (capped by the store's `search_max_reads`).
        reads: usize,
        done: bool,
    },
}

/// A search's walk of the events its index does not hold yet.
#[derive(Clone, Debug)]
pub(crate) struct SearchTail {
    /// The query's terms.
    pub(crate) terms: Vec<String>,
    /// The index's mark when the search was planned: the index answers for
    /// the events at or below it, this walk for those above.
    pub(crate) mark: u64,
    /// The last serial stored when the search was planned: the walk's end.
    pub(crate) upper: u64,
    /// The last serial walked so far.
    pub(crate) walked_to: u64,
    /// Events and tokens for BM25: the index's totals when planned, plus
    /// the events walked.
    pub(crate) docs: u64,
    pub(crate) tokens: u64,
    /// Events walked holding each term.
    pub(crate) df: Vec<u64>,
    /// Events walked holding every term: serial, term frequencies, length.
    pub(crate) matches: Vec<(u64, Vec<u16>, u16)>,
}

/// A search match awaiting ranking.
#[derive(Clone, Debug)]
pub(crate) struct Ranked {
    pub(crate) score: f64,
    pub(crate) created_at: u64,
    pub(crate) id: EventId,
    pub(crate) serial: u64,
}

/// Where a query stands; pass the same cursor to each `scan` call.
#[derive(Debug, Default)]
pub struct QueryCursor {
    pub(crate) plan: Option<Plan>,
    pub(crate) seen: HashSet<u64, foldhash::fast::RandomState>,
    /// Matches so far, in walk order (newest first).
    pub(crate) found: Vec<Found>,
    /// `created_at` of the `limit`-th match, once there are that many.
    pub(crate) boundary: Option<u64>,
    /// Index entries examined so far.
    pub examined: u64,
    /// Stop after this many matches (ties at the boundary are kept, then cut).
    pub limit: usize,
    /// Count only: do not render JSON or keep results.
    pub count_only: bool,
    /// Keep id and created_at of each match, without rendering JSON (NIP-77).
    pub ids_only: bool,
    /// Matches counted (count mode).
    pub counted: u64,
    /// Hides restricted kinds from those not entitled to them (NIP-42).
    pub gate: Option<Arc<dyn ReadGate>>,
    /// Keep each match's nwb record instead of rendering JSON.
    pub records: bool,
    /// With `records`: which matches keep their stored (compressed) form
    /// instead of the decompressed record (`nostrwire.v2` connections).
    pub as_stored: AsStored,
    /// The only filter of its request ([`QueryCursor::alone`]).
    pub(crate) alone: bool,
    /// `created_at` of the last index entry examined, so that a tie is seen
    /// across slices.
    pub(crate) last_time: Option<u64>,
    /// Render matches (JSON or record) only while the rendered ones hold
    /// fewer bytes than this; later matches keep their serial, id and time
    /// only ([`Found::is_deferred`]), and are rendered when they are sent.
    /// `None`: render every match.
    pub render_bytes: Option<usize>,
    /// Bytes of the matches rendered so far.
    pub(crate) rendered: usize,
    /// Search matches, unordered until the scan ends.
    pub(crate) ranked: Vec<Ranked>,
    /// `found` is in relevance order (a search), not newest first.
    pub(crate) by_rank: bool,
    /// A search with nothing else to test: its matches are ranked from
    /// their postings, and only those that can make the cut are loaded
    /// (their `created_at` and id break ties).
    pub(crate) rank_unloaded: bool,
    /// A search stopped at its read cap: results and counts may be short.
    pub(crate) capped: bool,
}

/// Which stored records a query returns as stored (compressed, exactly
/// the bytes on disk) rather than decompressed: what the reader can
/// decompress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AsStored {
    /// None: every record decompressed.
    #[default]
    Never,
    /// Records compressed without a dictionary (id 0): any zstd reader.
    WithoutDictionary,
    /// Every record as stored: the reader holds the store's dictionary set.
    Always,
}

impl AsStored {
    /// Whether `stored` (a stored record, raw or compressed) goes out as
    /// it is.
    pub fn keeps(self, stored: &[u8]) -> bool {
        match self {
            AsStored::Never => false,
            AsStored::Always => true,
            // Raw records, and records compressed without a dictionary.
            AsStored::WithoutDictionary => {
                stored.first() == Some(&nostrwire_wire::EVENT_V1)
                    || nostrwire_wire::transport::record_dictionary(stored) == Some(0)
            }
        }
    }
}

/// Outcome of one slice of a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanStatus {
    /// The query is complete.
    Done,
    /// The budget ran out; call `scan` again.
    More,
}

impl QueryCursor {
    /// A cursor returning at most `limit` events.
    pub fn new(limit: usize) -> QueryCursor {
        QueryCursor {
            limit,
            // Sized for a small limit's matches at once.
            seen: HashSet::with_capacity_and_hasher(limit.min(64), Default::default()),
            ..QueryCursor::default()
        }
    }

    /// A cursor that counts matches (up to `cap`).
    pub fn counting(cap: usize) -> QueryCursor {
        QueryCursor {
            limit: cap,
            count_only: true,
            ..QueryCursor::default()
        }
    }

    /// A cursor keeping the id and created_at of at most `limit` matches.
    pub fn ids(limit: usize) -> QueryCursor {
        QueryCursor {
            limit,
            ids_only: true,
            ..QueryCursor::default()
        }
    }

    /// The matches, cut to the limit: newest first with ties by lowest id,
    /// or, for a search, by relevance (ties newest first, then lowest id).
    pub fn into_results(mut self) -> Vec<Found> {
        if !self.by_rank {
            self.found
                .sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        }
        self.found.truncate(self.limit);
        self.found
    }

    /// The same cursor, showing restricted kinds only as `gate` allows.
    pub fn gated<G: ReadGate + 'static>(mut self, gate: Option<Arc<G>>) -> QueryCursor {
        self.gate = gate.map(|g| g as Arc<dyn ReadGate>);
        self
    }

    /// The same cursor, keeping nwb records (for binary connections)
    /// instead of JSON when `records` is true.
    pub fn with_records(mut self, records: bool) -> QueryCursor {
        self.records = records;
        self
    }

    /// The same cursor, keeping (with records) the matches `as_stored`
    /// allows in their stored form.
    pub fn as_stored(mut self, as_stored: AsStored) -> QueryCursor {
        self.as_stored = as_stored;
        self
    }

    /// The same cursor, marked as its request's only filter: its results
    /// are never merged with another filter's, so a match whose
    /// `created_at` no other match shares needs no id to be ordered. Then
    /// a scan whose index alone decides the filter (kinds, authors, both,
    /// or none, besides `since`/`until`) keeps the matches
    /// [`QueryCursor::as_stored`] allows without decompressing or decoding
    /// them; their [`Found::id`](crate::Found::id) is zero.
    pub fn alone(mut self) -> QueryCursor {
        self.alone = true;
        self
    }

    /// Whether matches may be kept as stored without decoding them: the
    /// index alone decides `filter` under `table`, and nothing else
    /// (a read gate, a count, ids only) needs the event.
    pub(crate) fn index_decides(&self, filter: &Filter, table: &str) -> bool {
        let shape = filter.ids.is_none()
            && filter.search.is_none()
            && filter.tags.is_empty()
            && match table {
                table::KIND => filter.authors.is_none() && filter.kinds.is_some(),
                table::PUBKEY_KIND => filter.authors.is_some() && filter.kinds.is_some(),
                table::PUBKEY => filter.authors.is_some() && filter.kinds.is_none(),
                table::CREATED => filter.authors.is_none() && filter.kinds.is_none(),
                _ => false,
            };
        shape
            && self.alone
            && self.records
            && self.as_stored != AsStored::Never
            && self.gate.is_none()
            && !self.count_only
            && !self.ids_only
    }

    /// The same cursor, rendering matches only while they hold fewer than
    /// `bytes` (see [`QueryCursor::render_bytes`]).
    pub fn rendering_at_most(mut self, bytes: usize) -> QueryCursor {
        self.render_bytes = Some(bytes);
        self
    }

    /// Whether the next match is rendered now, or deferred.
    pub(crate) fn renders_now(&self) -> bool {
        self.render_bytes.is_none_or(|max| self.rendered < max)
    }

    /// Matches held so far (a capacity hint for their results).
    pub fn found_len(&self) -> usize {
        self.found.len() + self.ranked.len()
    }

    /// Are the results ordered by relevance (a search filter)?
    pub fn is_ranked(&self) -> bool {
        self.by_rank
    }

    /// Did a search stop at its read cap (so a count is a lower bound)?
    pub fn is_capped(&self) -> bool {
        self.capped
    }

    /// Matches counted so far (count mode).
    pub fn count(&self) -> u64 {
        self.counted
    }

    /// Bytes the matches kept so far hold, besides what their rendered
    /// JSON or records hold (bounded by the cursor's `render_bytes`).
    pub fn held_bytes(&self) -> usize {
        // Each match: its `Found` (or `Ranked`) and its serial in `seen`.
        let per_match = std::mem::size_of::<Found>() + 2 * std::mem::size_of::<u64>();
        (self.found.len() + self.ranked.len()) * per_match + self.rendered
    }

    /// Bytes of the matches rendered so far (see
    /// [`QueryCursor::render_bytes`]).
    pub fn rendered_bytes(&self) -> usize {
        self.rendered
    }

    /// Serials of every match so far (to union counts across filters).
    pub fn seen_serials(&self) -> impl Iterator<Item = u64> + '_ {
        self.seen.iter().copied()
    }
}

fn ranges(prefixes: Vec<Vec<u8>>) -> Vec<Range> {
    prefixes
        .into_iter()
        .map(|prefix| Range {
            prefix,
            resume_below: None,
            done: false,
        })
        .collect()
}

/// Picks the most selective index for `filter`.
pub(crate) fn plan(filter: &Filter) -> Plan {
    if let Some(ids) = &filter.ids {
        return Plan::Ids {
            ids: ids.clone(),
            next: 0,
        };
    }
    if let (Some(authors), Some(kinds)) = (&filter.authors, &filter.kinds) {
        if authors.len() * kinds.len() <= MAX_PAIR_PREFIXES {
            let prefixes = authors
                .iter()
                .flat_map(|a| {
                    kinds
                        .iter()
                        .map(move |k| schema::pubkey_kind_prefix(a, *k).to_vec())
                })
                .collect();
            return Plan::Index {
                table: table::PUBKEY_KIND,
                ranges: ranges(prefixes),
                tail: None,
            };
        }
    }
    if let Some(authors) = &filter.authors {
        return Plan::Index {
            table: table::PUBKEY,
            ranges: ranges(authors.iter().map(|a| a.as_bytes().to_vec()).collect()),
            tail: None,
        };
    }
    if let Some(cond) = filter.tags.iter().min_by_key(|c| c.values.len()) {
        return Plan::Index {
            table: table::TAG,
            ranges: ranges(
                cond.values
                    .iter()
                    .map(|v| schema::tag_prefix(cond.letter, v).to_vec())
                    .collect(),
            ),
            tail: None,
        };
    }
    if let Some(kinds) = &filter.kinds {
        return Plan::Index {
            table: table::KIND,
            ranges: ranges(
                kinds
                    .iter()
                    .map(|k| schema::kind_prefix(*k).to_vec())
                    .collect(),
            ),
            tail: None,
        };
    }
    Plan::Index {
        table: table::CREATED,
        ranges: ranges(vec![Vec::new()]),
        tail: None,
    }
}
