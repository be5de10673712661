//! The one writer (thread `writer`): it drains its inbox into a batch,
//! commits the batch in one transaction (group commit), and only then hands
//! the batch back with each event's [`Verdict`] ([`Committed`]: the relay
//! answers `OK` and passes stored events to fan-out) and tells the search
//! indexer. When its inbox stays empty it brings the time-ordered indexes
//! that trail the stored events (entries waiting in `pending` and
//! `removed`) up to date, and once it starts the training of the
//! database's compression dictionaries.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::search::SearchIndexer;
use crate::{Admitted, EventStore, StoreError, Verdict};

/// How long the inbox must stay empty before the writer brings the trailing
/// indexes up to date, and the most events it indexes per transaction then.
const INDEX_WHEN_IDLE: Duration = Duration::from_millis(20);
const INDEX_CHUNK: usize = 1_000;
/// Most expired events one [`Write::Purge`] removes.
const PURGE_MAX: usize = 10_000;
/// How often a lingering writer looks at its inbox.
const LINGER_SLICE: Duration = Duration::from_micros(250);

/// An event for the writer, with what its sender needs back after the
/// commit (`ticket`: for the relay, who to answer).
#[derive(Debug)]
pub struct Submission<T> {
    /// The event.
    pub event: Admitted,
    /// Who published it (a connection): group commit counts publishers.
    pub publisher: u64,
    /// In a relay cluster, the event's position in the replicated log,
    /// recorded with the batch that stores it ([`EventStore::submit_at`]);
    /// `None` for a single relay's event.
    pub position: Option<LogPosition>,
    /// Handed back with the verdict.
    pub ticket: T,
}

/// An event's place in a replicated log (a relay cluster's stream). The
/// writer applies it only right after the log entry it names as
/// `previous`: a batch never moves the applied position past an entry
/// that was not applied, whatever the reader hands over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogPosition {
    /// The event's sequence in the log.
    pub sequence: u64,
    /// The sequence of the entry to apply before it (0: none): whoever
    /// reads the log vouches that nothing between the two is to be
    /// applied.
    pub previous: u64,
}

/// The writer's inbox.
#[derive(Debug)]
pub enum Write<T> {
    /// Store an event.
    Event(Box<Submission<T>>),
    /// Store these events in one transaction, whatever
    /// [`WriterOptions::max_batch`] (a bulk load's batch).
    Batch(Vec<Submission<T>>),
    /// Remove expired events (NIP-40), up to 10,000 at a time.
    Purge,
    /// Run a job that writes the database (an operator's removal, a
    /// setting) on the writer thread, between two commits: the one place
    /// anything besides the writer's batches writes, so it never waits on
    /// another writer or makes one wait.
    Task(Task),
    /// Commit what is queued, sync and exit.
    Shutdown,
}

/// A job for the writer thread ([`Write::Task`]); it reports its outcome
/// itself (through a channel it holds).
pub struct Task(Job);

/// What a [`Task`] runs.
type Job = Box<dyn FnOnce(&dyn EventStore) + Send>;

impl Task {
    /// A job calling `job` with the store on the writer thread.
    pub fn new(job: impl FnOnce(&dyn EventStore) + Send + 'static) -> Task {
        Task(Box::new(job))
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Task")
    }
}

/// What the writer's owner does with a batch once the writer is through
/// with it. Called on the writer thread: keep it short.
pub trait Committed<T>: Send {
    /// The batch is committed: each event, in the order submitted, with
    /// its ticket and what the store did with it.
    fn committed(&mut self, batch: Vec<(Admitted, T, Verdict)>);

    /// The batch's transaction failed: none of it is stored.
    fn failed(&mut self, batch: Vec<(Admitted, T)>, error: &StoreError);

    /// The batch just handled (after [`Committed::committed`] or
    /// [`Committed::failed`]) carried log positions
    /// ([`Submission::position`]): the store is applied up to `applied`, as
    /// [`EventStore::applied_sequence`] reads, and the writer is through
    /// with the log up to `through`, the batch's last position. When
    /// `through` is above `applied` the writer could not apply what lies
    /// between (its transaction failed, or positions did not continue the
    /// applied log, answered [`StoreError::OutOfOrder`]): the log must be
    /// handed over again from `applied` on.
    fn applied(&mut self, _applied: u64, _through: u64) {}
}

/// How the writer batches.
#[derive(Clone, Copy, Debug)]
pub struct WriterOptions {
    /// Most events in one transaction.
    pub max_batch: usize,
    /// Longest a batch is held open for the events of publishers that are
    /// expected to send again: those of the last two batches (with group
    /// commit, a publisher that waits for each answer lands in every other
    /// batch).
    pub linger: Duration,
}

/// The writer's inbox, holding up to `capacity` messages (at least one);
/// a full inbox makes senders wait.
pub fn writer_inbox<T>(capacity: usize) -> (Sender<Write<T>>, Receiver<Write<T>>) {
    crossbeam_channel::bounded(capacity.max(1))
}

/// The running writer (thread `writer`). It runs until [`Write::Shutdown`]:
/// everything queued before it is committed, a dictionary set being trained
/// is installed, then the store is synced.
#[derive(Debug)]
pub struct Writer {
    thread: JoinHandle<()>,
}

impl Writer {
    /// Starts the writer of `store` on `inbox` ([`writer_inbox`]).
    /// `search` is told of each commit; `answer` gets each committed batch.
    pub fn spawn<T: Send + 'static>(
        store: Arc<dyn EventStore>,
        options: WriterOptions,
        inbox: Receiver<Write<T>>,
        search: Option<Arc<SearchIndexer>>,
        answer: impl Committed<T> + 'static,
    ) -> std::io::Result<Writer> {
        let thread = std::thread::Builder::new()
            .name("writer".into())
            .spawn(move || run(&store, options, &inbox, search.as_deref(), answer))?;
        Ok(Writer { thread })
    }

    /// Waits for the thread to end (send [`Write::Shutdown`] first).
    pub fn join(self) {
        let _ = self.thread.join();
    }
}

fn run<T>(
    store: &Arc<dyn EventStore>,
    options: WriterOptions,
    inbox: &Receiver<Write<T>>,
    search: Option<&SearchIndexer>,
    mut answer: impl Committed<T>,
) {
    let max_batch = options.max_batch.max(1);
    let mut batch: Vec<Submission<T>> = Vec::with_capacity(max_batch);
    let mut publishers = Publishers::default();
    // Where the store stands in a replicated log: read when the first
    // position comes, then kept with each commit.
    let mut log = None;
    let mut purge = false;
    let mut tasks: Vec<Task> = Vec::new();
    let mut stop = false;
    // Stored events may be waiting for their index entries.
    let mut unindexed = true;
    // Dictionaries are trained at most once per run, on their own thread.
    let mut training: Option<JoinHandle<()>> = None;
    loop {
        let first = if unindexed {
            match inbox.recv_timeout(INDEX_WHEN_IDLE) {
                Ok(msg) => msg,
                Err(RecvTimeoutError::Timeout) => {
                    unindexed = match store.index_pending(INDEX_CHUNK) {
                        Ok(more) => more,
                        Err(e) => {
                            tracing::error!("indexing failed: {e}");
                            false
                        }
                    };
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match inbox.recv() {
                Ok(msg) => msg,
                Err(_) => break,
            }
        };
        let deadline = Instant::now() + options.linger;
        let expected = publishers.expected().min(max_batch);
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Write::Event(s) => batch.push(*s),
                Write::Batch(mut events) => batch.append(&mut events),
                Write::Purge => purge = true,
                Write::Task(task) => tasks.push(task),
                Write::Shutdown => stop = true,
            }
            if stop || batch.len() >= max_batch {
                break;
            }
            next = inbox.try_recv().ok();
            if next.is_none() && batch.len() < expected {
                next = wait_for_more(inbox, deadline, expected - batch.len());
            }
        }
        if !batch.is_empty() {
            publishers.record(batch.iter().map(|s| s.publisher));
            commit(&**store, &mut batch, &mut log, &mut answer);
            if let Some(search) = search {
                search.committed();
            }
            // After the answers: publishers do not wait for the index batch.
            if let Err(e) = store.index_past_lag() {
                tracing::error!("indexing the waiting events failed: {e}");
            }
            unindexed = true;
            if training.is_none() && store.wants_dictionaries().unwrap_or(false) {
                training = train_dictionaries(store);
            }
        }
        if !tasks.is_empty() {
            for Task(job) in tasks.drain(..) {
                job(&**store);
            }
            // What a job removed leaves the search index and the trailing
            // indexes to catch up with.
            if let Some(search) = search {
                search.committed();
            }
            unindexed = true;
        }
        if purge {
            purge = false;
            match store.purge_expired(now(), PURGE_MAX) {
                Ok(n) if n > 0 => tracing::info!(removed = n, "purged expired events"),
                Ok(_) => {}
                Err(e) => tracing::error!("purge failed: {e}"),
            }
        }
        if stop {
            break;
        }
    }
    // A set being trained is installed before the store is synced and let go.
    if let Some(training) = training {
        let _ = training.join();
    }
    if let Err(e) = store.sync() {
        tracing::error!("final sync failed: {e}");
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Commits `batch` in one transaction and hands it to `answer`. Events
/// with a log position are applied only in the log's order from where
/// the store stands (`log`: its applied sequence, read once): any that do
/// not continue it are refused ([`StoreError::OutOfOrder`]), and so, after
/// a failed transaction, is the rest of the log, until it is handed over
/// again from the applied sequence on.
fn commit<T>(
    store: &dyn EventStore,
    batch: &mut Vec<Submission<T>>,
    log: &mut Option<u64>,
    answer: &mut impl Committed<T>,
) {
    let Some(through) = batch.iter().rev().find_map(|s| s.position) else {
        apply(store, batch.drain(..), None, answer);
        return;
    };
    let applied = match *log {
        Some(applied) => applied,
        None => match store.applied_sequence() {
            Ok(applied) => *log.insert(applied),
            Err(e) => {
                tracing::error!("write failed: {e}");
                let batch = batch.drain(..).map(|s| (s.event, s.ticket)).collect();
                return answer.failed(batch, &e);
            }
        },
    };
    let mut next = applied;
    let mut in_order = Vec::with_capacity(batch.len());
    let mut out_of_order = Vec::new();
    for s in batch.drain(..) {
        match s.position {
            Some(p) if p.previous != next || p.sequence <= next => out_of_order.push(s),
            Some(p) => {
                next = p.sequence;
                in_order.push(s);
            }
            None => in_order.push(s),
        }
    }
    let reached = (next > applied).then_some(next);
    if apply(store, in_order.drain(..), reached, answer) {
        *log = Some(next);
    }
    if let Some(first) = out_of_order.first().and_then(|s| s.position) {
        let error = StoreError::OutOfOrder {
            applied: log.unwrap_or(applied),
            sequence: first.sequence,
            previous: first.previous,
        };
        tracing::warn!("{error}");
        let refused = out_of_order.into_iter().map(|s| (s.event, s.ticket));
        answer.failed(refused.collect(), &error);
    }
    answer.applied(log.unwrap_or(applied), through.sequence);
}

/// Submits `batch` in one transaction (recording that the log is applied
/// up to `sequence`, if given) and hands it to `answer`; whether it was
/// committed.
fn apply<T>(
    store: &dyn EventStore,
    batch: impl Iterator<Item = Submission<T>>,
    sequence: Option<u64>,
    answer: &mut impl Committed<T>,
) -> bool {
    let mut events = Vec::new();
    let mut tickets = Vec::new();
    for s in batch {
        events.push(s.event);
        tickets.push(s.ticket);
    }
    if events.is_empty() {
        return false;
    }
    let submitted = match sequence {
        Some(sequence) => store.submit_at(&events, now(), sequence),
        None => store.submit(&events, now()),
    };
    match submitted {
        Ok(verdicts) => {
            answer.committed(
                events
                    .into_iter()
                    .zip(tickets)
                    .zip(verdicts)
                    .map(|((event, ticket), verdict)| (event, ticket, verdict))
                    .collect(),
            );
            true
        }
        Err(e) => {
            tracing::error!("write failed: {e}");
            answer.failed(events.into_iter().zip(tickets).collect(), &e);
            false
        }
    }
}

/// Waits until `wanted` more messages are queued or `deadline` passes, then
/// takes the next one. It sleeps in slices and counts what came rather than
/// sleeping on the inbox: woken by each event, the writer went through a
/// context switch for nearly every event it stored.
fn wait_for_more<T>(
    inbox: &Receiver<Write<T>>,
    deadline: Instant,
    wanted: usize,
) -> Option<Write<T>> {
    loop {
        let now = Instant::now();
        if now >= deadline || inbox.len() >= wanted {
            return inbox.try_recv().ok();
        }
        std::thread::sleep(LINGER_SLICE.min(deadline - now));
    }
}

/// Trains the store's compression dictionaries on a thread of its own (it
/// reads thousands of records and takes seconds); the writer goes on, and
/// new records are compressed with the set once it is installed.
fn train_dictionaries(store: &Arc<dyn EventStore>) -> Option<JoinHandle<()>> {
    let store = Arc::clone(store);
    let spawned = std::thread::Builder::new()
        .name("dictionaries".into())
        .spawn(move || {
            if let Err(e) = store.train_dictionaries() {
                tracing::error!("training compression dictionaries failed: {e}");
            }
        });
    spawned
        .map_err(|e| tracing::error!("cannot start the dictionary training thread: {e}"))
        .ok()
}

/// The publishers of the last two commits. With group commit, a client
/// that waits for each `OK` before its next EVENT lands in every other
/// batch (its event arrives while the previous batch commits), so the
/// union of two batches is who is publishing now. The writer holds a batch
/// open, up to [`WriterOptions::linger`], until that many events are in
/// it: they then share one fsync instead of paying for two.
#[derive(Default)]
struct Publishers {
    last: Vec<u64>,
    before: Vec<u64>,
}

impl Publishers {
    fn record(&mut self, publishers: impl Iterator<Item = u64>) {
        std::mem::swap(&mut self.last, &mut self.before);
        self.last.clear();
        self.last.extend(publishers);
        self.last.sort_unstable();
        self.last.dedup();
    }

    /// Distinct publishers in the last two batches.
    fn expected(&self) -> usize {
        let (mut i, mut j, mut n) = (0, 0, 0);
        while i < self.last.len() && j < self.before.len() {
            match self.last[i].cmp(&self.before[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            }
            n += 1;
        }
        n + (self.last.len() - i) + (self.before.len() - j)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(publishers: &[u64]) -> impl Iterator<Item = u64> + '_ {
        publishers.iter().copied()
    }

    #[test]
    fn publishers_are_the_distinct_publishers_of_the_last_two_batches() {
        let mut p = Publishers::default();
        assert_eq!(p.expected(), 0);
        p.record(batch(&[3, 1, 3]));
        assert_eq!(p.expected(), 2);
        p.record(batch(&[2, 4]));
        assert_eq!(p.expected(), 4);
        p.record(batch(&[1, 2]));
        assert_eq!(p.expected(), 3, "{{2, 4}} ∪ {{1, 2}}");
        p.record(batch(&[7]));
        assert_eq!(
            p.expected(),
            3,
            "{{1, 2}} ∪ {{7}}; batch [3, 1, 3] is forgotten"
        );
    }
}
