//! The terms of events just stored, kept for the search indexer: they were
//! derived once, when the event was admitted ([`crate::Admitted`]), so the
//! indexer takes them from here instead of reading, decompressing and
//! decoding the stored record again. Bounded: what does not fit, and
//! everything after a restart, the indexer reads from the database as
//! before.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::EventTerms;

/// Most events held.
const MAX_EVENTS: usize = 16_384;
/// Most bytes held (estimated: term text plus map overhead).
const MAX_BYTES: usize = 16 << 20;

/// Terms by serial; `None` for a stored event whose kind is not indexed.
#[derive(Debug, Default)]
pub(crate) struct FreshTerms {
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    by_serial: BTreeMap<u64, Option<Arc<EventTerms>>>,
    bytes: usize,
}

fn size_of(terms: &Option<Arc<EventTerms>>) -> usize {
    64 + terms.as_ref().map_or(0, |t| {
        t.terms.keys().map(|term| term.len() + 48).sum::<usize>()
    })
}

impl FreshTerms {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the terms of the event stored under `serial`, if there is room.
    pub(crate) fn offer(&self, serial: u64, terms: Option<Arc<EventTerms>>) {
        let size = size_of(&terms);
        let mut held = self.held();
        if held.by_serial.len() >= MAX_EVENTS || held.bytes + size > MAX_BYTES {
            return;
        }
        held.bytes += size;
        if let Some(old) = held.by_serial.insert(serial, terms) {
            held.bytes -= size_of(&old);
        }
    }

    /// The terms of `serial`, taken out: `None` when they are not held
    /// (read the record), `Some(None)` when its kind is not indexed.
    pub(crate) fn take(&self, serial: u64) -> Option<Option<EventTerms>> {
        let mut held = self.held();
        let terms = held.by_serial.remove(&serial)?;
        held.bytes -= size_of(&terms);
        drop(held);
        // Fan-out may still hold the admitted event: then a copy.
        Some(terms.map(|t| Arc::try_unwrap(t).unwrap_or_else(|t| (*t).clone())))
    }

    /// Drops what is held for serials up to `serial` (indexed, or removed
    /// before the indexer came to them).
    pub(crate) fn forget_through(&self, serial: u64) {
        let mut held = self.held();
        let rest = held.by_serial.split_off(&serial.saturating_add(1));
        let gone = std::mem::replace(&mut held.by_serial, rest);
        for terms in gone.values() {
            held.bytes -= size_of(terms);
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held().by_serial.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(words: &[&str]) -> Option<Arc<EventTerms>> {
        let mut t = EventTerms::default();
        for w in words {
            t.terms.insert((*w).to_string(), 1);
        }
        t.len = words.len() as u16;
        Some(Arc::new(t))
    }

    #[test]
    fn taken_once_then_read_from_the_database() {
        let fresh = FreshTerms::default();
        fresh.offer(1, terms(&["hello", "world"]));
        fresh.offer(2, None);
        let one = fresh.take(1).expect("held").expect("indexed kind");
        assert_eq!(one.len, 2);
        assert!(one.terms.contains_key("hello"));
        assert_eq!(fresh.take(1), None);
        assert_eq!(fresh.take(2), Some(None));
        assert_eq!(fresh.take(3), None);
        assert_eq!(fresh.held().bytes, 0);
    }

    #[test]
    fn bounded_by_count_and_forgotten_through_a_serial() {
        let fresh = FreshTerms::default();
        for serial in 1..=(MAX_EVENTS as u64 + 10) {
            fresh.offer(serial, None);
        }
        assert_eq!(fresh.len(), MAX_EVENTS);
        // The newest did not fit: the indexer reads them.
        assert_eq!(fresh.take(MAX_EVENTS as u64 + 1), None);
        fresh.forget_through(100);
        assert_eq!(fresh.len(), MAX_EVENTS - 100);
        assert_eq!(fresh.take(100), None);
        assert_eq!(fresh.take(101), Some(None));
        fresh.forget_through(u64::MAX - 1);
        assert_eq!(fresh.len(), 0);
        assert_eq!(fresh.held().bytes, 0);
    }

    #[test]
    fn bounded_by_bytes() {
        let fresh = FreshTerms::default();
        let big: Vec<String> = (0..400).map(|i| format!("{i:0>40}")).collect();
        let words: Vec<&str> = big.iter().map(String::as_str).collect();
        let mut serial = 0;
        while fresh.held().bytes + size_of(&terms(&words)) <= MAX_BYTES {
            serial += 1;
            fresh.offer(serial, terms(&words));
        }
        let bytes = fresh.held().bytes;
        fresh.offer(serial + 1, terms(&words));
        assert_eq!(fresh.held().bytes, bytes);
        assert_eq!(fresh.take(serial + 1), None);
        assert!(bytes <= MAX_BYTES);
    }
}
