//! Stage 4, the signature: checked in batches where several events wait.
//!
//! An EVENT that passed every other check (policy, time bounds, its id)
//! waits in an ingest worker's [`Waiting`] with what it needs to go on:
//! its id, key and signature, its canonical JSON and nwb record. The
//! worker settles them when a batch's worth wait (64, fewer after
//! failures), when it has nothing else to do, or when the first of them
//! has waited for
//! [`HOLD_BYTES`] of other frames or [`HOLD_TIME`], so an event alone is
//! checked at once, one is never held up by other clients' large
//! messages, and a busy worker checks up to 64 signatures with one BIP-340
//! batch check
//! (`nostrwire-schnorr`: about half the CPU of checking each alone). The
//! events then go on in the order they arrived.
//!
//! A batch that fails says nothing about which signature is bad, so its
//! events are checked one by one with the single check every other path
//! uses: verdicts and `OK` messages are exactly those of single checks. What
//! a failure costs is the batch check spent for nothing, and a client who
//! slipped one bad signature into every batch would make the honest events
//! beside it pay that: after a failure the batch size falls to a quarter
//! (down to one, which is a single check as without batches), and it
//! doubles back after each batch that passes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use nostrwire_event::{verify_signature, Error, EventId, Kind, PublicKey, Signature};
use nostrwire_schnorr::{Batch, BATCH_MAX};

use crate::metrics::Metrics;
use crate::msg::{Admission, Conn};

/// An event waiting for its signature check.
pub struct Unsigned {
    /// The connection that sent it.
    pub conn: Arc<Conn>,
    /// Its id, already checked against its content.
    pub id: EventId,
    /// Its author.
    pub pubkey: PublicKey,
    /// Its claimed signature of `id`.
    pub sig: Signature,
    /// Its kind.
    pub kind: Kind,
    /// Its canonical JSON.
    pub json: Vec<u8>,
    /// Its nwb record.
    pub record: Vec<u8>,
    /// When its frame was read.
    pub received: std::time::Instant,
    /// The admission room its frame holds.
    pub admission: Admission,
}

impl std::fmt::Debug for Unsigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unsigned")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Bytes of frames an ingest worker handles, the waiting events' own
/// included, before it settles them.
pub const HOLD_BYTES: usize = 64 << 10;

/// How long the first waiting event may wait for others.
pub const HOLD_TIME: std::time::Duration = std::time::Duration::from_millis(1);

/// The events one ingest worker holds for a batch check.
#[derive(Debug)]
pub struct Waiting {
    events: Vec<Unsigned>,
    batch: Batch,
    /// How many may wait before they are settled: [`BATCH_MAX`], less
    /// after batches that failed.
    size: usize,
    /// Bytes of frames handled since the first event began to wait.
    handled: usize,
    /// When the first event began to wait.
    since: Option<Instant>,
}

impl Default for Waiting {
    fn default() -> Self {
        Waiting {
            events: Vec::with_capacity(BATCH_MAX),
            batch: Batch::new(),
            size: BATCH_MAX,
            handled: 0,
            since: None,
        }
    }
}

impl Waiting {
    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Adds an event; `true` when the waiting events should be settled now.
    pub fn push(&mut self, event: Unsigned) -> bool {
        if self.events.is_empty() {
            self.since = Some(Instant::now());
            self.handled = 0;
        }
        self.events.push(event);
        self.events.len() >= self.size
    }

    /// Counts a frame of `bytes` the worker handled; `true` when the events
    /// waiting have waited long enough ([`HOLD_BYTES`], [`HOLD_TIME`]).
    pub fn handled(&mut self, bytes: usize) -> bool {
        if self.events.is_empty() {
            return false;
        }
        self.handled += bytes;
        self.handled >= HOLD_BYTES || self.since.is_some_and(|t| t.elapsed() >= HOLD_TIME)
    }

    /// Checks every waiting signature and hands each event back with its
    /// verdict, in the order they were pushed.
    pub fn settle(&mut self, metrics: &Metrics) -> Vec<(Unsigned, Result<(), Error>)> {
        let events = std::mem::take(&mut self.events);
        self.events.reserve(BATCH_MAX);
        if events.len() > 1 {
            let mut all = true;
            for e in &events {
                all &= self
                    .batch
                    .push(e.pubkey.as_bytes(), e.id.as_bytes(), e.sig.as_bytes());
            }
            let passed = all && self.batch.verify();
            if passed {
                metrics
                    .signatures_batched
                    .fetch_add(events.len() as u64, Ordering::Relaxed);
                metrics.signature_batches.fetch_add(1, Ordering::Relaxed);
                self.size = (self.size * 2).min(BATCH_MAX);
                return events.into_iter().map(|e| (e, Ok(()))).collect();
            }
            self.batch.clear();
            metrics
                .signature_batches_failed
                .fetch_add(1, Ordering::Relaxed);
            self.size = (self.size / 4).max(1);
        }
        let settled: Vec<_> = events
            .into_iter()
            .map(|e| {
                let verdict = verify_signature(&e.id, &e.pubkey, &e.sig);
                (e, verdict)
            })
            .collect();
        if settled.len() == 1 && settled[0].1.is_ok() {
            self.size = (self.size * 2).min(BATCH_MAX);
        }
        settled
    }
}
