//! Stage 6b: live subscriptions. Each filter is indexed under its most
//! selective field (ids, then authors, tags, kinds; else "match all"), so a
//! new event is tested only against filters that can possibly match it.
//! A search filter (NIP-50) also needs every query term among the event's
//! indexed terms (`search.rs`), the rule the stored index follows.
//!
//! Events come in the batches the writer commits. A `nostrwire.v2`
//! subscription gets all of a batch's matches in one frame, sent when the
//! batch is done; nothing waits longer than that (spec/transport.md §9).
//!
//! Subscriptions are registered and dropped through [`Pending`], not the
//! thread's inbox: a REQ answered and closed before the next batch of
//! events never wakes the thread, nor touches the index.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use nostrwire_event::{EventId, Kind, PreimageFields, PublicKey, SignedFields};

use crate::msg::{ConnId, FanoutMsg, LiveEvent, Phase, Sub};
use crate::policy::KindGate;
use crate::search::EventTerms;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Id(EventId),
    Author(PublicKey),
    Tag(u8, String),
    Kind(Kind),
    All,
}

/// Most index entries one filter gets. A filter with more values (5,000
/// authors, say) is indexed under its kinds, or tested against every
/// event, instead: testing it costs a binary search per event, while
/// thousands of entries would hold the fan-out thread, and every live
/// delivery, while they are added and removed.
const MAX_KEYS_PER_FILTER: usize = 64;

fn keys_of(sub: &Sub, filter_index: usize) -> Vec<Key> {
    let f = &sub.filters[filter_index];
    let fits = |n: usize| n <= MAX_KEYS_PER_FILTER;
    if let Some(ids) = f.ids.as_ref().filter(|v| fits(v.len())) {
        return ids.iter().map(|i| Key::Id(*i)).collect();
    }
    if let Some(authors) = f.authors.as_ref().filter(|v| fits(v.len())) {
        return authors.iter().map(|a| Key::Author(*a)).collect();
    }
    if let Some(cond) = f
        .tags
        .iter()
        .filter(|c| fits(c.values.len()))
        .min_by_key(|c| c.values.len())
    {
        return cond
            .values
            .iter()
            .map(|v| Key::Tag(cond.letter, v.clone()))
            .collect();
    }
    if let Some(kinds) = f.kinds.as_ref().filter(|v| fits(v.len())) {
        return kinds.iter().map(|k| Key::Kind(*k)).collect();
    }
    vec![Key::All]
}

/// The subscription index.
#[derive(Default)]
struct Index {
    /// Subscriptions by key, each entry keyed by the subscription's address
    /// and filter index, so removing one costs its own keys only.
    by_key: HashMap<Key, HashMap<(usize, usize), Arc<Sub>>>,
    /// Subscriptions by connection, so closing one costs its own
    /// subscriptions, not everyone's.
    subs: HashMap<ConnId, HashMap<String, Arc<Sub>>>,
}

impl Index {
    fn add(&mut self, sub: Arc<Sub>) {
        self.remove(sub.conn, &sub.id);
        for i in 0..sub.filters.len() {
            if sub.filters[i].is_empty_match() {
                continue;
            }
            for key in keys_of(&sub, i) {
                self.by_key
                    .entry(key)
                    .or_default()
                    .insert((Arc::as_ptr(&sub) as usize, i), sub.clone());
            }
        }
        self.subs
            .entry(sub.conn)
            .or_default()
            .insert(sub.id.clone(), sub);
    }

    fn remove(&mut self, conn: ConnId, id: &str) {
        let Some(of_conn) = self.subs.get_mut(&conn) else {
            return;
        };
        let Some(sub) = of_conn.remove(id) else {
            return;
        };
        if of_conn.is_empty() {
            self.subs.remove(&conn);
        }
        let address = Arc::as_ptr(&sub) as usize;
        for i in 0..sub.filters.len() {
            for key in keys_of(&sub, i) {
                if let Some(list) = self.by_key.get_mut(&key) {
                    list.remove(&(address, i));
                    if list.is_empty() {
                        self.by_key.remove(&key);
                    }
                }
            }
        }
    }

    /// Takes out this very subscription, if the index holds it (not
    /// another that has since taken its id).
    fn remove_sub(&mut self, sub: &Arc<Sub>) {
        let holds = self
            .subs
            .get(&sub.conn)
            .and_then(|of_conn| of_conn.get(&sub.id))
            .is_some_and(|held| Arc::ptr_eq(held, sub));
        if holds {
            self.remove(sub.conn, &sub.id);
        }
    }

    fn remove_conn(&mut self, conn: ConnId) {
        let ids: Vec<String> = self
            .subs
            .get(&conn)
            .map(|of_conn| of_conn.keys().cloned().collect())
            .unwrap_or_default();
        for id in ids {
            self.remove(conn, &id);
        }
    }

    fn deliver(&mut self, event: &Arc<LiveEvent>, batches: &mut Batches) {
        let Ok(view) = event.event.view() else {
            tracing::error!("undecodable live event");
            return;
        };
        let mut keys = vec![
            Key::Id(*view.id()),
            Key::Author(*view.pubkey()),
            Key::Kind(view.kind()),
            Key::All,
        ];
        for tag in view.tags() {
            let name = tag.name();
            if name.text_len() == 1 {
                if let Some(v) = tag.first_value() {
                    let letter = name.to_str().as_bytes()[0];
                    keys.push(Key::Tag(letter, v.to_str().into_owned()));
                }
            }
        }
        // Indexed terms of the event: as admitted, or computed once if a
        // search filter asks.
        let admitted_terms = event.event.search_terms();
        let mut computed: Option<Option<EventTerms>> = None;
        let mut done: HashSet<*const Sub> = HashSet::new();
        let mut dead = Vec::new();
        for key in keys {
            let Some(list) = self.by_key.get(&key) else {
                continue;
            };
            for (&(_, i), sub) in list {
                let ptr = Arc::as_ptr(sub);
                let filter = &sub.filters[i];
                if done.contains(&ptr)
                    || !filter.matches(&view)
                    || !KindGate::admits(sub.gate.as_deref(), &view)
                {
                    continue;
                }
                // Parsed once, when the REQ came (at most `search.max_terms` terms).
                if let Some(query) = &sub.searches[i] {
                    let terms = match admitted_terms {
                        Some(terms) => terms,
                        None => computed
                            .get_or_insert_with(|| EventTerms::of(&view))
                            .as_ref(),
                    };
                    if !terms.is_some_and(|t| t.contains_all(query)) {
                        continue;
                    }
                }
                done.insert(ptr);
                if sub.is_cancelled() {
                    dead.push((sub.conn, sub.id.clone()));
                    continue;
                }
                let mut phase = sub.phase.lock().expect("phase lock");
                match &mut *phase {
                    Phase::Pending(waiting) => waiting.push(event.clone()),
                    Phase::Live(skip) => {
                        if let Some(i) = skip.iter().position(|s| *s == event.serial) {
                            skip.swap_remove(i);
                        } else if sub.outbox.v2().is_some() {
                            batches.add(sub, event);
                        } else {
                            sub.outbox.send_event(
                                &sub.id,
                                event.event.json(),
                                event.event.record(),
                            );
                        }
                    }
                }
            }
        }
        for (conn, id) in dead {
            self.remove(conn, &id);
        }
    }
}

/// The matches of one batch of events for each `nostrwire.v2`
/// subscription, in order.
#[derive(Default)]
struct Batches {
    at: HashMap<*const Sub, usize>,
    subs: Vec<(Arc<Sub>, Vec<Arc<LiveEvent>>)>,
}

impl Batches {
    fn add(&mut self, sub: &Arc<Sub>, event: &Arc<LiveEvent>) {
        let i = *self.at.entry(Arc::as_ptr(sub)).or_insert_with(|| {
            self.subs.push((sub.clone(), Vec::new()));
            self.subs.len() - 1
        });
        self.subs[i].1.push(event.clone());
    }

    fn send(&mut self) {
        for (sub, events) in self.subs.drain(..) {
            sub.outbox.send_live(&sub.id, &events);
        }
        self.at.clear();
    }
}

/// Changes waiting that make whoever adds the next one wake the fan-out
/// thread to apply them (one [`FanoutMsg::Apply`]). Under REQs alone no
/// events come to apply them before, so this is what bounds the list.
pub const APPLY_AT: usize = 1_024;

/// Changes waiting at which whoever adds one waits until the fan-out
/// thread has taken them: the list's hard bound, should ingest outrun a
/// fan-out thread busy with a long batch after the wake.
pub const WAIT_AT: usize = 4 * APPLY_AT;

/// While removals wait, the fan-out thread applies them at least this
/// often, so a closed subscription the index holds gives its memory back
/// soon even when no events come. An idle relay's fan-out thread sleeps:
/// the first removal after it found none wakes it. Adds wait for the next
/// batch of events (or [`APPLY_AT`]): until one comes, the index has
/// nothing to do with them.
pub const APPLY_EVERY: Duration = Duration::from_millis(100);

/// Subscription changes the fan-out thread has not applied yet: ingest
/// workers register and drop subscriptions here, and the thread applies
/// them all at once before it delivers each batch of events (and as
/// [`APPLY_AT`] and [`APPLY_EVERY`] say). Sending each change through the
/// inbox instead woke the thread twice per REQ, though most subscriptions
/// (a REQ with a limit, EOSE, CLOSE) never see a live event: one closed
/// before any batch came is dropped here and never wakes the thread.
///
/// Why nothing is missed, or sent twice or after a CLOSE:
/// - A REQ's subscription is added here *before* its query takes its read
///   snapshot, and the writer sends a batch to the fan-out thread only
///   after committing it. The thread takes this list after it receives a
///   batch and before it delivers it. So if that take came before the add,
///   the commit came before the snapshot and the query returns the event
///   itself; otherwise the subscription is in the index when the batch is
///   delivered. Events committed before the snapshot that the fan-out
///   reaches after the add are the ones `query.rs` skips (`Phase`,
///   `fanned_serial`), as before.
/// - The same holds for an ephemeral event: sent after the add, it is
///   delivered after the add is applied.
/// - A CLOSE (or a REQ replacing one, or the connection's end) marks the
///   subscription cancelled, which delivery checks, then drops it here: if
///   its add still waits, the add is dropped and the index never sees it;
///   else its removal is applied before the next batch is delivered.
/// - One connection's changes come from its one ingest worker, in order.
///   A removal names its very subscription, so it never takes out one that
///   has since reused the id, and removals are applied before adds.
#[derive(Debug)]
pub struct Pending {
    changes: Mutex<Changes>,
    /// Signalled when the fan-out thread takes the list, or ends.
    taken: Condvar,
    /// The fan-out thread's inbox, for [`FanoutMsg::Apply`].
    inbox: Sender<FanoutMsg>,
}

#[derive(Debug)]
struct Changes {
    /// Subscriptions to add, by address.
    adds: HashMap<usize, Arc<Sub>>,
    /// Subscriptions to take out that the index may hold.
    removes: Vec<Arc<Sub>>,
    /// Connections that ended, whose subscriptions the index may hold.
    conns: Vec<ConnId>,
    /// The fan-out thread found no removal waiting and sleeps until its
    /// inbox has a message: the next removal sends one.
    asleep: bool,
    /// An `Apply` was sent since the thread last took the list.
    woken: bool,
    /// The fan-out thread has ended: nobody waits for it any more.
    ended: bool,
}

impl Changes {
    fn len(&self) -> usize {
        self.adds.len() + self.removals()
    }

    /// Removals waiting (of subscriptions, of connections).
    fn removals(&self) -> usize {
        self.removes.len() + self.conns.len()
    }
}

/// What the fan-out thread took from [`Pending`] to apply.
#[derive(Default)]
struct Taken {
    adds: Vec<Arc<Sub>>,
    removes: Vec<Arc<Sub>>,
    conns: Vec<ConnId>,
}

impl Taken {
    /// Applies the changes; returns how many there were.
    fn apply(self, index: &mut Index) -> usize {
        let n = self.adds.len() + self.removes.len() + self.conns.len();
        for sub in &self.removes {
            index.remove_sub(sub);
        }
        for conn in self.conns {
            index.remove_conn(conn);
        }
        // A subscription cancelled while its add waited (its connection
        // gone, say) is dropped here.
        for sub in self.adds {
            if !sub.is_cancelled() {
                index.add(sub);
            }
        }
        n
    }
}

impl Pending {
    /// An empty list for the fan-out thread reading `inbox`'s other end,
    /// which is asleep until the first removal.
    pub fn new(inbox: Sender<FanoutMsg>) -> Pending {
        Pending {
            changes: Mutex::new(Changes {
                adds: HashMap::new(),
                removes: Vec::new(),
                conns: Vec::new(),
                asleep: true,
                woken: false,
                ended: false,
            }),
            taken: Condvar::new(),
            inbox,
        }
    }

    /// Registers a REQ's subscription. Call it before the query's read
    /// snapshot is taken (see [`Pending`]).
    pub fn add(&self, sub: Arc<Sub>) {
        self.change(|c| {
            c.adds.insert(Arc::as_ptr(&sub) as usize, sub);
        });
    }

    /// Drops a subscription (CLOSE, or replaced by a REQ with its id),
    /// marked cancelled already.
    pub fn remove(&self, sub: &Arc<Sub>) {
        self.change(|c| {
            if c.adds.remove(&(Arc::as_ptr(sub) as usize)).is_none() {
                c.removes.push(sub.clone());
            }
        });
    }

    /// Drops every subscription of a connection that ended (after its
    /// last frame was handled).
    pub fn remove_conn(&self, conn: ConnId) {
        self.change(|c| {
            c.adds.retain(|_, sub| sub.conn != conn);
            c.removes.retain(|sub| sub.conn != conn);
            c.conns.push(conn);
        });
    }

    /// Changes waiting.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no change waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Changes> {
        // A thread that panicked holding it left the lists whole.
        self.changes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn change(&self, f: impl FnOnce(&mut Changes)) {
        let wake = {
            let mut c = self.lock();
            while c.len() >= WAIT_AT && !c.ended {
                c = self.taken.wait(c).unwrap_or_else(|e| e.into_inner());
            }
            f(&mut c);
            let wake = !c.woken && ((c.asleep && c.removals() > 0) || c.len() >= APPLY_AT);
            if wake {
                c.woken = true;
                c.asleep = false;
            }
            wake
        };
        if wake {
            let _ = self.inbox.send(FanoutMsg::Apply);
        }
    }

    /// Takes every change waiting (the fan-out thread).
    fn take(&self) -> Taken {
        self.take_some(true)
    }

    /// Takes the removals waiting, and the adds too with `adds`.
    fn take_some(&self, adds: bool) -> Taken {
        let taken = {
            let mut c = self.lock();
            if adds {
                c.woken = false;
            }
            Taken {
                adds: match adds {
                    true => c.adds.drain().map(|(_, sub)| sub).collect(),
                    false => Vec::new(),
                },
                removes: std::mem::take(&mut c.removes),
                conns: std::mem::take(&mut c.conns),
            }
        };
        self.taken.notify_all();
        taken
    }

    /// The fan-out thread found no removal to apply: it sleeps until a
    /// message comes, unless a removal came meanwhile (then `false`).
    fn sleep(&self) -> bool {
        let mut c = self.lock();
        if c.removals() == 0 && !c.woken {
            c.asleep = true;
        }
        c.asleep
    }

    /// The fan-out thread ended: nobody waits for it.
    fn end(&self) {
        self.lock().ended = true;
        self.taken.notify_all();
    }
}

/// Marks [`Pending`] ended when the fan-out thread returns or panics.
struct Ends<'a>(&'a Pending);

impl Drop for Ends<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// Runs until the inbox closes, applying `pending`'s changes.
/// `fanned` is raised to the highest serial delivered after each batch.
pub fn run(inbox: Receiver<FanoutMsg>, pending: &Pending, fanned: &AtomicU64) {
    let _ends = Ends(pending);
    let mut index = Index::default();
    let mut batches = Batches::default();
    // Removals came since the thread last found none: apply them again
    // within `APPLY_EVERY`.
    let mut ticking = false;
    loop {
        let received = if ticking {
            inbox.recv_timeout(APPLY_EVERY)
        } else {
            inbox.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        let msg = match received {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => {
                ticking = pending.take_some(false).apply(&mut index) > 0 || !pending.sleep();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        match msg {
            FanoutMsg::Apply => {
                pending.take().apply(&mut index);
                ticking = true;
            }
            FanoutMsg::Events(events) => {
                // Before delivering: every subscription added before the
                // writer sent this batch is in the index (see `Pending`).
                pending.take().apply(&mut index);
                for e in &events {
                    index.deliver(e, &mut batches);
                }
                batches.send();
                if let Some(top) = events.iter().map(|e| e.serial).max() {
                    fanned.fetch_max(top, Ordering::SeqCst);
                }
            }
            FanoutMsg::Shutdown => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Budget, Outbox, Outgoing, Transport};
    use nostrwire_event::{Filter, Keys, Timestamp, UnsignedEvent};
    use nostrwire_store::Admitted;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    /// A subscription to kind 1 with its own outbox.
    fn sub(conn: ConnId, id: &str) -> (Arc<Sub>, UnboundedReceiver<Outgoing>) {
        let (tx, rx) = unbounded_channel();
        let budget = Budget::new(1 << 20, None);
        let sub = Sub {
            address: std::net::Ipv4Addr::LOCALHOST.into(),
            conn,
            id: id.into(),
            filters: vec![Filter::from_json(br#"{"kinds":[1]}"#).unwrap()],
            searches: vec![None],
            outbox: Outbox::new(tx, budget.clone(), Transport::Json),
            cancelled: Default::default(),
            gate: None,
            phase: Mutex::new(Phase::Live(Vec::new())),
            held: budget.hold_none(),
        };
        (Arc::new(sub), rx)
    }

    fn event(serial: u64) -> Arc<LiveEvent> {
        let keys = Keys::derive(7, 1);
        let e = UnsignedEvent::new(
            &keys,
            Timestamp::new(1_700_000_000 + serial).unwrap(),
            Kind(1),
            Vec::new(),
            "live",
        )
        .sign(&keys);
        let event = Admitted::from_record(nostrwire_wire::encode_event(&e)).unwrap();
        Arc::new(LiveEvent { serial, event })
    }

    fn held(index: &Index) -> usize {
        index.subs.values().map(HashMap::len).sum()
    }

    /// Events sent to an outbox (control messages aside).
    fn events(rx: &mut UnboundedReceiver<Outgoing>) -> usize {
        std::iter::from_fn(|| rx.try_recv().ok())
            .filter(|o| !matches!(o, Outgoing::Control(_)))
            .count()
    }

    #[test]
    fn a_subscription_closed_while_its_add_waits_never_reaches_the_index() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let pending = Pending::new(tx);
        let (s, _out) = sub(1, "a");
        pending.add(s.clone());
        let mut index = Index::default();
        // A batch of events came: the add is applied.
        pending.take().apply(&mut index);
        let (s2, _out2) = sub(1, "b");
        pending.add(s2.clone());
        s2.cancelled.store(true, Ordering::Relaxed);
        pending.remove(&s2);
        assert_eq!(pending.len(), 0);
        assert!(rx.try_recv().is_err(), "nothing woke the thread");
        assert_eq!(pending.take().apply(&mut index), 0);
        assert_eq!(held(&index), 1);
        // A removal of one the index holds wakes the sleeping thread.
        s.cancelled.store(true, Ordering::Relaxed);
        pending.remove(&s);
        assert_eq!(pending.len(), 1);
        assert!(matches!(rx.try_recv(), Ok(FanoutMsg::Apply)));
        pending.take().apply(&mut index);
        assert_eq!(held(&index), 0);
        assert!(index.by_key.is_empty());
    }

    #[test]
    fn a_removal_takes_out_its_own_subscription_not_one_that_reused_the_id() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let pending = Pending::new(tx);
        let mut index = Index::default();
        let (old, _o1) = sub(1, "x");
        pending.add(old.clone());
        pending.take().apply(&mut index);
        // A REQ reusing the id: the old one is cancelled and dropped, the
        // new one added; whichever order the index meets them in, the new
        // one stays.
        let (new, _o2) = sub(1, "x");
        old.cancelled.store(true, Ordering::Relaxed);
        pending.remove(&old);
        pending.add(new.clone());
        pending.take().apply(&mut index);
        assert!(Arc::ptr_eq(&index.subs[&1]["x"], &new));
        index.remove_sub(&old);
        assert!(Arc::ptr_eq(&index.subs[&1]["x"], &new));
    }

    #[test]
    fn a_connection_that_ends_takes_its_waiting_adds_and_held_subscriptions() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let pending = Pending::new(tx);
        let mut index = Index::default();
        let (applied, _o1) = sub(1, "a");
        let (other, _o2) = sub(2, "a");
        pending.add(applied.clone());
        pending.add(other.clone());
        pending.take().apply(&mut index);
        let (waiting, _o3) = sub(1, "b");
        pending.add(waiting.clone());
        applied.cancelled.store(true, Ordering::Relaxed);
        pending.remove(&applied);
        pending.remove_conn(1);
        assert_eq!(pending.len(), 1, "only the connection is left to take out");
        pending.take().apply(&mut index);
        assert_eq!(held(&index), 1);
        assert!(index.subs.contains_key(&2));
        // Cancelled while its add waited (its socket gone): dropped.
        let (gone, _o4) = sub(3, "a");
        pending.add(gone.clone());
        gone.cancelled.store(true, Ordering::Relaxed);
        assert_eq!(pending.take().apply(&mut index), 1);
        assert!(!index.subs.contains_key(&3));
    }

    #[test]
    fn a_req_flood_wakes_the_thread_once_per_bound_and_never_holds_more() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let pending = Pending::new(tx);
        let mut index = Index::default();
        let mut outs = Vec::new();
        let mut wakes = 0;
        let n = 10 * APPLY_AT;
        for i in 0..n {
            let (s, out) = sub(i as ConnId, "flood");
            outs.push(out);
            pending.add(s);
            assert!(pending.len() <= APPLY_AT);
            // The fan-out thread: no events come, only its wake-ups.
            while let Ok(msg) = rx.try_recv() {
                assert!(matches!(msg, FanoutMsg::Apply));
                wakes += 1;
                pending.take().apply(&mut index);
            }
        }
        // One per APPLY_AT adds: no events come to apply them before.
        assert_eq!(wakes, n / APPLY_AT);
        pending.take().apply(&mut index);
        assert_eq!(held(&index), n);
    }

    #[test]
    fn pushers_wait_at_the_hard_bound_until_the_thread_takes_the_list() {
        let (tx, rx) = crossbeam_channel::bounded(16);
        let pending = Arc::new(Pending::new(tx));
        let flood = {
            let pending = pending.clone();
            std::thread::spawn(move || {
                for i in 0..WAIT_AT + 10 {
                    pending.add(sub(i as ConnId, "flood").0);
                }
            })
        };
        // The thread sleeps on and takes nothing: the pusher stops at the bound.
        while pending.len() < WAIT_AT {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(pending.len(), WAIT_AT);
        assert!(!flood.is_finished());
        let fanned = AtomicU64::new(0);
        std::thread::scope(|scope| {
            scope.spawn(|| run(rx, &pending, &fanned));
            flood.join().unwrap();
            pending.inbox.send(FanoutMsg::Shutdown).unwrap();
        });
        assert!(pending.len() <= 10);
    }

    #[test]
    fn waiting_adds_are_applied_before_a_batch_is_delivered() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let pending = Pending::new(tx.clone());
        let fanned = AtomicU64::new(0);
        let (first, mut first_out) = sub(1, "first");
        let mut outs = Vec::new();
        std::thread::scope(|scope| {
            scope.spawn(|| run(rx, &pending, &fanned));
            // Each batch delivered before the next add (or 10 s passed).
            let delivered = |serial: u64| {
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while fanned.load(Ordering::SeqCst) < serial && std::time::Instant::now() < deadline
                {
                    std::thread::yield_now();
                }
            };
            // Wake the thread once; from then on adds wait for a batch.
            pending.add(first);
            tx.send(FanoutMsg::Events(vec![event(1)])).unwrap();
            delivered(1);
            for serial in 2..50 {
                let (s, out) = sub(serial, "s");
                outs.push(out);
                pending.add(s);
                tx.send(FanoutMsg::Events(vec![event(serial)])).unwrap();
                delivered(serial);
            }
            tx.send(FanoutMsg::Shutdown).unwrap();
        });
        assert_eq!(fanned.load(Ordering::SeqCst), 49);
        assert_eq!(events(&mut first_out), 49);
        for (i, out) in outs.iter_mut().enumerate() {
            // Added before its batch was sent: that batch and the later ones.
            assert_eq!(events(out), 48 - i, "added before serial {}", i + 2);
        }
    }

    #[test]
    fn a_closed_subscription_the_index_holds_is_let_go_without_events() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let pending = Pending::new(tx.clone());
        let fanned = AtomicU64::new(0);
        let (s, _out) = sub(1, "a");
        let mut counts = Vec::new();
        std::thread::scope(|scope| {
            scope.spawn(|| run(rx, &pending, &fanned));
            pending.add(s.clone());
            tx.send(FanoutMsg::Events(vec![event(1)])).unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while fanned.load(Ordering::SeqCst) < 1 && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
            counts.push(Arc::strong_count(&s));
            s.cancelled.store(true, Ordering::Relaxed);
            pending.remove(&s);
            // No batch comes: the sleeping thread is woken to let it go.
            while Arc::strong_count(&s) > 1 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            counts.push(Arc::strong_count(&s));
            tx.send(FanoutMsg::Shutdown).unwrap();
        });
        // The index holds it twice (by key, by connection).
        assert_eq!(counts, [3, 1], "held by the index, then by nobody else");
    }
}
