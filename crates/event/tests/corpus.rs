//! Every event of the bundled real-world corpus parses, verifies and
//! re-serializes byte for byte.

use nostrwire_event::{Event, EventRef, PreimageFields, SignedFields};

const CORPUS: &str = include_str!("../../../testdata/real-events.jsonl");

#[test]
fn every_corpus_event_verifies_and_round_trips() {
    let mut count = 0;
    for (n, line) in CORPUS.lines().enumerate() {
        let event =
            EventRef::parse(line.as_bytes()).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        event
            .verify()
            .unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        // The corpus is stored in canonical form with NIP-01 key order.
        assert_eq!(event.to_json(), line, "line {}", n + 1);
        let owned = event.to_event();
        assert_eq!(owned.compute_id(), *event.id(), "line {}", n + 1);
        assert_eq!(owned.to_json(), line, "line {}", n + 1);
        assert_eq!(Event::from_json(owned.to_json()).unwrap(), owned);
        count += 1;
    }
    assert_eq!(count, 1001);
}

#[test]
fn slow_path_equals_fast_path() {
    // Pretty-printing the tags defeats the raw fast path; the id must not change.
    for line in CORPUS.lines().take(300) {
        let event = EventRef::parse(line.as_bytes()).unwrap();
        let spaced = line
            .replace("\"tags\":[", "\"tags\": [ ")
            .replace("],[", "] , [");
        let reparsed = EventRef::parse(spaced.as_bytes()).unwrap();
        assert_eq!(reparsed.compute_id(), *event.id());
        assert_eq!(reparsed.to_json(), line);
    }
}
