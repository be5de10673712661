//! Any bytes: client and relay message parsers (and the filters inside them)
//! never panic; accepted messages re-serialize to JSON that parses to the
//! same message; the id of an accepted EVENT is the one `claimed_event_id`
//! finds.
//!
//! Parsing is linear in the input, so run it with large inputs and a short
//! timeout too, to make any performance cliff a finding:
//! `cargo +nightly fuzz run message_parse -- -max_len=1048576 -timeout=1`
//! (and `message_expand`, which grows small inputs into 1 MiB messages).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nostrwire_event::message::claimed_event_id;
use nostrwire_event::{parse_event_line, ClientMessage, Limits, RelayMessage, SignedFields};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::DEFAULT;
    let claimed = claimed_event_id(data);
    if let Ok(message) = ClientMessage::parse_with(data, &limits) {
        if let ClientMessage::Event(e) | ClientMessage::Auth(e) = &message {
            assert_eq!(claimed.as_ref(), Some(e.id()));
        }
        let mut out = Vec::new();
        message.write_json(&mut out);
        let again = ClientMessage::parse_with(&out, &limits).expect("own output parses");
        let mut out2 = Vec::new();
        again.write_json(&mut out2);
        assert_eq!(out, out2);
    }
    if let Ok(message) = RelayMessage::parse_with(data, &limits) {
        let mut out = Vec::new();
        message.write_json(&mut out);
        let again = RelayMessage::parse_with(&out, &limits).expect("own output parses");
        let mut out2 = Vec::new();
        again.write_json(&mut out2);
        assert_eq!(out, out2);
    }
    let _ = parse_event_line(data, &limits);
});
