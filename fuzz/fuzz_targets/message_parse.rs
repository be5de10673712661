//! Any bytes: client and relay message parsers (and the filters inside them)
//! never panic; accepted messages re-serialize to JSON that parses to the
//! same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nostrwire_event::{parse_event_line, ClientMessage, Limits, RelayMessage};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::DEFAULT;
    if let Ok(message) = ClientMessage::parse_with(data, &limits) {
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
