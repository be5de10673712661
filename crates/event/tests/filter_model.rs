//! `Filter::matches` against a deliberately naive matcher written straight
//! from the NIP-01 text over `serde_json::Value`s, on generated events and
//! filters. The generator is deterministic; set `FILTER_MODEL_SEED` to explore.

use nostrwire_event::{
    matches_any, Event, EventId, EventRef, Filter, Kind, PreimageFields, PublicKey, Signature, Tag,
    Timestamp,
};
use serde_json::{json, Map, Value};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
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
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn hex_pool(tag: u8) -> Vec<String> {
    (0..4u8)
        .map(|i| nostrwire_event::hex::encode(&[tag ^ i; 32]))
        .collect()
}

const KINDS: [u16; 6] = [0, 1, 3, 7, 30023, 40000];
const LETTERS: [&str; 6] = ["e", "p", "t", "d", "T", "xx"];
const WORDS: [&str; 4] = ["nostr", "", "Nostr", "zap"];

fn value_for(rng: &mut Rng, name: &str, hexes: &[String]) -> String {
    if matches!(name, "e" | "p") {
        rng.pick(hexes).clone()
    } else {
        rng.pick(&WORDS).to_string()
    }
}

fn gen_event(rng: &mut Rng, keys: &[String], hexes: &[String]) -> Event {
    let mut tags = Vec::new();
    for _ in 0..rng.below(5) {
        let name = rng.pick(&LETTERS).to_string();
        let mut elements = vec![name.clone()];
        for _ in 0..rng.below(3) {
            elements.push(value_for(rng, &name, hexes));
        }
        tags.push(Tag::new(elements).unwrap());
    }
    let mut event = Event {
        id: EventId::from_bytes([0; 32]),
        pubkey: PublicKey::from_hex(rng.pick(keys).as_str()).unwrap(),
        created_at: Timestamp::new(100 + rng.below(10) as u64).unwrap(),
        kind: Kind(*rng.pick(&KINDS)),
        tags,
        content: "c".into(),
        sig: Signature::from_bytes([0; 64]),
    };
    event.id = event.compute_id();
    event
}

fn gen_list<T>(rng: &mut Rng, mut item: impl FnMut(&mut Rng) -> T) -> Vec<T> {
    // Empty lists are generated on purpose: they must match nothing.
    (0..rng.below(4)).map(|_| item(rng)).collect()
}

fn gen_filter(rng: &mut Rng, keys: &[String], hexes: &[String], ids: &[String]) -> Value {
    let mut f = Map::new();
    if rng.chance(25) {
        f.insert("ids".into(), json!(gen_list(rng, |r| r.pick(ids).clone())));
    }
    if rng.chance(35) {
        f.insert(
            "authors".into(),
            json!(gen_list(rng, |r| r.pick(keys).clone())),
        );
    }
    if rng.chance(35) {
        f.insert("kinds".into(), json!(gen_list(rng, |r| *r.pick(&KINDS))));
    }
    for letter in ["e", "p", "t", "d", "T"] {
        if rng.chance(20) {
            f.insert(
                format!("#{letter}"),
                json!(gen_list(rng, |r| value_for(r, letter, hexes))),
            );
        }
    }
    if rng.chance(30) {
        f.insert("since".into(), json!(100 + rng.below(11)));
    }
    if rng.chance(30) {
        f.insert("until".into(), json!(99 + rng.below(11)));
    }
    if rng.chance(20) {
        f.insert("limit".into(), json!(rng.below(3)));
    }
    Value::Object(f)
}

/// NIP-01, read literally.
fn naive_matches(filter: &Value, event: &Value) -> bool {
    let contains = |list: &Value, v: &Value| list.as_array().unwrap().contains(v);
    for (key, cond) in filter.as_object().unwrap() {
        let ok = match key.as_str() {
            "ids" => contains(cond, &event["id"]),
            "authors" => contains(cond, &event["pubkey"]),
            "kinds" => contains(cond, &event["kind"]),
            "since" => event["created_at"].as_u64() >= cond.as_u64(),
            "until" => event["created_at"].as_u64() <= cond.as_u64(),
            "limit" | "search" => true,
            tag => {
                let letter = &tag[1..];
                event["tags"].as_array().unwrap().iter().any(|t| {
                    let t = t.as_array().unwrap();
                    t[0] == letter && t.len() >= 2 && contains(cond, &t[1])
                })
            }
        };
        if !ok {
            return false;
        }
    }
    true
}

#[test]
fn filters_agree_with_naive_matcher() {
    let seed = std::env::var("FILTER_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_f11e_u64);
    let mut rng = Rng(seed | 1);
    let keys = hex_pool(0xa0);
    let hexes = hex_pool(0x50);
    let events: Vec<Event> = (0..300)
        .map(|_| gen_event(&mut rng, &keys, &hexes))
        .collect();
    let ids: Vec<String> = events.iter().take(20).map(|e| e.id.to_hex()).collect();
    let event_values: Vec<Value> = events
        .iter()
        .map(|e| serde_json::from_str(&nostrwire_event::SignedFields::to_json(e)).unwrap())
        .collect();
    let mut matched = 0usize;
    let mut checked = 0usize;
    for _ in 0..400 {
        let filter_json = gen_filter(&mut rng, &keys, &hexes, &ids);
        let text = filter_json.to_string();
        let filter = Filter::from_json(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            Filter::from_json(filter.to_json().as_bytes()).unwrap(),
            filter,
            "{text}"
        );
        for (event, value) in events.iter().zip(&event_values) {
            let expected = naive_matches(&filter_json, value);
            assert_eq!(
                filter.matches(event),
                expected,
                "filter {text}\nevent {value}"
            );
            let json = nostrwire_event::SignedFields::to_json(event);
            let view = EventRef::parse(json.as_bytes()).unwrap();
            assert_eq!(filter.matches(&view), expected, "view: filter {text}");
            matched += expected as usize;
            checked += 1;
        }
    }
    // The generator must exercise both outcomes substantially.
    assert!(
        matched > checked / 50 && matched < checked / 2,
        "{matched} of {checked}"
    );
}

#[test]
fn filter_parsing_rules() {
    let bad = |s: &str| Filter::from_json(s.as_bytes()).unwrap_err().kind().as_str();
    assert_eq!(bad(r#"{"ids":["abcd"]}"#), "hex_length");
    assert_eq!(
        bad(&format!(r##"{{"#e":["{}"]}}"##, "A".repeat(64))),
        "invalid_hex"
    );
    assert_eq!(bad(r##"{"#xx":["a"]}"##), "unknown_filter_field");
    assert_eq!(bad(r#"{"foo":1}"#), "unknown_filter_field");
    assert_eq!(bad(r#"{"kinds":[1],"kinds":[2]}"#), "duplicate_key");
    assert_eq!(bad(r#"{"kinds":[65536]}"#), "kind_out_of_range");
    assert_eq!(bad(r#"{"limit":-1}"#), "negative_number");
    assert_eq!(bad(r#"{"since":1.5}"#), "invalid_number");
    let f =
        Filter::from_json(br##"{"limit":0,"search":"best nostr","#t":["b","a","a"]}"##).unwrap();
    assert_eq!(f.limit, Some(0));
    assert_eq!(f.search.as_deref(), Some("best nostr"));
    assert_eq!(f.tag_values(b't').unwrap(), ["a", "b"]);
    assert_eq!(Filter::from_json(b"{}").unwrap().limit, None);
    let empty = Filter::from_json(br#"{"kinds":[]}"#).unwrap();
    assert!(empty.is_empty_match());
    let e = Event::from_json(
        include_str!("../../../testdata/real-events.jsonl")
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert!(!empty.matches(&e));
    assert!(Filter::new().matches(&e));
    assert!(matches_any(&[empty, Filter::new()], &e));
}
