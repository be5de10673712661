//! `nostrwire load`: a Nostr relay load tester that measures honestly.
//!
//! Published relay benchmarks were distorted by their clients: no
//! `TCP_NODELAY` (40 ms delayed-ACK stalls), a frame reader that lost
//! back-to-back frames, `OK`s not matched to their event, `CLOSED` counted as
//! `OK`, timeouts counted as successes. This crate avoids each one:
//!
//! - [`ws`]: a WebSocket client with `TCP_NODELAY` on every socket and a
//!   buffered frame reader; bytes are counted on the socket.
//! - [`client`]: `OK` matched by event id, `EOSE`/`CLOSED` by subscription
//!   id, `NOTICE` and other unsolicited messages kept apart as anomalies, a
//!   missing answer is a timeout failure, returned events are checked against
//!   their filter (and a sample for id and signature).
//! - [`workload`]: events signed before any clock starts, with the real kind
//!   mix and corpus-resampled tags and contents, or replayed from a file;
//!   seeded. [`renew`] redraws the prose, encrypted payloads and `e` ids
//!   that real traffic does not repeat.
//! - [`scenario`]: closed- and open-loop publishing, bursts, queries, mixed,
//!   concurrent, fan-out, large events, idle connections, search.
//! - [`abuse`]: hostile clients (slow readers, connection floods, oversized
//!   subscriptions, compression bombs, …) while a probe measures the relay.
//! - [`stats`] and [`report`]: HDR histograms, failures by reason, bytes,
//!   client CPU; table, JSON, Markdown, SVG.
//! - [`runner`]: the run, with interleaved rounds over several relays.

#![warn(missing_docs)]

use std::path::PathBuf;

pub mod abuse;
pub mod attack;
pub mod client;
pub mod figures;
pub mod headline;
pub mod host;
pub mod nostr_bench;
pub mod relays;
pub mod renew;
pub mod report;
pub mod rng;
pub mod runner;
pub mod scenario;
pub mod stats;
pub mod sync;
pub mod v2;
pub mod workload;
pub mod ws;

pub use runner::{run, RunReport, ScenarioResult, Settings};
pub use scenario::Scenario;

/// Errors of the load tester.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bad setting or command-line value.
    #[error("{0}")]
    Usage(String),
    /// An input file (kind mix, corpus, replay) could not be read or parsed.
    #[error("{0}")]
    Input(String),
    /// The relay did not complete a WebSocket handshake before the run.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The relay URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The WebSocket opening handshake failed.
    #[error("WebSocket handshake failed: {0}")]
    Handshake(String),
    /// The relay broke the WebSocket protocol.
    #[error("WebSocket protocol error: {0}")]
    Protocol(String),
    /// The relay closed the connection.
    #[error("connection closed by the relay")]
    Disconnected,
    /// A socket or file operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// SIGINT or SIGTERM stopped a relay comparison; the relays it started
    /// were stopped and its scratch directory removed.
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// How an error on an open connection counts against the operation in flight.
    pub fn as_failure(&self) -> stats::Failure {
        match self {
            Error::Protocol(_) => stats::Failure::Protocol,
            _ => stats::Failure::ConnectionLost,
        }
    }
}

/// Path of a file in the repository's `testdata/` (for tests).
#[doc(hidden)]
pub fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(name)
}
