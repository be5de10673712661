//! Stage 6b: live subscriptions. Each filter is indexed under its most
//! selective field (ids, then authors, tags, kinds; else "match all"), so a
//! new event is tested only against filters that can possibly match it.
//! A search filter (NIP-50) also needs every query term among the event's
//! indexed terms (`search.rs`), the rule the stored index follows.
//!
//! Events come in the batches the writer commits. A `nostrwire.v2`
//! subscription gets all of a batch's matches in one frame, sent when the
//! batch is done; nothing waits longer than that (spec/transport.md §9).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_channel::Receiver;
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

/// Runs until the inbox closes.
/// `fanned` is raised to the highest serial delivered after each batch.
pub fn run(inbox: Receiver<FanoutMsg>, fanned: &AtomicU64) {
    let mut index = Index::default();
    let mut batches = Batches::default();
    while let Ok(msg) = inbox.recv() {
        match msg {
            FanoutMsg::Add(sub) => index.add(sub),
            FanoutMsg::Remove(conn, id) => index.remove(conn, &id),
            FanoutMsg::RemoveConn(conn) => index.remove_conn(conn),
            FanoutMsg::Events(events) => {
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
