//! Unit tests of the LMDB store's internals.

use crate::env::open_env;
use crate::lmdb::{Db, LmdbStore, OpenOptions, PageFit, WorkPosition};
use std::ops::Bound;
use std::path::Path;

use heed::RwTxn;
use nostrwire_event::{EventId, Filter, Keys, Kind, SignedFields, Timestamp, UnsignedEvent};

use crate::schema;
use crate::{
    Admitted, Durability, EventStore, Presence, QueryCursor, ScanStatus, StoreError, Verdict,
};

fn note(keys: &Keys, content: &str) -> (EventId, Vec<u8>) {
    let event = UnsignedEvent::new(
        keys,
        Timestamp::new(1000).unwrap(),
        Kind(1),
        Vec::new(),
        content,
    )
    .sign(keys);
    (event.id, nostrwire_wire::encode_event(&event))
}

fn open(dir: &Path) -> LmdbStore {
    let options = OpenOptions {
        map_size: 1 << 30,
        durability: Durability::None,
        index_lag: 1_000,
        ..OpenOptions::default()
    };
    LmdbStore::open(dir, &options).unwrap()
}

#[test]
fn a_waiting_id_is_found_before_and_after_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let keys = Keys::derive(3, 1);
    let (id, record) = note(&keys, "waiting");
    store.submit(&[record.clone().admitted()], 0).unwrap();
    // Waiting: not in `ids`, found through its row.
    assert_eq!(store.presence(&id).unwrap(), Presence::Stored);
    let before = store.env.read_txn().unwrap();
    let entry = schema::id_entry(id.as_bytes(), 1);
    assert!(store.ids.get(&before, &entry).unwrap().is_none());
    assert_eq!(store.serial_of(&before, &id).unwrap(), Some(1));
    // The batch (on another thread: this one holds a snapshot) moves it
    // into `ids` and drops it from the map; the snapshot taken before
    // still finds it, in its own row.
    let more = std::thread::scope(|s| s.spawn(|| store.index_pending(100).unwrap()).join());
    assert!(!more.unwrap());
    assert!(store.waiting_ids.read().unwrap().by_id.is_empty());
    assert_eq!(store.serial_of(&before, &id).unwrap(), Some(1));
    drop(before);
    let after = store.env.read_txn().unwrap();
    assert!(store.ids.get(&after, &entry).unwrap().is_some());
    assert!(store.pending.is_empty(&after).unwrap());
    drop(after);
    assert_eq!(
        store.submit(&[record.admitted()], 0).unwrap(),
        vec![Verdict::Duplicate]
    );
}

#[test]
fn a_snapshot_between_the_transactions_of_a_batch_sees_each_event_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let keys = Keys::derive(3, 3);
    let notes: Vec<_> = (0..40).map(|i| note(&keys, &format!("note {i}"))).collect();
    let records: Vec<Admitted> = notes.iter().map(|(_, r)| r.clone().admitted()).collect();
    store.submit(&records, 0).unwrap();
    // The first transactions of a batch split every few writes: some
    // events now have entries and still their row.
    {
        let mut wtxn = store.env.write_txn().unwrap();
        let work = store.waiting_work(&wtxn, usize::MAX).unwrap();
        let mut at = WorkPosition::default();
        for _ in 0..3 {
            assert!(!store
                .apply_waiting_work(&mut wtxn, &work, &mut at, 7)
                .unwrap());
        }
        wtxn.commit().unwrap();
    }
    let txn = store.env.read_txn().unwrap();
    assert_eq!(store.pending.len(&txn).unwrap(), 40);
    assert!(!store.created.is_empty(&txn).unwrap());
    drop(txn);
    let mut exported = Vec::new();
    store
        .export(&Filter::new(), &mut |found| {
            exported.push(found.id);
            true
        })
        .unwrap();
    let mut found = Vec::new();
    let by_author = Filter {
        authors: Some(vec![keys.public_key()]),
        ..Filter::new()
    };
    let mut cursor = QueryCursor::new(100);
    while store.scan(&by_author, &mut cursor, 7, 0).unwrap() == ScanStatus::More {}
    found.extend(cursor.found.iter().map(|f| f.id));
    for got in [&mut exported, &mut found] {
        got.sort_unstable();
        let mut expected: Vec<_> = notes.iter().map(|(id, _)| *id).collect();
        expected.sort_unstable();
        assert_eq!(*got, expected);
    }
    // Reopening applies the whole batch again, from its rows.
    drop(store);
    let store = open(dir.path());
    let txn = store.env.read_txn().unwrap();
    assert!(store.pending.is_empty(&txn).unwrap());
    assert_eq!(store.ids.len(&txn).unwrap(), 40);
    assert_eq!(store.created.len(&txn).unwrap(), 1);
}

#[test]
fn page_fit_matches_lmdb() {
    let dir = tempfile::tempdir().unwrap();
    let env = open_env(dir.path(), 1 << 26, 4, Durability::None).unwrap();
    let mut wtxn = env.write_txn().unwrap();
    let db: Db = env.create_database(&mut wtxn, Some("t")).unwrap();
    let fit = PageFit::new(db.stat(&wtxn).unwrap().page_size as usize);
    let overflow = |wtxn: &mut RwTxn<'_>, serial: u64, len: usize| {
        let before = db.stat(wtxn).unwrap().overflow_pages;
        db.put(wtxn, &schema::serial_bytes(serial), &vec![7; len])
            .unwrap();
        db.stat(wtxn).unwrap().overflow_pages - before
    };
    // The largest value kept in its leaf, and the smallest that is not.
    assert_eq!(overflow(&mut wtxn, 1, fit.inline_max), 0);
    assert_eq!(overflow(&mut wtxn, 2, fit.inline_max + 1), 1);
    // A cut leaves a first part that fills its pages exactly, and a
    // rest that stays in a leaf.
    for (i, len) in [
        fit.page,
        3 * fit.page + 100,
        5 * fit.page + fit.inline_max - 16,
    ]
    .into_iter()
    .enumerate()
    {
        let at = fit.cut(len).unwrap();
        let key = 10 * (i as u64 + 1);
        assert_eq!(overflow(&mut wtxn, key, at), (at + 16) / fit.page, "{len}");
        assert_eq!(overflow(&mut wtxn, key + 1, len - at), 0, "{len}");
        assert_eq!(
            overflow(&mut wtxn, key + 2, at + 1),
            (at + 16) / fit.page + 1
        );
    }
    // Values that would fill their last page well stay whole.
    assert_eq!(fit.cut(fit.inline_max), None);
    assert_eq!(fit.cut(fit.page + fit.inline_max), None);
    assert_eq!(fit.cut(2 * fit.page - 16), None);
}

#[test]
fn large_values_are_cut_to_fit_whole_pages() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let keys = Keys::derive(3, 4);
    // Content that compresses little: values of 2 to 14 KB.
    let mut seed = 7u64;
    let mut noise = |len: usize| -> String {
        (0..len)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                char::from(b'!' + (seed >> 58) as u8)
            })
            .collect()
    };
    let event = |kind: u16, at: u64, content: &str| {
        UnsignedEvent::new(
            &keys,
            Timestamp::new(at).unwrap(),
            Kind(kind),
            Vec::new(),
            content,
        )
        .sign(&keys)
    };
    let mut events: Vec<_> = (0..60)
        .map(|i| event(1, 1000 + i, &noise(2_000 + i as usize * 200)))
        .collect();
    // A replaceable event, cut, then replaced by another: its tail goes.
    let profile = event(0, 900, &noise(4_000));
    events.push(profile.clone());
    let records: Vec<Admitted> = events
        .iter()
        .map(|e| nostrwire_wire::encode_event(e).admitted())
        .collect();
    store.submit(&records, 0).unwrap();
    let txn = store.env.read_txn().unwrap();
    let cut = store.tails.len(&txn).unwrap();
    assert!((10..61).contains(&cut), "{cut} values cut");
    // Every tail fits in its leaf: the cut is where LMDB's limits are.
    assert_eq!(store.tails.stat(&txn).unwrap().overflow_pages, 0);
    drop(txn);
    let newer = event(0, 901, &noise(4_000));
    let record = nostrwire_wire::encode_event(&newer).admitted();
    store.submit(&[record], 0).unwrap();
    events.retain(|e| e.id != profile.id);
    events.push(newer);
    let txn = store.env.read_txn().unwrap();
    assert_eq!(store.tails.len(&txn).unwrap(), cut);
    drop(txn);
    // Every event comes back whole, before and after reopening.
    let mut expected: Vec<Vec<u8>> = events.iter().map(|e| e.to_json_bytes()).collect();
    expected.sort();
    let exported = |store: &LmdbStore| {
        let mut exported = Vec::new();
        store
            .export(&Filter::new(), &mut |found| {
                exported.push(found.json.clone());
                true
            })
            .unwrap();
        exported.sort();
        exported
    };
    assert_eq!(exported(&store), expected);
    drop(store);
    assert_eq!(exported(&open(dir.path())), expected);
}

#[test]
fn ids_that_share_a_prefix_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let keys = Keys::derive(3, 5);
    let (first, record) = note(&keys, "first");
    store.submit(&[record.admitted()], 0).unwrap();
    let (second, record) = note(&keys, "second");
    store.submit(&[record.admitted()], 0).unwrap();
    store.index_pending(100).unwrap();
    // A key under the second id's prefix that leads to the first event
    // (serial 1), as a stored event whose id began like the second's
    // would have: it sorts before the second's own key (serial 2).
    let mut wtxn = store.env.write_txn().unwrap();
    store
        .ids
        .put(&mut wtxn, &schema::id_entry(second.as_bytes(), 1), &[])
        .unwrap();
    wtxn.commit().unwrap();
    assert_eq!(store.presence(&first).unwrap(), Presence::Stored);
    assert_eq!(store.presence(&second).unwrap(), Presence::Stored);
    let txn = store.env.read_txn().unwrap();
    assert_eq!(store.serial_of(&txn, &first).unwrap(), Some(1));
    assert_eq!(store.serial_of(&txn, &second).unwrap(), Some(2));
    // An id with the same first bytes that no event has.
    let mut unknown = *second.as_bytes();
    unknown[31] ^= 1;
    let unknown = EventId::from_bytes(unknown);
    assert_eq!(store.serial_of(&txn, &unknown).unwrap(), None);
    drop(txn);
    assert_eq!(store.presence(&unknown).unwrap(), Presence::Absent);
}

#[test]
fn a_search_batch_cut_short_is_left_out_and_applied_again() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        durability: Durability::None,
        index_lag: 1_000,
        index_txn_writes: 4,
        ..OpenOptions::default()
    };
    let store = LmdbStore::open(dir.path(), &options).unwrap();
    let (keys, other) = (Keys::derive(3, 6), Keys::derive(3, 7));
    let event = |keys: &Keys, kind: u16, at: u64, content: &str| {
        let event = UnsignedEvent::new(
            keys,
            Timestamp::new(at).unwrap(),
            Kind(kind),
            Vec::new(),
            content,
        )
        .sign(keys);
        (event.id, admit(nostrwire_wire::encode_event(&event)))
    };
    let mut apples: Vec<EventId> = Vec::new();
    let mut batch = Vec::new();
    for i in 0..30 {
        let (id, record) = event(&keys, 1, 1000 + i, &format!("apple word{i}"));
        apples.push(id);
        batch.push(record);
    }
    let (profile, record) = event(&other, 0, 900, "apple orchard");
    apples.push(profile);
    batch.push(record);
    store.submit(&batch, 0).unwrap();
    let index = store.search.as_ref().unwrap();
    // A batch that stops after two commits, as a crash would: postings
    // above the mark, the mark where it was.
    assert!(store
        .index_search_into(index, usize::MAX, 0, Some(2))
        .unwrap());
    let apple = schema::term_prefix("apple");
    let stxn = index.env.read_txn().unwrap();
    assert_eq!(index.indexed(&stxn).unwrap(), Some(0));
    assert!(index.partial(&stxn).unwrap().is_some());
    assert!(index.postings_above(&stxn, &apple, 0).unwrap() > 0);
    drop(stxn);
    // Searches find each event once, and count each once.
    let search = Filter {
        search: Some("apple".into()),
        ..Filter::new()
    };
    let mut cursor = QueryCursor::new(100);
    while store.scan(&search, &mut cursor, 7, 0).unwrap() == ScanStatus::More {}
    let mut found: Vec<EventId> = cursor.into_results().iter().map(|f| f.id).collect();
    found.sort_unstable();
    apples.sort_unstable();
    assert_eq!(found, apples);
    let mut count = QueryCursor::counting(1_000);
    while store.scan(&search, &mut count, 7, 0).unwrap() == ScanStatus::More {}
    assert_eq!(count.counted, 31);
    // The profile is replaced: the postings of the old one, which the
    // cut batch may have written, go with it.
    let (_, record) = event(&other, 0, 901, "pear orchard");
    store.submit(&[record], 0).unwrap();
    while store.index_search(usize::MAX, 0).unwrap() {}
    let stxn = index.env.read_txn().unwrap();
    assert_eq!(index.partial(&stxn).unwrap(), None);
    let held = |term: &str| -> Vec<u64> {
        let prefix = schema::term_prefix(term);
        let lower = schema::search_key(&prefix, 0);
        let upper = schema::df_key(&prefix);
        let range = (Bound::Included(&lower[..]), Bound::Excluded(&upper[..]));
        let mut serials = Vec::new();
        for item in index.postings.range(&stxn, &range).unwrap() {
            let (k, v) = item.unwrap();
            serials.extend(
                crate::search::index::postings(k, v)
                    .unwrap()
                    .iter()
                    .map(|p| p.serial),
            );
        }
        assert_eq!(
            index.document_frequency(&stxn, &prefix).unwrap(),
            serials.len() as u64,
            "{term}"
        );
        serials
    };
    assert_eq!(held("apple"), (1..=30).collect::<Vec<u64>>());
    assert_eq!(held("orchard"), [32]);
    assert_eq!(held("pear"), [32]);
    assert_eq!(index.totals(&stxn).unwrap().0, 31);
}

#[test]
fn one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let writer = OpenOptions::default();
    let first = LmdbStore::open(dir.path(), &writer).unwrap();
    let second = LmdbStore::open(dir.path(), &writer);
    assert!(matches!(second, Err(StoreError::Busy(_))), "{second:?}");
    drop(first);
    drop(LmdbStore::open(dir.path(), &writer).unwrap());
}

#[test]
fn a_waiting_id_counts_only_with_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let keys = Keys::derive(3, 2);
    let (stored, record) = note(&keys, "stored");
    store.submit(&[record.admitted()], 0).unwrap();
    // What a failed commit leaves: map entries for serials whose rows
    // are not there, or hold another event.
    let (ghost, ghost_record) = note(&keys, "never committed");
    store
        .waiting_ids
        .write()
        .unwrap()
        .by_id
        .extend([(ghost, 1), (EventId::from_bytes([5; 32]), 99)]);
    let txn = store.env.read_txn().unwrap();
    assert_eq!(store.serial_of(&txn, &stored).unwrap(), Some(1));
    assert_eq!(store.serial_of(&txn, &ghost).unwrap(), None);
    assert_eq!(
        store
            .serial_of(&txn, &EventId::from_bytes([5; 32]))
            .unwrap(),
        None
    );
    drop(txn);
    assert_eq!(
        store.submit(&[ghost_record.admitted()], 0).unwrap(),
        vec![Verdict::Stored(2)]
    );
}

#[test]
fn the_applied_sequence_is_written_with_its_batch_and_carried_by_a_compacted_copy() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    assert_eq!(store.applied_sequence().unwrap(), 0);
    let keys = Keys::derive(3, 9);
    let (_, first) = note(&keys, "first");
    let (_, second) = note(&keys, "second");
    assert_eq!(
        store.submit_at(&[first.admitted()], 0, 41).unwrap(),
        vec![Verdict::Stored(1)]
    );
    assert_eq!(store.applied_sequence().unwrap(), 41);
    // A batch submitted without a position leaves the recorded one.
    store.submit(&[second.admitted()], 0).unwrap();
    assert_eq!(store.applied_sequence().unwrap(), 41);
    let copy = tempfile::tempdir().unwrap();
    store.compact_to(copy.path(), &mut |_, _| {}).unwrap();
    drop(store);
    assert_eq!(open(copy.path()).applied_sequence().unwrap(), 41);
}

/// Records as admitted events (their JSON rendered from the record).
trait Admit {
    fn admitted(self) -> Admitted;
}

impl Admit for Vec<u8> {
    fn admitted(self) -> Admitted {
        admit(self)
    }
}

fn admit(record: Vec<u8>) -> Admitted {
    Admitted::from_record(record).expect("a valid record")
}

#[test]
fn the_search_index_built_from_admitted_terms_is_the_one_built_from_stored_records() {
    use nostrwire_event::Tag;
    // `fresh`: events admitted by the store, whose terms the indexer takes
    // as admitted; `read`: the same events without terms, which the indexer
    // reads, decompresses and decodes from the database.
    let (fresh_dir, read_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (fresh, read) = (open(fresh_dir.path()), open(read_dir.path()));
    let keys = Keys::derive(5, 1);
    let words = [
        "apple",
        "pear",
        "plum",
        "fig",
        "kiwi",
        "lime",
        "Ünïcode",
        "naïve",
    ];
    let event = |kind: u16, at: u64, tags: Vec<Tag>, content: String| {
        let event = UnsignedEvent::new(
            &keys,
            Timestamp::new(at).unwrap(),
            Kind(kind),
            tags,
            &content,
        )
        .sign(&keys);
        (
            event.id,
            nostrwire_wire::encode_event(&event),
            event.to_json_bytes(),
        )
    };
    // Each event as (id, nwb record, JSON).
    type Signed = (EventId, Vec<u8>, Vec<u8>);
    let mut batches: Vec<Vec<Signed>> = Vec::new();
    for b in 0..4u64 {
        let mut batch = Vec::new();
        for i in 0..25u64 {
            let n = (b * 25 + i) as usize;
            let content = format!(
                "{} {} {}",
                words[n % 8],
                words[(n * 3 + 1) % 8],
                words[n % 3]
            );
            let (kind, tags) = match n % 5 {
                0 => (
                    30023,
                    vec![
                        Tag::from_strs(&["d", &format!("a{n}")]),
                        Tag::from_strs(&["title", words[(n + 2) % 8]]),
                    ],
                ),
                1 => (1, vec![Tag::from_strs(&["t", words[(n + 5) % 8]])]),
                2 => (7, Vec::new()), // not indexed
                _ => (1, Vec::new()),
            };
            batch.push(event(kind, 1_000 + n as u64, tags, content));
        }
        // A profile, replaced in a later batch before the indexer runs.
        batch.push(event(
            0,
            900 + b,
            Vec::new(),
            format!(
                r#"{{"name":"{}","about":"{}"}}"#,
                words[b as usize],
                words[7 - b as usize]
            ),
        ));
        batches.push(batch);
    }
    // A deletion of an event stored earlier, before anything is indexed.
    let victim = batches[1][3].0;
    let deletion = event(
        5,
        2_000,
        vec![Tag::from_strs(&["e", &victim.to_hex()])],
        String::new(),
    );
    batches.push(vec![deletion]);
    for batch in &batches {
        let admitted: Vec<Admitted> = batch
            .iter()
            .map(|(_, record, json)| fresh.admit(record.clone(), json.clone()).unwrap())
            .collect();
        assert!(admitted.iter().all(|a| a.search_terms.is_some()));
        fresh.submit(&admitted, 0).unwrap();
        let records: Vec<Admitted> = batch
            .iter()
            .map(|(_, record, _)| admit(record.clone()))
            .collect();
        read.submit(&records, 0).unwrap();
    }
    assert!(
        fresh.fresh_terms.len() > 90,
        "stored events' terms are held"
    );
    assert_eq!(read.fresh_terms.len(), 0);
    while fresh.index_search(7, 0).unwrap() {}
    while read.index_search(7, 0).unwrap() {}
    assert_eq!(
        fresh.fresh_terms.len(),
        0,
        "taken or forgotten once indexed"
    );
    // The same postings, byte for byte, and the same totals.
    let dump = |store: &LmdbStore| {
        let index = store.search.as_ref().unwrap();
        let stxn = index.env.read_txn().unwrap();
        let rows: Vec<(Vec<u8>, Vec<u8>)> = index
            .postings
            .iter(&stxn)
            .unwrap()
            .map(|item| {
                let (k, v) = item.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        (rows, index.totals(&stxn).unwrap())
    };
    let (fresh_rows, fresh_totals) = dump(&fresh);
    let (read_rows, read_totals) = dump(&read);
    assert!(!fresh_rows.is_empty());
    assert_eq!(fresh_totals, read_totals);
    assert_eq!(fresh_rows, read_rows);
    // And searches agree (the deleted event is in neither).
    for word in words {
        let results = |store: &LmdbStore| {
            let filter = Filter {
                search: Some(word.to_lowercase()),
                ..Filter::new()
            };
            let mut cursor = QueryCursor::new(500);
            while store.scan(&filter, &mut cursor, 7, 0).unwrap() == ScanStatus::More {}
            cursor
                .into_results()
                .iter()
                .map(|f| f.id)
                .collect::<Vec<EventId>>()
        };
        let found = results(&fresh);
        assert!(!found.contains(&victim));
        assert_eq!(found, results(&read), "{word}");
    }
}

/// Hands each committed batch's (ticket, verdict) pairs to the test.
struct Collect(std::sync::mpsc::Sender<Vec<(u32, Verdict)>>);

impl crate::Committed<u32> for Collect {
    fn committed(&mut self, batch: Vec<(Admitted, u32, Verdict)>) {
        let answers = batch.into_iter().map(|(_, t, v)| (t, v)).collect();
        self.0.send(answers).expect("the test is listening");
    }

    fn failed(&mut self, _batch: Vec<(Admitted, u32)>, error: &StoreError) {
        panic!("a write failed: {error}");
    }
}

fn submission(record: Vec<u8>, ticket: u32) -> crate::Submission<u32> {
    crate::Submission {
        event: record.admitted(),
        publisher: u64::from(ticket),
        position: None,
        ticket,
    }
}

#[test]
fn the_writer_answers_each_event_in_order_after_its_commit() {
    use crate::{writer_inbox, Write, Writer, WriterOptions};
    let dir = tempfile::tempdir().unwrap();
    let store: std::sync::Arc<dyn EventStore> = std::sync::Arc::new(open(dir.path()));
    let (to_writer, inbox) = writer_inbox(16);
    let (done, answers) = std::sync::mpsc::channel();
    let options = WriterOptions {
        max_batch: 4,
        linger: std::time::Duration::ZERO,
    };
    let writer = Writer::spawn(store.clone(), options, inbox, None, Collect(done)).unwrap();
    let keys = Keys::derive(5, 1);
    let notes: Vec<_> = (0..6).map(|i| note(&keys, &format!("note {i}"))).collect();

    // A batch larger than `max_batch` is still one transaction, answered in order.
    let batch = (0..6).map(|i| submission(notes[i].1.clone(), i as u32));
    to_writer.send(Write::Batch(batch.collect())).unwrap();
    let first = answers.recv().unwrap();
    let serials: Vec<u64> = first
        .iter()
        .map(|(_, v)| match v {
            Verdict::Stored(serial) => *serial,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        first.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5]
    );
    assert_eq!(serials, [1, 2, 3, 4, 5, 6]);
    for (id, _) in &notes {
        assert_eq!(
            store.presence(id).unwrap(),
            Presence::Stored,
            "stored before the answer"
        );
    }

    // Shutdown commits what was queued before it: the same event again is
    // told a duplicate, and nothing is answered twice.
    to_writer
        .send(Write::Event(Box::new(submission(notes[0].1.clone(), 100))))
        .unwrap();
    to_writer.send(Write::Shutdown).unwrap();
    writer.join();
    assert_eq!(answers.recv().unwrap(), [(100, Verdict::Duplicate)]);
    assert!(answers.try_recv().is_err());
}

/// What the writer reported, in order.
#[derive(Debug, PartialEq)]
enum Report {
    Committed(Vec<u32>),
    Failed(Vec<u32>),
    Applied(u64, u64),
}

/// Hands every report of the writer to the test.
struct Reports(std::sync::mpsc::Sender<Report>);

impl crate::Committed<u32> for Reports {
    fn committed(&mut self, batch: Vec<(Admitted, u32, Verdict)>) {
        let tickets = batch.into_iter().map(|(_, t, _)| t).collect();
        self.0.send(Report::Committed(tickets)).unwrap();
    }

    fn failed(&mut self, batch: Vec<(Admitted, u32)>, error: &StoreError) {
        assert!(matches!(error, StoreError::OutOfOrder { .. }), "{error}");
        let tickets = batch.into_iter().map(|(_, t)| t).collect();
        self.0.send(Report::Failed(tickets)).unwrap();
    }

    fn applied(&mut self, applied: u64, through: u64) {
        self.0.send(Report::Applied(applied, through)).unwrap();
    }
}

#[test]
fn the_writer_applies_a_log_only_in_order_from_where_the_store_stands() {
    use crate::{writer_inbox, LogPosition, Submission, Write, Writer, WriterOptions};
    let dir = tempfile::tempdir().unwrap();
    let store: std::sync::Arc<dyn EventStore> = std::sync::Arc::new(open(dir.path()));
    let (to_writer, inbox) = writer_inbox(16);
    let (reports, reported) = std::sync::mpsc::channel();
    let options = WriterOptions {
        max_batch: 16,
        linger: std::time::Duration::ZERO,
    };
    let writer = Writer::spawn(store.clone(), options, inbox, None, Reports(reports)).unwrap();
    let keys = Keys::derive(5, 2);
    let notes: Vec<_> = (0..5).map(|i| note(&keys, &format!("log {i}"))).collect();
    // Note `i` at log position `sequence`, handed over as following `previous`.
    let at = |i: usize, sequence: u64, previous: u64| Submission {
        event: notes[i].1.clone().admitted(),
        publisher: 0,
        position: Some(LogPosition { sequence, previous }),
        ticket: i as u32,
    };
    let send = |batch: Vec<Submission<u32>>| {
        to_writer.send(Write::Batch(batch)).unwrap();
        let mut got = Vec::new();
        loop {
            let report = reported.recv().unwrap();
            let last = matches!(report, Report::Applied(..));
            got.push(report);
            if last {
                return got;
            }
        }
    };

    // 1 and 2 in order; 4 follows 3, which never came: 4 is refused and the
    // store stays at 2 (the reader is told to hand the log over from 2).
    assert_eq!(
        send(vec![at(0, 1, 0), at(1, 2, 1), at(3, 4, 3)]),
        [
            Report::Committed(vec![0, 1]),
            Report::Failed(vec![3]),
            Report::Applied(2, 4)
        ]
    );
    assert_eq!(store.applied_sequence().unwrap(), 2);
    assert_eq!(store.presence(&notes[3].0).unwrap(), Presence::Absent);
    // A second copy of 2 is not applied again.
    assert_eq!(
        send(vec![at(1, 2, 1)]),
        [Report::Failed(vec![1]), Report::Applied(2, 2)]
    );
    // Handed over again from 2: 3 and 4 are applied, then 6, which the
    // reader hands over as following 4 (it vouches that 5 is not to be
    // applied).
    assert_eq!(
        send(vec![at(2, 3, 2), at(3, 4, 3)]),
        [Report::Committed(vec![2, 3]), Report::Applied(4, 4)]
    );
    assert_eq!(
        send(vec![at(4, 6, 4)]),
        [Report::Committed(vec![4]), Report::Applied(6, 6)]
    );
    assert_eq!(store.applied_sequence().unwrap(), 6);
    for (id, _) in &notes {
        assert_eq!(store.presence(id).unwrap(), Presence::Stored);
    }
    to_writer.send(Write::Shutdown).unwrap();
    writer.join();
}

#[test]
fn a_task_on_the_writer_removes_exactly_the_ids_it_names() {
    use crate::{writer_inbox, Task, Write, Writer, WriterOptions};
    let dir = tempfile::tempdir().unwrap();
    let store: std::sync::Arc<dyn EventStore> = std::sync::Arc::new(open(dir.path()));
    let (to_writer, inbox) = writer_inbox(16);
    let (done, answers) = std::sync::mpsc::channel();
    let options = WriterOptions {
        max_batch: 64,
        linger: std::time::Duration::ZERO,
    };
    let writer = Writer::spawn(store.clone(), options, inbox, None, Collect(done)).unwrap();
    let keys = Keys::derive(5, 2);
    let notes: Vec<_> = (0..10).map(|i| note(&keys, &format!("note {i}"))).collect();
    let batch = (0..10).map(|i| submission(notes[i].1.clone(), i as u32));
    to_writer.send(Write::Batch(batch.collect())).unwrap();
    answers.recv().unwrap();

    // Even ids, and one never stored.
    let mut doomed: Vec<EventId> = notes.iter().step_by(2).map(|(id, _)| *id).collect();
    doomed.push(note(&keys, "never stored").0);
    let (tell, removed) = std::sync::mpsc::channel();
    let ids = doomed.clone();
    to_writer
        .send(Write::Task(Task::new(move |store| {
            tell.send(store.remove_ids(&ids).unwrap()).unwrap();
        })))
        .unwrap();
    assert_eq!(removed.recv().unwrap(), 5);
    for (i, (id, _)) in notes.iter().enumerate() {
        let expected = match i % 2 {
            0 => Presence::Absent,
            _ => Presence::Stored,
        };
        assert_eq!(store.presence(id).unwrap(), expected, "note {i}");
    }
    let mut cursor = QueryCursor::new(100);
    while store.scan(&Filter::new(), &mut cursor, 1_000, 0).unwrap() == ScanStatus::More {}
    assert_eq!(cursor.into_results().len(), 5);
    // No tombstone: a removed event may be stored again.
    to_writer
        .send(Write::Event(Box::new(submission(notes[0].1.clone(), 100))))
        .unwrap();
    assert!(matches!(answers.recv().unwrap()[0].1, Verdict::Stored(_)));
    to_writer.send(Write::Shutdown).unwrap();
    writer.join();
}

/// JSON results of `filter`, newest first, as a client is sent them.
fn json_results(store: &LmdbStore, filter: &Filter) -> Vec<String> {
    json_results_at(store, filter, 0)
}

fn json_results_at(store: &LmdbStore, filter: &Filter, now: u64) -> Vec<String> {
    let mut cursor = QueryCursor::new(1_000);
    while store.scan(filter, &mut cursor, 1_000, now).unwrap() == ScanStatus::More {}
    let mut found = cursor.into_results();
    found.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    found
        .into_iter()
        .map(|f| String::from_utf8(f.json).unwrap())
        .collect()
}

#[test]
fn kept_json_is_the_rendering_and_never_outlives_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let keys = Keys::derive(9, 1);
    let events: Vec<_> = (0..40u64)
        .map(|i| {
            let tags = vec![
                nostrwire_event::Tag::new(vec!["t".into(), format!("topic{}", i % 2)]).unwrap(),
            ];
            let content = format!("note {i} \"quoted\" \u{1F600}\n{}", "x".repeat(300));
            UnsignedEvent::new(
                &keys,
                Timestamp::new(1_000 + i).unwrap(),
                Kind(1),
                tags,
                &content,
            )
            .sign(&keys)
        })
        .collect();
    let records: Vec<_> = events
        .iter()
        .map(|e| nostrwire_wire::encode_event(e).admitted())
        .collect();
    store.submit(&records, 0).unwrap();
    // Index entries written, so that a removal's deletions of them wait
    // (index_lag) and scans still meet the removed events' serials.
    while store.index_pending(1_000).unwrap() {}
    let filter = Filter::from_json(br##"{"#t":["topic0"]}"##).unwrap();
    let json = |keep: &dyn Fn(usize) -> bool| -> Vec<String> {
        let kept = events.iter().enumerate().rev().filter(|(i, _)| keep(*i));
        kept.map(|(_, e)| String::from_utf8(e.to_json_bytes()).unwrap())
            .collect()
    };
    let rendered = json(&|i| i % 2 == 0);
    // Other events' JSON was kept meanwhile: the filter is still tested.
    assert_eq!(json_results(&store, &filter), rendered[..]);
    assert_eq!(store.event_cache.held().0, 20);
    assert_eq!(
        json_results(&store, &filter),
        rendered[..],
        "from the cache"
    );
    // A count over kept events counts them, and renders nothing.
    let mut count = QueryCursor::counting(1_000);
    while store.scan(&filter, &mut count, 1_000, 0).unwrap() == ScanStatus::More {}
    assert_eq!(count.count(), 20);
    assert!(count.into_results().is_empty());
    let other = Filter::from_json(br##"{"#t":["topic1"]}"##).unwrap();
    assert_eq!(json_results(&store, &other).len(), 20);
    assert_eq!(store.event_cache.held().0, 40);

    // Removed: gone from every later query, whatever the cache holds.
    let doomed: Vec<EventId> = events.iter().step_by(4).map(|e| e.id).collect();
    assert_eq!(store.remove_ids(&doomed).unwrap(), 10);
    assert_eq!(store.event_cache.held().0, 40);
    let left = json(&|i| i % 2 == 0 && i % 4 != 0);
    assert_eq!(json_results(&store, &filter), left[..]);
    while store.index_pending(1_000).unwrap() {}
    assert_eq!(json_results(&store, &filter), left[..]);

    // An expiring event: kept, and left out once its time has come.
    let tags = ["t", "expiring"].map(String::from).to_vec();
    let expiration = ["expiration", "5000"].map(String::from).to_vec();
    let expiring = UnsignedEvent::new(
        &keys,
        Timestamp::new(2_000).unwrap(),
        Kind(1),
        vec![
            nostrwire_event::Tag::new(tags).unwrap(),
            nostrwire_event::Tag::new(expiration).unwrap(),
        ],
        "soon gone",
    )
    .sign(&keys);
    let record = nostrwire_wire::encode_event(&expiring).admitted();
    store.submit(&[record], 2_000).unwrap();
    while store.index_pending(1_000).unwrap() {}
    let filter = Filter::from_json(br##"{"#t":["expiring"]}"##).unwrap();
    assert_eq!(json_results_at(&store, &filter, 4_000).len(), 1);
    assert_eq!(json_results_at(&store, &filter, 4_000).len(), 1);
    assert!(json_results_at(&store, &filter, 5_000).is_empty());
}
