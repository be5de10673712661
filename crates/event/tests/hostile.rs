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
