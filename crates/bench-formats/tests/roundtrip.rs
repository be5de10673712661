//! Every format round-trips every corpus event to the same id, through every
//! decode path, and validates (id and signature).

use nostrwire_bench_formats::{check, corpus, formats};

fn corpus() -> Vec<nostrwire_event::Event> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/real-events.jsonl"
    );
    corpus::parse(&std::fs::read(path).expect("bundled corpus")).expect("valid corpus")
}

#[test]
fn every_format_round_trips_every_event() {
    let events = corpus();
    assert_eq!(events.len(), 1001);
    for f in formats::all() {
        let records = check::round_trip(f.as_ref(), &events).unwrap();
        // Signatures are slow unoptimized: validate a stride of the corpus.
        let sample: Vec<Vec<u8>> = records.into_iter().step_by(25).collect();
        check::validate_all(f.as_ref(), &sample).unwrap();
    }
}

#[test]
fn a_changed_record_fails_the_check() {
    // The check must be able to fail: a flipped content byte changes the id.
    let events = corpus();
    let mut e = events[0].clone();
    e.content.push('x');
    for f in formats::all() {
        let mut bytes = Vec::new();
        f.encode(&e, &mut bytes);
        let doc = f.decode(&bytes).unwrap();
        assert_ne!(
            nostrwire_event::PreimageFields::compute_id(&doc),
            events[0].id,
            "{}",
            f.name()
        );
        assert!(f.validate(&bytes).is_err(), "{}", f.name());
    }
}
