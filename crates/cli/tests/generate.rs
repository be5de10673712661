//! `nostrwire generate`: valid, signed, deterministic events that follow the
//! kind mix, one second apart and ending at `--newest`.

mod support;

fn generate(args: &[&str]) -> String {
    support::nostrwire(&[&["generate"], args].concat())
}

#[test]
fn events_are_valid_deterministic_and_end_at_newest() {
    let args = ["--count", "300", "--seed", "5", "--newest", "1700000000"];
    let text = generate(&args);
    assert_eq!(text, generate(&args), "same arguments, same bytes");
    let events: Vec<nostrwire_event::Event> = text
        .lines()
        .map(|l| nostrwire_event::Event::from_json(l).unwrap())
        .collect();
    assert_eq!(events.len(), 300);
    for (i, e) in events.iter().enumerate() {
        nostrwire_event::SignedFields::verify(e).unwrap();
        assert_eq!(e.created_at.as_u64(), 1_700_000_000 - 299 + i as u64);
    }
    let kind1 = events.iter().filter(|e| e.kind.as_u16() == 1).count();
    assert!(
        (90..=180).contains(&kind1),
        "kind 1 is ~46% of the mix, got {kind1}"
    );
    assert_ne!(
        text,
        generate(&["--count", "300", "--seed", "6", "--newest", "1700000000"])
    );
}
