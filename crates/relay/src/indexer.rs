//! Stage 6a, beside the writer: the search indexer. It brings the NIP-50
//! index (an LMDB environment of its own) up to date with the stored
//! events, so that the writer's commits never wait for postings. Searches
//! tokenize the events the index does not hold yet, so its lag only costs
//! them time.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::Shared;

/// How long no commit may arrive before the indexer takes in whatever
/// waits, however little.
const INDEX_WHEN_IDLE: Duration = Duration::from_millis(20);
/// Most events one transaction of the search index takes in.
const INDEX_CHUNK: usize = 10_000;
/// Pause after a failed transaction of the search index.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// Runs until the relay is stopping. `commits` carries a signal after each
/// commit of the writer (coalesced: at most one waits). Events are indexed
/// once more than `search.index_lag` wait, or once commits pause.
pub fn run(shared: Arc<Shared>, commits: Receiver<()>) {
    let lag = shared.config.search.index_lag;
    let stopping = || shared.stopping.load(Ordering::Relaxed);
    // After a pass with nothing left, wait for the next commit without a
    // timeout: an idle relay does not poll.
    let mut caught_up = false;
    loop {
        let idle = match caught_up {
            true => match commits.recv() {
                Ok(()) => false,
                Err(_) => break,
            },
            false => match commits.recv_timeout(INDEX_WHEN_IDLE) {
                Ok(()) => false,
                Err(RecvTimeoutError::Timeout) => true,
                Err(RecvTimeoutError::Disconnected) => break,
            },
        };
        if stopping() {
            break;
        }
        let lag = if idle { 0 } else { lag };
        caught_up = idle;
        loop {
            match shared.store.index_search(INDEX_CHUNK, lag) {
                Ok(true) if !stopping() => {}
                Ok(true) => break,
                Ok(false) => break,
                Err(e) => {
                    // Retried after a pause, not in a tight loop of errors.
                    tracing::error!("search indexing failed: {e}");
                    std::thread::sleep(RETRY_AFTER_ERROR);
                    caught_up = false;
                    break;
                }
            }
        }
    }
}
