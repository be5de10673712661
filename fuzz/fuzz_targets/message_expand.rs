//! Performance cliffs in the message parsers: a small input is grown into a
//! large, repetitive message (up to 1 MiB) and parsed by every parser.
//! Parsing is linear in the input, so the target is run with a short
//! timeout, and a slow input is a finding:
//! `cargo +nightly fuzz run message_expand -- -timeout=1`
//! (an input takes milliseconds; the timeout is wall-clock, so on a busy
//! machine raise it, and replay a timeout input alone to confirm it).
//!
//! Input: a template byte, a 16-bit repeat count, then the unit to repeat;
//! each `$` in the unit becomes the repeat's index (distinct keys, values).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nostrwire_event::message::claimed_event_id;
use nostrwire_event::{parse_event_line, ClientMessage, Filter, Limits, RelayMessage};

const MAX: usize = 1 << 20;

const EVENT: &str = r#"{"id":"29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a","pubkey":"364ff74823ba9819d6b4da381b20bbce8e31e2abf5fbe298db62064aa8be7b73","created_at":1758667457,"kind":1,"sig":"3eac02f8b564cadc426dcc2097cfc930fb65117d2e30a4639e3b2eb703b3a9676835e6b914221a3230bbfd8bb33644bf75c49a4958433d54df27cbe75371216b","#;

/// (before the repeats, between them, after them); `@` stands for [`EVENT`].
const TEMPLATES: &[(&str, &str, &str)] = &[
    // Unknown members of an event.
    (r#"["EVENT",@"tags":[],"content":"","#, ",", "}]"),
    // Members of a filter.
    (r#"["REQ","s",{"#, ",", "}]"),
    // Filters.
    (r#"["REQ","s","#, ",", "]"),
    // Tags.
    (r#"["EVENT",@"content":"","tags":["#, ",", "]}]"),
    // A value nested in an unknown member.
    (r#"["EVENT",@"tags":[],"content":"","x":"#, "", "}]"),
    // Members of a COUNT reply.
    (r#"["COUNT","s",{"count":1,"#, ",", "}]"),
    // Values of a tag condition.
    (r##"["REQ","s",{"#t":["##, ",", "]}]"),
    // Content.
    (r#"["EVENT",@"tags":[],"content":""#, "", "\"}]"),
    // Anything.
    ("", "", ""),
];

fuzz_target!(|data: &[u8]| {
    let [template, a, b, unit @ ..] = data else {
        return;
    };
    let (before, between, after) = TEMPLATES[*template as usize % TEMPLATES.len()];
    let before = before.replace('@', EVENT);
    let count = u16::from_le_bytes([*a, *b]) as usize;
    let mut message = before.into_bytes();
    for i in 0..count {
        if message.len() + unit.len() + 16 > MAX {
            break;
        }
        if i > 0 {
            message.extend_from_slice(between.as_bytes());
        }
        for &byte in unit {
            if byte == b'$' {
                message.extend_from_slice(i.to_string().as_bytes());
            } else {
                message.push(byte);
            }
        }
    }
    message.extend_from_slice(after.as_bytes());

    let limits = Limits::DEFAULT;
    let _ = ClientMessage::parse_with(&message, &limits);
    let _ = RelayMessage::parse_with(&message, &limits);
    let _ = parse_event_line(&message, &limits);
    let _ = claimed_event_id(&message);
    if *template as usize % TEMPLATES.len() == 1 {
        // The filter alone.
        let _ = Filter::from_json(&message[11..message.len() - 1]);
    }
});
