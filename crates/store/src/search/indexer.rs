//! The search index's thread: brings the NIP-50 index (an LMDB environment
//! of its own) up to date with the stored events, beside the writer, so
//! that the writer's commits never wait for postings. Searches tokenize
//! the events the index does not hold yet, so its lag only costs them time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::EventStore;

/// How long no commit may arrive before the indexer takes in whatever
/// waits, however little.
const INDEX_WHEN_IDLE: Duration = Duration::from_millis(20);
/// Most events one batch of the search index takes in.
const INDEX_CHUNK: usize = 10_000;
/// Pause after a failed transaction of the search index.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// The running search indexer (thread `search`). Tell it of each commit
/// with [`SearchIndexer::committed`]; it indexes once more than `lag`
/// events wait, or once commits pause.
#[derive(Debug)]
pub struct SearchIndexer {
    /// Coalesced: at most one signal waits.
    commits: SyncSender<()>,
    stopping: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl SearchIndexer {
    /// Starts the thread for `store`.
    pub fn spawn(store: Arc<dyn EventStore>, lag: u64) -> std::io::Result<SearchIndexer> {
        let (commits, rx) = sync_channel(1);
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = stopping.clone();
        let thread = std::thread::Builder::new()
            .name("search".into())
            .spawn(move || run(&*store, lag, &rx, &stop))?;
        Ok(SearchIndexer {
            commits,
            stopping,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// A commit of the writer added or removed events.
    pub fn committed(&self) {
        let _ = self.commits.try_send(());
    }

    /// Stops the thread after the batch it is in, and waits for it.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.committed();
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

fn run(store: &dyn EventStore, lag: u64, commits: &Receiver<()>, stopping: &AtomicBool) {
    let stopping = || stopping.load(Ordering::Relaxed);
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
            match store.index_search(INDEX_CHUNK, lag) {
                Ok(true) if !stopping() => {}
                Ok(_) => break,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lmdb::{LmdbStore, OpenOptions};
    use crate::{Admitted, Durability, QueryCursor, ScanStatus};
    use nostrwire_event::{Filter, Keys, Kind, SignedFields, Timestamp, UnsignedEvent};
    use std::time::Instant;

    #[test]
    fn indexes_after_commits_and_stops_when_told() {
        let dir = tempfile::tempdir().unwrap();
        let options = OpenOptions {
            durability: Durability::None,
            ..OpenOptions::default()
        };
        let store: Arc<dyn EventStore> = Arc::new(LmdbStore::open(dir.path(), &options).unwrap());
        let indexer = SearchIndexer::spawn(store.clone(), 1_000).unwrap();
        let keys = Keys::derive(9, 1);
        let batch: Vec<Admitted> = (0..5)
            .map(|i| {
                let event = UnsignedEvent::new(
                    &keys,
                    Timestamp::new(1_000 + i).unwrap(),
                    Kind(1),
                    Vec::new(),
                    format!("harbour lights {i}"),
                )
                .sign(&keys);
                let record = nostrwire_wire::encode_event(&event);
                store.admit(record, event.to_json_bytes()).unwrap()
            })
            .collect();
        store.submit(&batch, 0).unwrap();
        indexer.committed();
        // Fewer than `lag` wait: indexed once commits pause (20 ms).
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.stats().unwrap().search_backlog > 0 {
            assert!(Instant::now() < deadline, "not indexed");
            std::thread::sleep(Duration::from_millis(5));
        }
        let filter = Filter {
            search: Some("harbour".into()),
            ..Filter::new()
        };
        let mut cursor = QueryCursor::new(10);
        while store.scan(&filter, &mut cursor, 7, 0).unwrap() == ScanStatus::More {}
        assert_eq!(cursor.into_results().len(), 5);
        indexer.stop();
        assert!(indexer.thread.lock().unwrap().is_none());
    }
}
