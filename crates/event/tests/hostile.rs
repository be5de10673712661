//! Hostile messages up to 1 MiB (`support/hostile.rs`): each is parsed or
//! refused with the expected kind. Their cost is printed by
//! `cargo run --release -p nostrwire-wire --example hostile_parse`; parsing
//! must stay linear in the input size.

#[path = "support/hostile.rs"]
mod hostile;

use hostile::{shapes, Side};
use nostrwire_event::{ClientMessage, RelayMessage};

#[test]
fn hostile_messages_are_parsed_or_refused() {
    for shape in shapes() {
        let got = match shape.side {
            Side::Client => ClientMessage::parse(&shape.input).map(|_| ()),
            Side::Relay => RelayMessage::parse(&shape.input).map(|_| ()),
        };
        assert_eq!(
            got.map_err(|e| e.kind()),
            shape.expect,
            "{} ({} bytes)",
            shape.name,
            shape.input.len()
        );
    }
}

#[test]
fn the_claimed_id_of_a_refused_event_is_found_wherever_it_is() {
    use nostrwire_event::message::claimed_event_id;
    let id = "29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a";
    // Every hostile EVENT and AUTH shape names the same id first.
    for shape in shapes() {
        let text = &shape.input[..shape.input.len().min(12)];
        if text.starts_with(br#"["EVENT",{"#) || text.starts_with(br#"["AUTH",{"#) {
            assert_eq!(
                claimed_event_id(&shape.input)
                    .map(|i| i.to_hex())
                    .as_deref(),
                Some(id),
                "{}",
                shape.name
            );
        }
    }
    // After 1 MiB of tags that break every limit, under an escaped key.
    let tags = vec![r#"["t","x"]"#; 100_000].join(",");
    let message = format!(r#"[ "EVENT" , {{"kind":1,"tags":[{tags}],"\u0069d":"{id}"}}]"#);
    let found = claimed_event_id(message.as_bytes()).unwrap();
    assert_eq!(found.to_hex(), id);
    for (input, why) in [
        (format!(r#"["REQ","{id}",{{"id":"{id}"}}]"#), "not an EVENT"),
        (
            format!(r#"["EVENT",{{"kind":1,"tags":[[}}],"id":"{id}"}}]"#),
            "broken JSON before the id",
        ),
        (
            format!(r#"["EVENT",{{"id":"{}"}}]"#, id.to_uppercase()),
            "not lowercase hex",
        ),
        (format!(r#"["EVENT",{{"id":"{id}0"}}]"#), "too long"),
        (r#"["EVENT",{"kind":1}]"#.to_string(), "no id"),
        (
            format!(r#"["EVENT","s",{{"id":"{id}"}}]"#),
            "a relay message",
        ),
    ] {
        assert_eq!(claimed_event_id(input.as_bytes()), None, "{why}");
    }
}
