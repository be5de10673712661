//! Answering searches: planning, ranking by BM25, and the events the
//! index does not hold yet.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::ops::Bound;

use heed::RoTxn;
use nostrwire_event::{EventId, Filter, PreimageFields, SignedFields};

use crate::lmdb::LmdbStore;
use crate::plan::{Plan, QueryCursor, Ranked, ScanStatus, SearchTail};
use crate::schema::{self, Posting};
use crate::search::index::{block_serial, postings, SearchSnapshot};
use crate::search::{self, Query};
use crate::value::{decode, ValueHeader};
use crate::{StoreError, StoreResult};

impl LmdbStore {
    /// The search plan for `filter`, or `None` when nothing can match
    /// (search off, no usable terms, or a term no event holds).
    /// Plans a search: `search` reads the index, `txn` the stored events
    /// (a snapshot taken after the index's).
    pub(crate) fn plan_search(
        &self,
        search: &SearchSnapshot<'_>,
        txn: &RoTxn<'_>,
        filter: &Filter,
    ) -> StoreResult<Option<Plan>> {
        let (index, stxn) = (search.index, &search.txn);
        let Some(text) = filter.search.as_deref() else {
            return Ok(None);
        };
        let Some(mark) = index.indexed(stxn)? else {
            return Ok(None);
        };
        let last = self.last_serial(txn)?;
        if last.saturating_sub(mark) > self.search_max_unindexed {
            return Err(StoreError::SearchBehind {
                indexed: mark,
                stored: last,
            });
        }
        let (docs, tokens) = index.totals(stxn)?;
        let query = Query::parse(text);
        if query.terms.is_empty() {
            return Ok(None);
        }
        let df = vec![0; query.terms.len()];
        Ok(Some(Plan::SearchTail(Box::new(SearchTail {
            terms: query.terms,
            mark,
            upper: last,
            walked_to: mark,
            docs,
            tokens,
            df,
            matches: Vec::new(),
        }))))
    }

    /// Tokenizes at most `budget` of the stored events above the index's
    /// mark (those stored when the search was planned), with the same rules
    /// as the index; once all are walked, plans the walk of the index
    /// ([`Plan::Search`]), or ends the search when a term is nowhere.
    pub(crate) fn scan_search_tail(
        &self,
        search: &SearchSnapshot<'_>,
        txn: &RoTxn<'_>,
        filter: &Filter,
        cursor: &mut QueryCursor,
        budget: usize,
        now: u64,
    ) -> StoreResult<ScanStatus> {
        let Some(Plan::SearchTail(mut tail)) = cursor.plan.take() else {
            unreachable!("search tail plan");
        };
        let t = &mut *tail;
        let (walked, last) = self.walk_unindexed(
            txn,
            (t.walked_to, t.upper),
            budget,
            None,
            |serial, terms| {
                let Some(terms) = terms else {
                    return;
                };
                t.docs += 1;
                t.tokens += u64::from(terms.len);
                let tfs: Vec<u16> = t
                    .terms
                    .iter()
                    .map(|term| terms.terms.get(term).copied().unwrap_or(0))
                    .collect();
                for (df, &tf) in t.df.iter_mut().zip(&tfs) {
                    *df += u64::from(tf > 0);
                }
                if tfs.iter().all(|&tf| tf > 0) {
                    // Scored with the length a posting would keep, like indexed events.
                    t.matches
                        .push((serial, tfs, schema::stored_length(terms.len)));
                }
            },
        )?;
        cursor.examined += walked as u64;
        if walked == budget && last.is_some_and(|s| s < t.upper) {
            t.walked_to = last.unwrap_or(t.walked_to);
            cursor.plan = Some(Plan::SearchTail(tail));
            return Ok(ScanStatus::More);
        }
        let (index, stxn) = (search.index, &search.txn);
        let avg_len = t.tokens as f64 / t.docs.max(1) as f64;
        let mut idfs = Vec::with_capacity(t.terms.len());
        let mut terms = Vec::with_capacity(t.terms.len());
        for (term, tail_df) in t.terms.iter().zip(&t.df) {
            let prefix = schema::term_prefix(term);
            // Postings written above the planned mark since (or by a batch
            // before its last commit) are counted in the tail instead.
            let held = index.document_frequency(stxn, &prefix)?;
            let above = index.postings_above(stxn, &prefix, t.mark)?;
            match held.saturating_sub(above) + tail_df {
                0 => return Ok(ScanStatus::Done),
                df => {
                    let idf = search::idf(t.docs, df);
                    idfs.push(idf);
                    terms.push((df, prefix, idf));
                }
            }
        }
        let scored = std::mem::take(&mut t.matches)
            .into_iter()
            .map(|(serial, tfs, len)| {
                let score = idfs
                    .iter()
                    .zip(tfs)
                    .map(|(&idf, tf)| search::term_score(idf, tf, len, avg_len))
                    .sum();
                (serial, score)
            })
            .collect();
        terms.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        cursor.plan = Some(Plan::Search {
            terms: terms
                .into_iter()
                .map(|(_, prefix, idf)| (prefix, idf))
                .collect(),
            avg_len,
            tail: scored,
            // The walk starts at the mark: the tail holds the events above.
            resume_below: Some(t.mark.saturating_add(1)),
            reads: 0,
            done: false,
        });
        // The rest of this slice goes to the index.
        let left = budget.saturating_sub(walked).max(1);
        self.scan_search(search, txn, filter, cursor, left, now)
    }

    /// Walks the rarest term's postings newest first, probes the other terms
    /// per candidate (AND), scores matches with BM25 and, at the end, keeps
    /// the `limit` best. At most `search_max_reads` index entries are read.
    pub(crate) fn scan_search(
        &self,
        search: &SearchSnapshot<'_>,
        txn: &RoTxn<'_>,
        filter: &Filter,
        cursor: &mut QueryCursor,
        budget: usize,
        now: u64,
    ) -> StoreResult<ScanStatus> {
        let (index, stxn) = (search.index, &search.txn);
        let Some(Plan::Search {
            terms,
            avg_len,
            tail,
            mut resume_below,
            mut reads,
            done,
        }) = cursor.plan.take()
        else {
            unreachable!("search plan");
        };
        let mut status = ScanStatus::Done;
        for (serial, score) in tail {
            self.rank(txn, serial, score, filter, cursor, now)?;
        }
        if !done {
            let (rarest, rest) = terms.split_first().expect("at least one term");
            let lower = schema::search_key(&rarest.0, 0);
            // Blocks keyed below the resume point (a block may still hold
            // serials at or above it: they are skipped), else every block:
            // below the term's document frequency entry (serial FF×8).
            let upper = match resume_below {
                Some(serial) => schema::search_key(&rarest.0, serial),
                None => schema::df_key(&rarest.0),
            };
            let range = (Bound::Included(&lower[..]), Bound::Excluded(&upper[..]));
            // The block each other term was last probed in: candidates come
            // newest first, so consecutive probes mostly land in it again.
            let mut probed: Vec<Option<(u64, Vec<Posting>)>> = vec![None; rest.len()];
            let mut spent = 0;
            'blocks: for item in index.postings.rev_range(stxn, &range)? {
                let (k, v) = item?;
                for posting in postings(k, v)?.into_iter().rev() {
                    if resume_below.is_some_and(|below| posting.serial >= below) {
                        continue;
                    }
                    if reads >= self.search_max_reads {
                        tracing::debug!(reads, "search stopped at its read cap");
                        cursor.capped = true;
                        break 'blocks;
                    }
                    if spent >= budget {
                        status = ScanStatus::More;
                        break 'blocks;
                    }
                    let serial = posting.serial;
                    resume_below = Some(serial);
                    reads += 1;
                    spent += 1;
                    cursor.examined += 1;
                    let len = posting.len;
                    let mut score = search::term_score(rarest.1, posting.tf, len, avg_len);
                    let mut all = true;
                    for ((prefix, idf), cached) in rest.iter().zip(&mut probed) {
                        reads += 1;
                        spent += 1;
                        if cached.as_ref().is_none_or(|(from, _)| *from > serial) {
                            *cached = index
                                .block_holding(stxn, prefix, serial)?
                                .map(|(key, block)| block_serial(&key).map(|s| (s, block)))
                                .transpose()?;
                        }
                        let tf = cached.as_ref().and_then(|(_, block)| {
                            block
                                .binary_search_by_key(&serial, |p| p.serial)
                                .ok()
                                .map(|i| block[i].tf)
                        });
                        match tf {
                            Some(tf) => score += search::term_score(*idf, tf, len, avg_len),
                            None => {
                                all = false;
                                break;
                            }
                        }
                    }
                    if all {
                        self.rank(txn, serial, score, filter, cursor, now)?;
                        if cursor.count_only && cursor.counted >= cursor.limit as u64 {
                            break 'blocks;
                        }
                    }
                }
            }
            if status == ScanStatus::Done {
                self.finish_search(txn, cursor)?;
            }
        }
        cursor.plan = Some(Plan::Search {
            terms,
            avg_len,
            tail: Vec::new(),
            resume_below,
            reads,
            done: status == ScanStatus::Done,
        });
        Ok(status)
    }

    /// Tests one search candidate against the rest of the filter; keeps it
    /// for ranking when it matches.
    pub(crate) fn rank(
        &self,
        txn: &RoTxn<'_>,
        serial: u64,
        score: f64,
        filter: &Filter,
        cursor: &mut QueryCursor,
        now: u64,
    ) -> StoreResult<()> {
        if cursor.rank_unloaded {
            // The stored value's header says whether the event is there and
            // unexpired; nothing is decompressed.
            let key = schema::serial_bytes(serial);
            let Some((_, value)) = self.stored_value(txn, &key)? else {
                return Ok(());
            };
            let header = ValueHeader::read(value)?;
            if header.expires.is_some_and(|t| t <= now) {
                return Ok(());
            }
            if let Some(kinds) = &filter.kinds {
                let kind = match header.kind {
                    Some(kind) => kind,
                    // Stored before values carried their kind.
                    None => match self.load(txn, serial)? {
                        Some((_, record)) => decode(&record)?.kind(),
                        None => return Ok(()),
                    },
                };
                if !kinds.contains(&kind) {
                    return Ok(());
                }
            }
            if !cursor.seen.insert(serial) {
                return Ok(());
            }
            if cursor.count_only {
                cursor.counted += 1;
            } else {
                cursor.ranked.push(Ranked {
                    score,
                    created_at: 0,
                    id: EventId::from_bytes([0; 32]),
                    serial,
                });
            }
            return Ok(());
        }
        let Some((expires, record)) = self.load(txn, serial)? else {
            return Ok(());
        };
        if expires.is_some_and(|t| t <= now) {
            return Ok(());
        }
        let view = decode(&record)?;
        if !filter.matches(&view)
            || !cursor.gate.as_deref().is_none_or(|g| g.allows(&view))
            || !cursor.seen.insert(serial)
        {
            return Ok(());
        }
        if cursor.count_only {
            cursor.counted += 1;
            return Ok(());
        }
        cursor.ranked.push(Ranked {
            score,
            created_at: view.created_at().as_u64(),
            id: *view.id(),
            serial,
        });
        Ok(())
    }

    /// Orders the search matches (score, then newest, then lowest id) and
    /// renders the `limit` best into `found`.
    pub(crate) fn finish_search(
        &self,
        txn: &RoTxn<'_>,
        cursor: &mut QueryCursor,
    ) -> StoreResult<()> {
        if cursor.rank_unloaded {
            return self.finish_unloaded_search(txn, cursor);
        }
        let mut ranked = std::mem::take(&mut cursor.ranked);
        ranked.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.created_at.cmp(&a.created_at))
                .then(a.id.cmp(&b.id))
        });
        ranked.truncate(cursor.limit);
        for r in ranked {
            if let Some((_, record)) = self.load(txn, r.serial)? {
                self.push_result(cursor, r.serial, &record)?;
            }
        }
        Ok(())
    }

    /// [`Self::finish_search`] for matches ranked from their postings alone:
    /// loads them best score first, a whole group of equal scores at a time
    /// (`created_at` and id order a group), until `limit` are loaded, then
    /// orders and renders those. An event deleted since it was ranked (a
    /// search runs in slices, each on its own snapshot) makes room for the
    /// next.
    pub(crate) fn finish_unloaded_search(
        &self,
        txn: &RoTxn<'_>,
        cursor: &mut QueryCursor,
    ) -> StoreResult<()> {
        let mut ranked = std::mem::take(&mut cursor.ranked);
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut picked: Vec<(Ranked, Vec<u8>)> = Vec::new();
        let mut next = 0;
        while next < ranked.len() && picked.len() < cursor.limit {
            let score = ranked[next].score;
            while let Some(r) = ranked
                .get(next)
                .filter(|r| r.score.total_cmp(&score).is_eq())
            {
                next += 1;
                let Some((_, record)) = self.load(txn, r.serial)? else {
                    continue;
                };
                let view = decode(&record)?;
                let r = Ranked {
                    created_at: view.created_at().as_u64(),
                    id: *view.id(),
                    ..r.clone()
                };
                picked.push((r, record.into_owned()));
            }
        }
        picked.sort_by(|(a, _), (b, _)| {
            b.score
                .total_cmp(&a.score)
                .then(b.created_at.cmp(&a.created_at))
                .then(a.id.cmp(&b.id))
        });
        picked.truncate(cursor.limit);
        for (r, record) in picked {
            self.push_result(cursor, r.serial, &record)?;
        }
        Ok(())
    }
}
