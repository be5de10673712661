//! The LMDB store against a deliberately naive in-memory model: thousands of
//! generated events (many authors, kinds, tags, replaceables, deletions),
//! hundreds of random filters, same results in the same order; search
//! filters return the same set as a literal scan.

use std::collections::{HashMap, HashSet};

use nostrwire_event::{
    Event, EventId, Filter, Keys, Kind, PreimageFields, PublicKey, SignedFields, Tag, Timestamp,
    UnsignedEvent,
};
use nostrwire_store::search::EventTerms;
use nostrwire_store::{
    schema, Admitted, Durability, EventStore, QueryCursor, ScanStatus, StoreError, Verdict,
};
use nostrwire_store::{LmdbStore, OpenOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const KINDS: [u16; 8] = [0, 1, 3, 5, 7, 10002, 30023, 1059];

/// The naive model: a list of live events plus tombstones, rules applied literally.
#[derive(Default)]
struct Model {
    live: Vec<Event>,
    /// (deleted id, author of the request): every author's tombstone.
    deleted_ids: HashSet<(EventId, PublicKey)>,
    deleted_addrs: HashMap<(u16, PublicKey, String), u64>,
    /// NIP-62: author → created_at of their newest request to vanish.
    vanished: HashMap<PublicKey, u64>,
}

fn d_tag(e: &Event) -> String {
    e.tags
        .iter()
        .find(|t| t.name() == "d")
        .and_then(|t| t.first_value())
        .unwrap_or("")
        .to_string()
}

fn same_address(a: &Event, b: &Event) -> bool {
    a.kind == b.kind
        && a.pubkey == b.pubkey
        && (a.kind.is_replaceable() || (a.kind.is_addressable() && d_tag(a) == d_tag(b)))
}

impl Model {
    fn apply(&mut self, e: &Event) -> Verdict {
        if self.live.iter().any(|x| x.id == e.id) {
            return Verdict::Duplicate;
        }
        if self.deleted_ids.contains(&(e.id, e.pubkey)) {
            return Verdict::Deleted;
        }
        if e.kind.as_u16() != 62
            && self
                .vanished
                .get(&e.pubkey)
                .is_some_and(|&t| e.created_at.as_u64() <= t)
        {
            return Verdict::Deleted;
        }
        if e.kind.is_replaceable() || e.kind.is_addressable() {
            let d = if e.kind.is_addressable() {
                d_tag(e)
            } else {
                String::new()
            };
            if let Some(t) = self.deleted_addrs.get(&(e.kind.as_u16(), e.pubkey, d)) {
                if e.created_at.as_u64() <= *t {
                    return Verdict::Deleted;
                }
            }
            if let Some(pos) = self.live.iter().position(|x| same_address(x, e)) {
                let old = &self.live[pos];
                if (old.created_at, std::cmp::Reverse(old.id))
                    >= (e.created_at, std::cmp::Reverse(e.id))
                {
                    return Verdict::Superseded;
                }
                self.live.remove(pos);
            }
        }
        if e.kind == Kind::DELETION {
            for tag in &e.tags {
                match (tag.name(), tag.first_value()) {
                    ("e", Some(v)) => {
                        let id = EventId::from_hex(v).unwrap();
                        self.live.retain(|x| {
                            !(x.id == id
                                && x.pubkey == e.pubkey
                                && ![5, 62].contains(&x.kind.as_u16()))
                        });
                        self.deleted_ids.insert((id, e.pubkey));
                    }
                    ("a", Some(v)) => {
                        let mut parts = v.splitn(3, ':');
                        let kind: u16 = parts.next().unwrap().parse().unwrap();
                        let pk = PublicKey::from_hex(parts.next().unwrap()).unwrap();
                        let d = parts.next().unwrap_or("").to_string();
                        if pk != e.pubkey {
                            continue;
                        }
                        let key_d = if Kind(kind).is_addressable() {
                            d.clone()
                        } else {
                            String::new()
                        };
                        let t = self.deleted_addrs.entry((kind, pk, key_d)).or_insert(0);
                        *t = (*t).max(e.created_at.as_u64());
                        self.live.retain(|x| {
                            !(x.kind.as_u16() == kind
                                && x.pubkey == pk
                                && (!x.kind.is_addressable() || d_tag(x) == d)
                                && x.created_at <= e.created_at)
                        });
                    }
                    _ => {}
                }
            }
        }
        let everywhere = e
            .tags
            .iter()
            .any(|t| t.name() == "relay" && t.first_value() == Some("ALL_RELAYS"));
        if e.kind.as_u16() == 62 && everywhere {
            let until = e.created_at;
            let t = self.vanished.entry(e.pubkey).or_insert(0);
            *t = (*t).max(until.as_u64());
            let author = e.pubkey.to_hex();
            self.live.retain(|x| {
                let wrap_for_author = x.kind.as_u16() == 1059
                    && x.tags
                        .iter()
                        .any(|t| t.name() == "p" && t.first_value() == Some(author.as_str()));
                !((x.pubkey == e.pubkey || wrap_for_author) && x.created_at <= until)
            });
        }
        self.live.push(e.clone());
        Verdict::Stored(0)
    }

    /// Ids matching `filter` whose indexed text holds every word of `terms`,
    /// sorted: content here is one word, `t` tags the only text tags, and
    /// kinds 3 and 1059 are not indexed.
    fn search(&self, filter: &Filter, terms: &str) -> Vec<EventId> {
        sorted(
            self.live
                .iter()
                .filter(|e| filter.matches(*e) && ![3, 1059].contains(&e.kind.as_u16()))
                .filter(|e| {
                    terms.split(' ').all(|term| {
                        e.content == term
                            || e.tags
                                .iter()
                                .any(|t| t.name() == "t" && t.first_value() == Some(term))
                    })
                })
                .map(|e| e.id)
                .collect(),
        )
    }

    fn query(&self, filter: &Filter) -> Vec<EventId> {
        if filter.limit == Some(0) {
            return Vec::new();
        }
        let mut hits: Vec<&Event> = self.live.iter().filter(|e| filter.matches(*e)).collect();
        hits.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        hits.truncate(filter.limit.unwrap_or(u64::MAX) as usize);
        hits.into_iter().map(|e| e.id).collect()
    }
}

fn gen_event(rng: &mut Rng, keys: &[Keys], history: &[Event]) -> Event {
    let k = &keys[rng.below(keys.len())];
    // Rare, early requests to vanish (NIP-62), most of them for every relay:
    // each one removes and blocks part of an author's history.
    let vanish = rng.next() % 300 == 0;
    let kind = if vanish {
        Kind(62)
    } else {
        Kind(KINDS[rng.below(KINDS.len())])
    };
    let mut tags = Vec::new();
    if vanish {
        let relay = ["ALL_RELAYS", "ALL_RELAYS", "wss://elsewhere.example"][rng.below(3)];
        tags.push(Tag::from_strs(&["relay", relay]));
    } else if kind == Kind::DELETION && !history.is_empty() {
        for _ in 0..1 + rng.below(3) {
            let target = &history[rng.below(history.len())];
            if rng.chance(50) || !(target.kind.is_replaceable() || target.kind.is_addressable()) {
                tags.push(Tag::from_strs(&["e", &target.id.to_hex()]));
            } else {
                // Often the author's own address, sometimes someone else's.
                let pk = if rng.chance(70) {
                    k.public_key()
                } else {
                    target.pubkey
                };
                tags.push(Tag::from_strs(&[
                    "a",
                    &format!("{}:{}:{}", target.kind.as_u16(), pk, d_tag(target)),
                ]));
            }
        }
    } else {
        for _ in 0..rng.below(4) {
            let tag = match rng.below(5) {
                0 => Tag::from_strs(&["t", ["nostr", "zap", "x"][rng.below(3)]]),
                4 => Tag::from_strs(&["x", &colliding_hex(rng.below(3))]),
                1 => Tag::from_strs(&["p", &keys[rng.below(keys.len())].public_key().to_hex()]),
                2 if !history.is_empty() => {
                    Tag::from_strs(&["e", &history[rng.below(history.len())].id.to_hex()])
                }
                _ => Tag::from_strs(&["d", ["", "a", "b"][rng.below(3)]]),
            };
            tags.push(tag);
        }
    }
    let created_at = Timestamp::new(1000 + rng.below(if vanish { 15 } else { 40 }) as u64).unwrap();
    let unsigned = UnsignedEvent::new(k, created_at, kind, tags, format!("n{}", rng.next() % 1000));
    unsigned_event(unsigned)
}

/// An event with its real id and a zero signature: the store does not
/// verify signatures, and ids must be real.
fn unsigned_event(unsigned: UnsignedEvent) -> Event {
    Event {
        id: unsigned.compute_id(),
        pubkey: unsigned.pubkey,
        created_at: unsigned.created_at,
        kind: unsigned.kind,
        tags: unsigned.tags,
        content: unsigned.content,
        sig: nostrwire_event::Signature::from_bytes([0; 64]),
    }
}

/// A kind-1 note by `keys` at time 1000 (unsigned, like [`unsigned_event`]).
fn note_at_1000(keys: &Keys, content: &str) -> Event {
    let unsigned = UnsignedEvent::new(
        keys,
        Timestamp::new(1000).unwrap(),
        Kind(1),
        vec![],
        content,
    );
    unsigned_event(unsigned)
}

/// Distinct 64-char hex values sharing their first 8 bytes, which is all the
/// tag index keeps of them: the store must tell them apart on the record.
fn colliding_hex(n: usize) -> String {
    format!("00112233445566aa{n:048x}")
}

fn gen_filter(rng: &mut Rng, keys: &[Keys], history: &[Event]) -> Filter {
    let mut f = Filter::new();
    if rng.chance(15) {
        f.ids = Some(sorted(
            (0..1 + rng.below(4))
                .map(|_| history[rng.below(history.len())].id)
                .collect(),
        ));
    }
    if rng.chance(35) {
        f.authors = Some(sorted(
            (0..1 + rng.below(3))
                .map(|_| keys[rng.below(keys.len())].public_key())
                .collect(),
        ));
    }
    if rng.chance(40) {
        f.kinds = Some(sorted(
            (0..1 + rng.below(3))
                .map(|_| Kind(KINDS[rng.below(KINDS.len())]))
                .collect(),
        ));
    }
    if rng.chance(25) {
        f = f.with_tag(
            b't',
            vec!["nostr".into(), "zap".into()][..1 + rng.below(2)].to_vec(),
        );
    }
    if rng.chance(15) {
        f = f.with_tag(
            b'p',
            vec![keys[rng.below(keys.len())].public_key().to_hex()],
        );
    }
    if rng.chance(15) {
        f = f.with_tag(b'x', vec![colliding_hex(rng.below(3))]);
    }
    if rng.chance(30) {
        f.since = Some(Timestamp::new(1000 + rng.below(40) as u64).unwrap());
    }
    if rng.chance(30) {
        f.until = Some(Timestamp::new(1000 + rng.below(40) as u64).unwrap());
    }
    if rng.chance(70) {
        f.limit = Some(rng.below(30) as u64);
    }
    f
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

fn query_store(store: &LmdbStore, filter: &Filter, budget: usize) -> Vec<EventId> {
    let mut cursor = QueryCursor::new(filter.limit.map_or(usize::MAX, |l| l as usize));
    while store.scan(filter, &mut cursor, budget, 0).unwrap() == ScanStatus::More {}
    cursor.into_results().into_iter().map(|f| f.id).collect()
}

type Db = heed::Database<heed::types::Bytes, heed::types::Bytes>;

/// The record in a stored value (`docs/design-store.md`, "Stored value"):
/// after the header byte, the expiration (bit 0) and the kind (bit 2).
fn record_of(value: &[u8]) -> &[u8] {
    let flags = value[0];
    let skip = 1 + if flags & 1 != 0 { 8 } else { 0 } + if flags & 4 != 0 { 2 } else { 0 };
    &value[skip..]
}

/// The database's LMDB environment, opened directly (to age it to an older
/// schema, or to look at its tables). The store must be closed.
fn raw_env(path: &std::path::Path) -> heed::Env {
    // SAFETY: callers drop the store first; nothing else opens this path.
    unsafe { heed::EnvOpenOptions::new().max_dbs(32).open(path).unwrap() }
}

fn options(compression_level: i32) -> OpenOptions {
    OpenOptions {
        map_size: 1 << 30,
        durability: Durability::None,
        compression_level,
        compress_min_bytes: 0,
        ..OpenOptions::default()
    }
}

#[test]
fn store_agrees_with_naive_model() {
    let raw = agrees_with_model(&options(0));
    let compressed = agrees_with_model(&options(3));
    // Compression must have had an effect on the file, or it did not happen.
    assert!(
        compressed.disk_bytes < raw.disk_bytes,
        "raw {raw:?}, compressed {compressed:?}"
    );
}

#[test]
fn store_with_trailing_indexes_agrees_with_naive_model() {
    // Searches and tag queries must find the events the indexes do not
    // hold yet, and removals must work on both sides.
    // Blocks of a few postings each: terms span many blocks.
    // Index batches commit every few writes: queries and lookups between
    // those commits see entries both written and still waiting.
    let trailing = OpenOptions {
        index_lag: 90,
        block_bytes: 12,
        index_txn_writes: 5,
        ..options(3)
    };
    agrees_with_model_with_search_lag(&trailing, 120);
}

#[test]
fn store_with_dictionaries_agrees_with_naive_model() {
    // Per-kind dictionaries trained on events like the ones stored.
    let mut rng = Rng(7);
    let keys: Vec<Keys> = (0..12).map(|i| Keys::derive(9, i)).collect();
    let mut history = Vec::new();
    for _ in 0..600 {
        let e = gen_event(&mut rng, &keys, &history);
        history.push(e);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dicts.nwbd");
    write_trained_set(&history, &path);
    let mut opts = options(3);
    opts.dictionaries = Some(path);
    agrees_with_model(&opts);
}

#[test]
fn a_database_trains_its_own_dictionaries() {
    let dir = tempfile::tempdir().unwrap();
    let opts = OpenOptions {
        auto_dictionaries: 300,
        ..options(3)
    };
    let store = LmdbStore::open(dir.path(), &opts).unwrap();
    let mut rng = Rng(21);
    let keys: Vec<Keys> = (0..6).map(|i| Keys::derive(12, i)).collect();
    let mut model = Model::default();
    let mut history = Vec::new();
    let mut write = |store: &LmdbStore, n: usize| {
        for _ in 0..n {
            let e = gen_event(&mut rng, &keys, &history);
            history.push(e.clone());
            store
                .submit(&[nostrwire_wire::encode_event(&e).admitted()], 0)
                .unwrap();
            model.apply(&e);
        }
    };
    while store.stats().unwrap().events < 300 {
        assert!(!store.wants_dictionaries().unwrap());
        write(&store, 50);
    }
    assert!(store.wants_dictionaries().unwrap());
    assert!(store.train_dictionaries().unwrap());
    assert!(!store.wants_dictionaries().unwrap());
    assert!(!store.train_dictionaries().unwrap(), "trained twice");
    write(&store, 300);
    let exported = |store: &LmdbStore| {
        let mut out = HashMap::new();
        store
            .export(&Filter::new(), &mut |found| {
                out.insert(found.id, found.json.clone());
                true
            })
            .unwrap();
        out
    };
    let expected: HashMap<EventId, Vec<u8>> = model
        .live
        .iter()
        .map(|e| (e.id, e.to_json_bytes()))
        .collect();
    assert_eq!(exported(&store), expected);
    drop(store);
    // Records written after training name a dictionary; older ones none.
    let (mut with_dictionary, mut without) = (0, 0);
    {
        let env = raw_env(dir.path());
        let rtxn = env.read_txn().unwrap();
        let table = |name: &str| -> Db { env.open_database(&rtxn, Some(name)).unwrap().unwrap() };
        assert!(table("meta").get(&rtxn, b"dicts").unwrap().is_some());
        for item in table("events").iter(&rtxn).unwrap() {
            let (_, value) = item.unwrap();
            let record = record_of(value);
            // Compressed: 0x81 ‖ dictionary id (varint) ‖ ...
            match record {
                [0x81, 0, ..] => without += 1,
                [0x81, ..] => with_dictionary += 1,
                _ => {}
            }
        }
    }
    assert!(
        with_dictionary > 50 && without > 50,
        "{with_dictionary} / {without}"
    );
    // The set is the database's: a reopened store reads every record.
    let store = LmdbStore::open(dir.path(), &opts).unwrap();
    assert_eq!(exported(&store), expected);
    assert!(!store.wants_dictionaries().unwrap());
}

#[test]
fn a_database_keeps_its_dictionary_set() {
    let dir = tempfile::tempdir().unwrap();
    let write_set = |name: &str, seed: u64| {
        let mut rng = Rng(seed);
        let keys: Vec<Keys> = (0..4).map(|i| Keys::derive(11, i)).collect();
        let mut history = Vec::new();
        for _ in 0..300 {
            let e = gen_event(&mut rng, &keys, &history);
            history.push(e);
        }
        let path = dir.path().join(name);
        write_trained_set(&history, &path);
        path
    };
    let first = write_set("a.nwbd", 1);
    let second = write_set("b.nwbd", 2);
    let db = dir.path().join("db");
    let mut opts = options(3);
    opts.dictionaries = Some(first.clone());
    drop(LmdbStore::open(&db, &opts).unwrap());
    // Reopening without naming a file uses the stored set; naming another fails.
    opts.dictionaries = None;
    drop(LmdbStore::open(&db, &opts).unwrap());
    opts.dictionaries = Some(second);
    let err = LmdbStore::open(&db, &opts).unwrap_err();
    assert!(
        err.to_string().contains("different dictionary set"),
        "{err}"
    );
    opts.dictionaries = Some(first);
    drop(LmdbStore::open(&db, &opts).unwrap());
}

/// A dictionary set trained on `events` as `nostrwire dict train` would,
/// written to `path`.
fn write_trained_set(events: &[Event], path: &std::path::Path) {
    let records: Vec<(Kind, Vec<u8>)> = events
        .iter()
        .map(|e| (e.kind, nostrwire_wire::encode_event(e)))
        .collect();
    let samples: Vec<(Kind, &[u8])> = records.iter().map(|(k, r)| (*k, &r[..])).collect();
    let set = nostrwire_wire::compress::DictSet::train(
        &samples,
        &nostrwire_wire::compress::TrainOptions::default(),
    )
    .unwrap();
    std::fs::write(path, set.to_bytes()).unwrap();
}

/// Reactions (kind 7, `+`, an `e` and a `p` tag) among eight authors:
/// records of about 210 bytes, under the default `compress_min_bytes` of
/// 256.
fn reactions(seed: u64, n: usize) -> Vec<Event> {
    let mut rng = Rng(seed);
    let keys: Vec<Keys> = (0..8).map(|i| Keys::derive(30, i)).collect();
    (0..n)
        .map(|i| {
            let mut target = [0u8; 32];
            target.iter_mut().for_each(|b| *b = rng.next() as u8);
            let tags = vec![
                Tag::from_strs(&["e", &nostrwire_event::EventId::from_bytes(target).to_hex()]),
                Tag::from_strs(&["p", &keys[rng.below(keys.len())].public_key().to_hex()]),
            ];
            let author = &keys[i % keys.len()];
            UnsignedEvent::new(
                author,
                Timestamp::new(1000 + i as u64).unwrap(),
                Kind(7),
                tags,
                "+",
            )
            .sign(author)
        })
        .collect()
}

/// The records in the `events` table, in serial order.
fn stored_records(path: &std::path::Path) -> Vec<Vec<u8>> {
    let env = raw_env(path);
    let rtxn = env.read_txn().unwrap();
    let table: Db = env.open_database(&rtxn, Some("events")).unwrap().unwrap();
    table
        .iter(&rtxn)
        .unwrap()
        .map(|item| record_of(item.unwrap().1).to_vec())
        .collect()
}

#[test]
fn small_records_are_compressed_when_a_dictionary_serves_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let set_path = dir.path().join("set.nwbd");
    write_trained_set(&reactions(31, 400), &set_path);
    let events = reactions(32, 200);
    let records: Vec<Vec<u8>> = events.iter().map(nostrwire_wire::encode_event).collect();
    assert!(
        records.iter().all(|r| r.len() < 256),
        "reactions under the threshold"
    );

    let store_with = |db: &std::path::Path, dictionaries: Option<std::path::PathBuf>| {
        let opts = OpenOptions {
            compress_min_bytes: 256,
            dictionaries,
            ..options(3)
        };
        let store = LmdbStore::open(db, &opts).unwrap();
        for r in &records {
            store.submit(&[r.clone().admitted()], 0).unwrap();
        }
        let mut read = HashMap::new();
        store
            .export(&Filter::new(), &mut |found| {
                read.insert(found.id, found.json.clone());
                true
            })
            .unwrap();
        let expected: HashMap<EventId, Vec<u8>> =
            events.iter().map(|e| (e.id, e.to_json_bytes())).collect();
        assert_eq!(read, expected, "every event reads back as it was");
    };

    // With a dictionary for the kind: tried, and kept compressed when smaller.
    let with = dir.path().join("with");
    store_with(&with, Some(set_path));
    let stored = stored_records(&with);
    assert_eq!(stored.len(), records.len());
    let with_dictionary = stored.iter().filter(|r| r[0] == 0x81 && r[1] != 0).count();
    assert!(
        with_dictionary > records.len() / 2,
        "{with_dictionary} of {} compressed",
        records.len()
    );
    let raw_bytes: usize = records.iter().map(Vec::len).sum();
    let stored_bytes: usize = stored.iter().map(Vec::len).sum();
    assert!(stored_bytes < raw_bytes, "{stored_bytes} >= {raw_bytes}");
    // Serials follow the submissions: each record is stored as it is or
    // compressed and smaller.
    for (stored, raw) in stored.iter().zip(&records) {
        assert!(stored == raw || (stored[0] == 0x81 && stored.len() < raw.len()));
    }

    // Without dictionaries, records under the threshold stay raw.
    let without = dir.path().join("without");
    store_with(&without, None);
    let stored = stored_records(&without);
    assert_eq!(stored.len(), records.len());
    assert!(
        stored.iter().all(|r| r[0] == 0x01),
        "raw without a dictionary"
    );
}

#[test]
fn a_database_of_another_schema_is_refused_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = LmdbStore::open(dir.path(), &options(0)).unwrap();
    let keys = Keys::derive(8, 1);
    let event = unsigned_event(UnsignedEvent::new(
        &keys,
        Timestamp::new(1000).unwrap(),
        Kind(1),
        vec![],
        "kept",
    ));
    let incoming = admit(nostrwire_wire::encode_event(&event));
    store.submit(&[incoming], 0).unwrap();
    drop(store);
    let set_version = |version: u32| {
        let env = raw_env(dir.path());
        let mut wtxn = env.write_txn().unwrap();
        let meta: Db = env.open_database(&wtxn, Some("meta")).unwrap().unwrap();
        meta.put(&mut wtxn, b"schema", &version.to_le_bytes())
            .unwrap();
        wtxn.commit().unwrap();
    };
    for version in [0, schema::SCHEMA_VERSION + 1, 16, u32::MAX] {
        set_version(version);
        match LmdbStore::open(dir.path(), &options(0)) {
            Err(StoreError::Schema(v)) => assert_eq!(v, version),
            other => panic!("schema {version} opened: {other:?}"),
        }
    }
    // Refusing wrote nothing: with its own version back, it opens as it was.
    set_version(schema::SCHEMA_VERSION);
    let store = LmdbStore::open(dir.path(), &options(0)).unwrap();
    assert_eq!(query_store(&store, &Filter::new(), 10), [event.id]);
}

#[test]
fn a_search_index_in_the_first_posting_layout_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::derive(8, 4);
    let note = |content: &str| note_at_1000(&keys, content);
    let (once, twice) = (note("lighthouse keeper"), note("keeper keeper of bees"));
    let mut search = Filter::new();
    search.search = Some("keeper".into());
    let store = LmdbStore::open(dir.path(), &options(0)).unwrap();
    store
        .submit(
            &[
                nostrwire_wire::encode_event(&once).admitted(),
                nostrwire_wire::encode_event(&twice).admitted(),
            ],
            0,
        )
        .unwrap();
    while store.index_pending(1000).unwrap() || store.index_search(1000, 0).unwrap() {}
    drop(store);
    // Make it look like an index of layout 1: no `format` key, and a block
    // that layout 2 cannot read (tf 1 written out, then a bad length code).
    let search_env = raw_env(&dir.path().join("search"));
    let mut wtxn = search_env.write_txn().unwrap();
    let meta: Db = search_env
        .open_database(&wtxn, Some("meta"))
        .unwrap()
        .unwrap();
    assert_eq!(
        meta.get(&wtxn, b"format").unwrap(),
        Some(&schema::POSTING_FORMAT.to_le_bytes()[..])
    );
    meta.delete(&mut wtxn, b"format").unwrap();
    let postings: Db = search_env
        .open_database(&wtxn, Some("search"))
        .unwrap()
        .unwrap();
    let blocks: Vec<Vec<u8>> = postings
        .iter(&wtxn)
        .unwrap()
        .map(|r| r.unwrap().0.to_vec())
        .filter(|k| !k.ends_with(&[0xff; 8]))
        .collect();
    assert!(!blocks.is_empty());
    for key in &blocks {
        postings.put(&mut wtxn, key, &[0x00, 0x01, 0xff]).unwrap();
    }
    wtxn.commit().unwrap();
    drop(search_env);
    // A reader that may not rebuild it leaves it unused (no error).
    let reader = OpenOptions {
        writer_lock: false,
        ..options(0)
    };
    let store = LmdbStore::open(dir.path(), &reader).unwrap();
    assert!(query_store(&store, &search, 100).is_empty());
    drop(store);
    // Opening rebuilds it in the present layout; both notes are found, the
    // one that says "keeper" twice first.
    let store = LmdbStore::open(dir.path(), &options(0)).unwrap();
    assert_eq!(query_store(&store, &search, 100), [twice.id, once.id]);
    drop(store);
    let search_env = raw_env(&dir.path().join("search"));
    let rtxn = search_env.read_txn().unwrap();
    let meta: Db = search_env
        .open_database(&rtxn, Some("meta"))
        .unwrap()
        .unwrap();
    assert_eq!(
        meta.get(&rtxn, b"format").unwrap(),
        Some(&schema::POSTING_FORMAT.to_le_bytes()[..])
    );
    let postings: Db = search_env
        .open_database(&rtxn, Some("search"))
        .unwrap()
        .unwrap();
    for item in postings.iter(&rtxn).unwrap() {
        let (key, value) = item.unwrap();
        if !key.ends_with(&[0xff; 8]) {
            let serial = schema::serial_from(&key[key.len() - 8..]).unwrap();
            schema::decode_postings(serial, value).unwrap();
        }
    }
}

#[test]
fn a_search_index_with_unsynced_commits_from_another_boot_is_rebuilt() {
    let Ok(boot) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
        eprintln!("no boot id on this system: the search index syncs like the events");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("search").join("unsynced-boot");
    let keys = Keys::derive(8, 5);
    let note =
        |content: &str| nostrwire_wire::encode_event(&note_at_1000(&keys, content)).admitted();
    let mut search = Filter::new();
    search.search = Some("keeper".into());
    // Synced events: the index commits unsynced, and says so while open.
    let synced = OpenOptions {
        durability: Durability::Full,
        ..options(0)
    };
    let store = LmdbStore::open(dir.path(), &synced).unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), boot.trim());
    store
        .submit(&[note("lighthouse keeper"), note("keeper of bees")], 0)
        .unwrap();
    while store.index_pending(1000).unwrap() || store.index_search(1000, 0).unwrap() {}
    assert_eq!(query_store(&store, &search, 100).len(), 2);
    drop(store);
    // A clean close synced them.
    assert!(!marker.exists());
    // What a machine restart could leave: the mark says both events are
    // in, their postings never reached the disk.
    let lose_postings = || {
        let env = raw_env(&dir.path().join("search"));
        let mut wtxn = env.write_txn().unwrap();
        let postings: Db = env.open_database(&wtxn, Some("search")).unwrap().unwrap();
        postings.clear(&mut wtxn).unwrap();
        wtxn.commit().unwrap();
    };
    lose_postings();
    std::fs::write(&marker, "a boot before this one").unwrap();
    // A reader leaves such an index unused; the relay empties it (both
    // events trail it, and searches scan them) and builds it again.
    let reader = OpenOptions {
        writer_lock: false,
        ..synced.clone()
    };
    let store = LmdbStore::open(dir.path(), &reader).unwrap();
    assert!(query_store(&store, &search, 100).is_empty());
    drop(store);
    let store = LmdbStore::open(dir.path(), &synced).unwrap();
    assert_eq!(query_store(&store, &search, 100).len(), 2);
    while store.index_search(1000, 0).unwrap() {}
    assert_eq!(query_store(&store, &search, 100).len(), 2);
    drop(store);
    // Without the file (or with this boot's id: the page cache held every
    // commit) the index is trusted as it is.
    lose_postings();
    std::fs::write(&marker, boot.trim()).unwrap();
    let store = LmdbStore::open(dir.path(), &synced).unwrap();
    assert!(query_store(&store, &search, 100).is_empty());
}

#[test]
fn a_search_index_far_behind_is_built_after_opening_and_searches_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::derive(8, 6);
    let notes: Vec<Event> = (0..40)
        .map(|i| note_at_1000(&keys, &format!("keeper {i} of the lighthouse")))
        .collect();
    let mut search = Filter::new();
    search.search = Some("lighthouse keeper".into());
    let searched = |store: &LmdbStore| -> Result<usize, StoreError> {
        let mut cursor = QueryCursor::new(usize::MAX);
        while store.scan(&search, &mut cursor, 7, 0)? == ScanStatus::More {}
        Ok(cursor.into_results().len())
    };
    // Stored with search off: no index.
    let off = OpenOptions {
        search: false,
        ..options(0)
    };
    let store = LmdbStore::open(dir.path(), &off).unwrap();
    let batch: Vec<Admitted> = notes
        .iter()
        .map(|e| nostrwire_wire::encode_event(e).admitted())
        .collect();
    store.submit(&batch, 0).unwrap();
    while store.index_pending(1000).unwrap() {}
    drop(store);
    // Turned on, with searches answered while at most 10 events trail: the
    // open does not build the index, and a search is refused, not run
    // over every trailing event.
    let on = OpenOptions {
        search_max_unindexed: 10,
        ..options(0)
    };
    let store = LmdbStore::open(dir.path(), &on).unwrap();
    match searched(&store) {
        Err(StoreError::SearchBehind { indexed, stored }) => assert_eq!((indexed, stored), (0, 40)),
        other => panic!("expected SearchBehind, got {other:?}"),
    }
    // With a bound the 40 trailing events are within, a search walks them
    // itself, 7 a slice: no slice takes them all.
    let wide = OpenOptions {
        search_max_unindexed: 100,
        ..options(0)
    };
    drop(store);
    let store = LmdbStore::open(dir.path(), &wide).unwrap();
    let mut cursor = QueryCursor::new(usize::MAX);
    let mut slices = 1;
    while store.scan(&search, &mut cursor, 7, 0).unwrap() == ScanStatus::More {
        slices += 1;
    }
    assert_eq!(cursor.into_results().len(), 40);
    assert!(slices > 40 / 7, "{slices} slices");
    drop(store);
    let store = LmdbStore::open(dir.path(), &on).unwrap();
    // Within the bound after a batch of 30: the other 10 are scanned by
    // the search itself.
    assert!(store.index_search(30, 0).unwrap());
    assert_eq!(searched(&store).unwrap(), 40);
    while store.index_search(30, 0).unwrap() {}
    assert_eq!(searched(&store).unwrap(), 40);
    drop(store);
    // A bound that is never passed gives the same results straight away.
    let store = LmdbStore::open(dir.path(), &off).unwrap();
    drop(store);
    let store = LmdbStore::open(dir.path(), &options(0)).unwrap();
    assert_eq!(searched(&store).unwrap(), 40);
}

#[test]
fn replaceable_events_have_their_own_table() {
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::derive(8, 3);
    let event = |kind: u16, at: u64, tags: Vec<Tag>, content: &str| {
        let unsigned = UnsignedEvent::new(
            &keys,
            Timestamp::new(at).unwrap(),
            Kind(kind),
            tags,
            content,
        );
        unsigned_event(unsigned)
    };
    let incoming = |e: &Event| admit(nostrwire_wire::encode_event(e));
    // A follow list large enough to be cut (its end in `tails`), a profile,
    // an article and a note.
    let follows: Vec<Tag> = (0..120u64)
        .map(|i| Tag::from_strs(&["p", &Keys::derive(9, i).public_key().to_hex()]))
        .collect();
    let contacts = event(3, 1000, follows.clone(), "");
    let profile = event(0, 1001, vec![], "lighthouse keeper");
    let article = event(
        30023,
        1002,
        vec![Tag::from_strs(&["d", "a"])],
        "keeper notes",
    );
    let note = event(1, 1003, vec![], "keeper of bees");
    let store = LmdbStore::open(dir.path(), &options(0)).unwrap();
    let all = [&contacts, &profile, &article, &note];
    store.submit(&all.map(incoming), 0).unwrap();
    assert!(store.index_past_lag().unwrap());
    drop(store);
    let table_lens = |names: &[&str]| -> Vec<u64> {
        let env = raw_env(dir.path());
        let rtxn = env.read_txn().unwrap();
        names
            .iter()
            .map(|n| {
                let db: Db = env.open_database(&rtxn, Some(n)).unwrap().unwrap();
                db.len(&rtxn).unwrap()
            })
            .collect()
    };
    assert_eq!(table_lens(&["events", "replaceable", "tails"]), [1, 3, 1]);
    let store = LmdbStore::open(dir.path(), &options(0)).unwrap();
    assert_eq!(store.stats().unwrap().events, 4);
    let kinds = |k: &[u16]| {
        let mut f = Filter::new();
        f.kinds = Some(k.iter().map(|&k| Kind(k)).collect());
        f
    };
    assert_eq!(
        query_store(&store, &kinds(&[0, 1, 3, 30023]), 100),
        [note.id, article.id, profile.id, contacts.id]
    );
    assert_eq!(
        store.submit(&[incoming(&profile)], 0).unwrap(),
        vec![Verdict::Duplicate]
    );
    // Newer versions replace the old ones in `replaceable`.
    let contacts2 = event(3, 2000, follows[..60].to_vec(), "");
    let profile2 = event(0, 2001, vec![], "keeper of the light");
    let verdicts = store
        .submit(&[incoming(&contacts2), incoming(&profile2)], 0)
        .unwrap();
    assert!(
        verdicts.iter().all(|v| matches!(v, Verdict::Stored(_))),
        "{verdicts:?}"
    );
    assert!(store.index_past_lag().unwrap());
    assert_eq!(
        query_store(&store, &kinds(&[0, 1, 3, 30023]), 100),
        [profile2.id, contacts2.id, note.id, article.id]
    );
    let mut search = Filter::new();
    search.search = Some("keeper".into());
    assert_eq!(
        sorted(query_store(&store, &search, 100)),
        sorted(vec![profile2.id, article.id, note.id])
    );
    drop(store);
    // The old versions left `replaceable` (and the cut one its tail); the
    // new ones took their places there.
    assert_eq!(table_lens(&["events", "replaceable", "tails"]), [1, 3, 0]);
}

/// The entries of a time-ordered index as (prefix, entry), checked on the
/// way: every key has the table's length, every block value holds at most
/// `max_bytes`, and a prefix's entries strictly increase across its blocks.
fn index_entries(
    env: &heed::Env,
    rtxn: &heed::RoTxn<'_>,
    name: &str,
    max_bytes: usize,
) -> Vec<(Vec<u8>, schema::TimeEntry)> {
    let db: Db = env.open_database(rtxn, Some(name)).unwrap().unwrap();
    let prefix_len = schema::time_prefix_len(name);
    let mut out: Vec<(Vec<u8>, schema::TimeEntry)> = Vec::new();
    let mut block = Vec::new();
    for item in db.iter(rtxn).unwrap() {
        let (k, v) = item.unwrap();
        assert_eq!(k.len(), prefix_len + schema::TIME_SUFFIX, "{name} key");
        assert!(v.len() <= max_bytes, "{name} block of {} bytes", v.len());
        block.clear();
        schema::decode_time_block(k, v, &mut block).unwrap();
        let prefix = &k[..prefix_len];
        for &entry in &block {
            if let Some((p, last)) = out.last() {
                assert!(p[..] != *prefix || *last < entry, "{name}: blocks overlap");
            }
            out.push((prefix.to_vec(), entry));
        }
    }
    out
}

fn agrees_with_model(options: &OpenOptions) -> nostrwire_store::Stats {
    agrees_with_model_with_search_lag(options, 0)
}

/// The model test, the search index brought up to date after each batch
/// once more than `search_lag` events wait for it (as the relay's search
/// thread does).
fn agrees_with_model_with_search_lag(
    options: &OpenOptions,
    search_lag: u64,
) -> nostrwire_store::Stats {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LmdbStore::open(dir.path(), options).unwrap();
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let keys: Vec<Keys> = (0..12).map(|i| Keys::derive(7, i)).collect();
    let mut model = Model::default();
    let mut history: Vec<Event> = Vec::new();
    let mut stats: HashMap<&'static str, usize> = HashMap::new();
    for batch in 0..60 {
        let mut events = Vec::new();
        for _ in 0..50 {
            let e = if !history.is_empty() && rng.chance(3) {
                history[rng.below(history.len())].clone() // resubmission
            } else {
                gen_event(&mut rng, &keys, &history)
            };
            history.push(e.clone());
            events.push(e);
        }
        // Every other batch comes prepared (compressed) by the caller, as
        // the relay's ingest workers do.
        let batch_events: Vec<Admitted> = events
            .iter()
            .map(|e| {
                let record = nostrwire_wire::encode_event(e);
                match batch % 2 {
                    0 => store.admit(record, e.to_json_bytes()).unwrap(),
                    _ => admit(record),
                }
            })
            .collect();
        let verdicts = store.submit(&batch_events, 0).unwrap();
        store.index_past_lag().unwrap();
        store.index_search(usize::MAX, search_lag).unwrap();
        if batch % 10 == 5 {
            // A stop at any point, as after `kill -9`: an index batch may be
            // in flight, some of its transactions committed, and events it
            // read removed since. Opening applies the rows again.
            drop(store);
            store = LmdbStore::open(dir.path(), options).unwrap();
        }
        if batch % 7 == 3 {
            // What the writer and the search thread do when idle, cut short.
            store.index_pending(17).unwrap();
            store.index_search(17, 0).unwrap();
        }
        for (e, got) in events.iter().zip(verdicts) {
            let expected = model.apply(e);
            let name = match (&expected, &got) {
                (Verdict::Stored(_), Verdict::Stored(_)) => "stored",
                (a, b) if a == b => match a {
                    Verdict::Duplicate => "duplicate",
                    Verdict::Superseded => "superseded",
                    _ => "deleted",
                },
                _ => panic!("batch {batch}: {e:?}: model {expected:?}, store {got:?}"),
            };
            *stats.entry(name).or_default() += 1;
        }
        if batch % 10 == 9 {
            for _ in 0..60 {
                let filter = gen_filter(&mut rng, &keys, &history);
                let expected = model.query(&filter);
                // A tiny budget exercises resuming across slices.
                assert_eq!(
                    query_store(&store, &filter, 7),
                    expected,
                    "{}",
                    filter.to_json()
                );
                assert_eq!(
                    query_store(&store, &filter, 100_000),
                    expected,
                    "{}",
                    filter.to_json()
                );
            }
            // Search: the same set as a literal scan (the order is by rank).
            for _ in 0..30 {
                let mut filter = gen_filter(&mut rng, &keys, &history);
                filter.limit = None;
                // Two words: the other term is probed per candidate of the
                // rarer one, across blocks of both.
                let content = &history[rng.below(history.len())].content;
                let term = match rng.below(6) {
                    0 => "nostr".to_string(),
                    1 => "zap".to_string(),
                    2 => "nostr zap".to_string(),
                    3 => format!("{content} nostr"),
                    _ => content.clone(),
                };
                filter.search = Some(term.to_uppercase());
                let expected = model.search(&filter, &term);
                *stats.entry("search hits").or_default() += expected.len();
                for budget in [7, 100_000] {
                    let got = sorted(query_store(&store, &filter, budget));
                    assert_eq!(got, expected, "{}", filter.to_json());
                }
                // With nothing else to test (or only kinds), matches are
                // ranked from their postings and only the best are loaded;
                // `since: 0` matches every event but loads each match. Same events, same order,
                // at every cut (ties of equal scores included).
                for limit in [1, 3, 10] {
                    let mut alone = Filter::new();
                    alone.search = filter.search.clone();
                    alone.limit = Some(limit);
                    // Kinds are read from the stored value's header.
                    if limit == 3 {
                        alone.kinds = filter.kinds.clone();
                    }
                    let mut loaded = alone.clone();
                    loaded.since = Some(Timestamp::new(0).unwrap());
                    for budget in [7, 100_000] {
                        let got = query_store(&store, &alone, budget);
                        assert_eq!(
                            got,
                            query_store(&store, &loaded, budget),
                            "{}",
                            alone.to_json()
                        );
                        *stats.entry("ranked unloaded").or_default() += got.len();
                    }
                }
            }
        }
    }
    for kind in [
        "stored",
        "duplicate",
        "superseded",
        "deleted",
        "search hits",
        "ranked unloaded",
    ] {
        assert!(
            stats.get(kind).copied().unwrap_or(0) > 5,
            "too few {kind}: {stats:?}"
        );
    }
    assert!(
        model.vanished.len() >= 3,
        "too few vanished authors: {:?}",
        model.vanished
    );
    assert_eq!(store.stats().unwrap().events as usize, model.live.len());
    // Every stored event comes back byte for byte (through decompression).
    let mut expected: HashMap<EventId, Vec<u8>> = model
        .live
        .iter()
        .map(|e| (e.id, e.to_json_bytes()))
        .collect();
    store
        .export(&Filter::new(), &mut |found| {
            let json = expected
                .remove(&found.id)
                .expect("exported an unknown event");
            assert_eq!(found.json, json);
            true
        })
        .unwrap();
    assert!(
        expected.is_empty(),
        "{} events not exported",
        expected.len()
    );
    // No index entry outlives its event: once nothing waits, the
    // time-ordered indexes hold exactly the live events' entries and
    // `pending` is empty.
    while store.index_pending(1000).unwrap() || store.index_search(1000, 0).unwrap() {}
    store.sync().unwrap();
    let stats = store.stats().unwrap();
    assert_eq!((stats.index_backlog, stats.search_backlog), (0, 0));
    let copy = tempfile::tempdir().unwrap();
    store.compact_to(copy.path(), &mut |_, _| {}).unwrap();
    drop(store);
    let expected_tags: usize = model
        .live
        .iter()
        .map(|e| {
            let mut keys: Vec<_> = e
                .tags
                .iter()
                .filter(|t| t.name().len() == 1 && t.name().as_bytes()[0].is_ascii_alphabetic())
                .filter_map(|t| Some(schema::tag_prefix(t.name().as_bytes()[0], t.first_value()?)))
                .collect();
            keys.sort_unstable();
            keys.dedup();
            keys.len()
        })
        .sum();
    let env = raw_env(dir.path());
    let rtxn = env.read_txn().unwrap();
    let table = |name: &str| -> Db { env.open_database(&rtxn, Some(name)).unwrap().unwrap() };
    let entries = |name| index_entries(&env, &rtxn, name, options.block_bytes).len();
    assert_eq!(entries("tag"), expected_tags);
    for name in ["created", "kind", "pubkey", "pubkey_kind"] {
        assert_eq!(entries(name), model.live.len(), "{name}");
    }
    assert_eq!(table("ids").len(&rtxn).unwrap(), model.live.len() as u64);
    assert!(table("pending").is_empty(&rtxn).unwrap());
    assert!(table("removed").is_empty(&rtxn).unwrap());
    // The search index, in its own environment, holds exactly the live
    // events' postings and document frequencies: every removed event was
    // taken out, none twice.
    let search_env = raw_env(&dir.path().join("search"));
    let stxn = search_env.read_txn().unwrap();
    let postings: Db = search_env
        .open_database(&stxn, Some("search"))
        .unwrap()
        .unwrap();
    let (mut held, mut frequencies) = (0u64, 0u64);
    // A term's counts come right after its blocks; the last posting
    // serial they name (when they name one) is the term's last posting.
    let mut last_posting = None;
    for item in postings.iter(&stxn).unwrap() {
        let (k, v) = item.unwrap();
        let serial = schema::serial_from(&k[k.len() - 8..]).unwrap();
        match serial {
            u64::MAX => {
                let counts = schema::decode_term_counts(v).unwrap();
                frequencies += counts.df;
                if let Some(last) = counts.last {
                    assert_eq!(Some(last), last_posting, "{k:?}");
                }
                last_posting = None;
            }
            _ => {
                let block = schema::decode_postings(serial, v).unwrap();
                held += block.len() as u64;
                last_posting = block.last().map(|p| p.serial);
            }
        }
    }
    let expected_postings: u64 = model
        .live
        .iter()
        .filter_map(|e| {
            let record = nostrwire_wire::encode_event(e);
            let view = nostrwire_wire::EventView::decode(&record).unwrap();
            EventTerms::of(&view).map(|t| t.terms.len() as u64)
        })
        .sum();
    assert!(expected_postings > 100, "{expected_postings}");
    assert_eq!((held, frequencies), (expected_postings, expected_postings));
    // `compact` merges the blocks it copies into full ones, without losing
    // or reordering an entry.
    let copy_env = raw_env(copy.path());
    let copy_txn = copy_env.read_txn().unwrap();
    let (mut keys, mut packed_keys) = (0, 0);
    for name in schema::table::TIME_ORDERED {
        assert_eq!(
            index_entries(&copy_env, &copy_txn, name, options.block_bytes),
            index_entries(&env, &rtxn, name, options.block_bytes),
            "{name}"
        );
        keys += table(name).len(&rtxn).unwrap();
        let packed: Db = copy_env
            .open_database(&copy_txn, Some(name))
            .unwrap()
            .unwrap();
        packed_keys += packed.len(&copy_txn).unwrap();
    }
    assert!(
        packed_keys < keys,
        "{packed_keys} blocks after compact, {keys} before"
    );
    // The search index is copied entry for entry, into packed leaves.
    let search_copy = raw_env(&copy.path().join("search"));
    let search_copy_txn = search_copy.read_txn().unwrap();
    for name in ["search", "meta"] {
        let rows = |env: &heed::Env, txn: &heed::RoTxn<'_>| -> Vec<(Vec<u8>, Vec<u8>)> {
            let db: Db = env.open_database(txn, Some(name)).unwrap().unwrap();
            db.iter(txn)
                .unwrap()
                .map(|item| {
                    let (k, v) = item.unwrap();
                    (k.to_vec(), v.to_vec())
                })
                .collect()
        };
        let copied = rows(&search_copy, &search_copy_txn);
        assert!(!copied.is_empty(), "search/{name}");
        assert_eq!(copied, rows(&search_env, &stxn), "search/{name}");
    }
    stats
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
