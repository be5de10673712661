//! Hostile client and relay messages of up to 1 MiB, each built to reach a
//! path that could cost more than linear time: duplicate-key checks over
//! many (escaped) unknown keys, long filter lists, common prefixes, deep
//! nesting, escapes everywhere.
//!
//! Shared by `crates/event/tests/hostile.rs` (what each one parses to) and
//! `crates/wire/examples/hostile_parse.rs` (what each one costs).

#![allow(dead_code)]

use nostrwire_event::ErrorKind;

/// The size each shape grows to (the default message limit is 1 MiB + 4 KiB).
pub const SIZE: usize = 1 << 20;

/// Which parser a shape is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `ClientMessage::parse`.
    Client,
    /// `RelayMessage::parse`.
    Relay,
}

/// One hostile message and what parsing it must give.
pub struct Shape {
    /// Short name, printed by the example.
    pub name: &'static str,
    /// The parser it is meant for.
    pub side: Side,
    /// The message.
    pub input: Vec<u8>,
    /// `Ok(())` if it parses, else the kind it is refused with.
    pub expect: Result<(), ErrorKind>,
}

const ID: &str = "29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a";
const PUBKEY: &str = "364ff74823ba9819d6b4da381b20bbce8e31e2abf5fbe298db62064aa8be7b73";
const SIG: &str = "3eac02f8b564cadc426dcc2097cfc930fb65117d2e30a4639e3b2eb703b3a9676835e6b914221a3230bbfd8bb33644bf75c49a4958433d54df27cbe75371216b";

/// `prefix`, then `unit(i)` for i = 0, 1, ... separated by commas while the
/// whole stays within `size`, then `suffix`.
fn fill(prefix: &str, size: usize, mut unit: impl FnMut(usize) -> String, suffix: &str) -> Vec<u8> {
    let mut out = prefix.as_bytes().to_vec();
    let mut i = 0;
    loop {
        let next = unit(i);
        if out.len() + next.len() + 1 + suffix.len() > size {
            break;
        }
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(next.as_bytes());
        i += 1;
    }
    out.extend_from_slice(suffix.as_bytes());
    out
}

/// The start of an event object with every field but `tags` and `sig`.
fn event_head(kind: u16) -> String {
    format!(
        r#"{{"id":"{ID}","pubkey":"{PUBKEY}","created_at":1700000000,"kind":{kind},"content":"hi","#
    )
}

/// An EVENT message whose event ends in members made by `unit`.
fn event_with_members(size: usize, unit: impl FnMut(usize) -> String, suffix: &str) -> Vec<u8> {
    let head = format!(r#"["EVENT",{}"tags":[],"sig":"{SIG}","#, event_head(1));
    fill(&head, size, unit, &format!("{suffix}}}]"))
}

/// An EVENT message whose tags are made by `unit`.
fn event_with_tags(size: usize, unit: impl FnMut(usize) -> String) -> Vec<u8> {
    let head = format!(r#"["EVENT",{}"sig":"{SIG}","tags":["#, event_head(1));
    fill(&head, size, unit, "]}]")
}

/// A REQ with one filter whose members are made by `unit`.
fn req_with_members(size: usize, unit: impl FnMut(usize) -> String) -> Vec<u8> {
    fill(r#"["REQ","s",{"#, size, unit, "}]")
}

/// The `#x` letters that take any string (not `e` and `p`), in turn.
fn letter(i: usize) -> char {
    const LETTERS: &[u8] = b"abcdfghijklmnoqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    LETTERS[i % LETTERS.len()] as char
}

/// A list of `n` values made by `value`, as one `#x` member.
fn tag_list(letter: char, n: usize, value: impl Fn(usize) -> String) -> String {
    let values: Vec<String> = (0..n).map(value).collect();
    format!(r##""#{letter}":[{}]"##, values.join(","))
}

/// Every shape, at [`SIZE`].
pub fn shapes() -> Vec<Shape> {
    shapes_of(SIZE)
}

/// Every shape, each grown to about `size` bytes.
pub fn shapes_of(size: usize) -> Vec<Shape> {
    let escaped_key = |i: usize| format!(r#""\u0078{i:06}":0"#);
    let plain_key = |i: usize| format!(r#""k{i:06}":0"#);
    let mut shapes = vec![
        Shape {
            name: "event: 58k escaped unknown keys",
            side: Side::Client,
            input: event_with_members(size, escaped_key, ""),
            expect: Ok(()),
        },
        Shape {
            name: "event: escaped unknown keys, last one repeated",
            side: Side::Client,
            // `"x000000"` is the first key, unescaped.
            input: event_with_members(size, escaped_key, r#","x000000":1"#),
            expect: Err(ErrorKind::DuplicateKey),
        },
        Shape {
            name: "event: 80k plain unknown keys",
            side: Side::Client,
            input: event_with_members(size, plain_key, ""),
            expect: Ok(()),
        },
        Shape {
            name: "event: unknown object of plain keys",
            side: Side::Client,
            input: event_with_members(
                size,
                |i| {
                    if i == 0 {
                        r#""x":{"k000000":0"#.to_string()
                    } else {
                        plain_key(i)
                    }
                },
                "}",
            ),
            expect: Ok(()),
        },
        Shape {
            name: "event: unknown object of escaped keys",
            side: Side::Client,
            input: event_with_members(
                size,
                |i| {
                    if i == 0 {
                        r#""x":{"\u0078000000":0"#.to_string()
                    } else {
                        escaped_key(i)
                    }
                },
                "}",
            ),
            expect: Ok(()),
        },
        Shape {
            name: "event: unknown arrays nested 30 deep",
            side: Side::Client,
            input: event_with_members(
                size,
                |i| {
                    let nested = format!("{}1{}", "[".repeat(30), "]".repeat(30));
                    if i == 0 {
                        format!(r#""x":[{nested}"#)
                    } else {
                        nested
                    }
                },
                "]",
            ),
            expect: Ok(()),
        },
        Shape {
            name: "event: unknown array nested 500k deep",
            side: Side::Client,
            input: {
                let head = format!(r#"["EVENT",{}"tags":[],"sig":"{SIG}","x":"#, event_head(1));
                let mut m = head.into_bytes();
                m.resize(size - 2, b'[');
                m.extend_from_slice(b"}]");
                m
            },
            expect: Err(ErrorKind::TooDeep),
        },
        Shape {
            name: "event: 10k e tags",
            side: Side::Client,
            input: event_with_tags(size, |i| {
                format!(r#"["e","{i:064x}","wss://relay.example.com/","reply"]"#)
            }),
            expect: Ok(()),
        },
        Shape {
            name: "event: 1,000-element tags",
            side: Side::Client,
            input: event_with_tags(size, |_| {
                let elements: Vec<&str> = ["\"ab\""; 1_000].to_vec();
                format!("[{}]", elements.join(","))
            }),
            expect: Ok(()),
        },
        Shape {
            name: "event: escaped tag values",
            side: Side::Client,
            input: event_with_tags(size, |i| {
                format!(r#"["\u0074","\u0041\n\"{i}","\u00e9\t\\\/{i}","\u0070\u0061\u0064"]"#)
            }),
            expect: Ok(()),
        },
        Shape {
            name: "event: content of escapes",
            side: Side::Client,
            input: {
                let head = format!(
                    r#"["EVENT",{{"id":"{ID}","pubkey":"{PUBKEY}","created_at":1,"kind":1,"tags":[],"sig":"{SIG}","content":""#
                );
                let mut m = head.into_bytes();
                while m.len() + 12 + 4 < size {
                    m.extend_from_slice(br#"\u00e9\n\"\\"#);
                }
                m.extend_from_slice(b"\"}]");
                m
            },
            expect: Ok(()),
        },
        Shape {
            name: "REQ: 116k short #x values",
            side: Side::Client,
            input: req_with_members(size, |i| {
                tag_list(letter(i), 5_000, |j| format!("\"v{j:05}\""))
            }),
            expect: Ok(()),
        },
        Shape {
            name: "REQ: #x values, 190-byte common prefix",
            side: Side::Client,
            input: req_with_members(size, |i| {
                let prefix = "p".repeat(190);
                tag_list(letter(i), 500, |j| format!("\"{prefix}{j:05}\""))
            }),
            expect: Ok(()),
        },
        Shape {
            name: "REQ: escaped #x values",
            side: Side::Client,
            input: req_with_members(size, |i| {
                tag_list(letter(i), 5_000, |j| format!(r#""\u0076{j:05}""#))
            }),
            expect: Ok(()),
        },
        Shape {
            name: "REQ: 32 filters of repeated ids",
            side: Side::Client,
            input: fill(
                r#"["REQ","s""#,
                size,
                |i| {
                    let ids = vec![format!("\"{ID}\""); 500].join(",");
                    format!(
                        r#"{}{{"ids":[{ids}],"authors":["{PUBKEY}"]}}"#,
                        if i == 0 { "," } else { "" }
                    )
                },
                "]",
            ),
            expect: Ok(()),
        },
        Shape {
            name: "REQ: 300k kinds in one list",
            side: Side::Client,
            input: fill(r#"["REQ","s",{"kinds":["#, size, |_| "1".into(), "]}]"),
            expect: Err(ErrorKind::TooManyFilterValues),
        },
        Shape {
            name: "NEG-OPEN: 1 MiB hex message",
            side: Side::Client,
            input: {
                let mut m = br#"["NEG-OPEN","s",{"kinds":[1]},""#.to_vec();
                while m.len() + 2 + 3 < size {
                    m.extend_from_slice(b"61");
                }
                m.extend_from_slice(b"\"]");
                m
            },
            expect: Ok(()),
        },
        Shape {
            name: "CLOSE: 1 MiB subscription id",
            side: Side::Client,
            input: {
                let mut m = br#"["CLOSE",""#.to_vec();
                m.resize(size - 2, b'a');
                m.extend_from_slice(b"\"]");
                m
            },
            expect: Err(ErrorKind::TooLarge),
        },
        Shape {
            name: "COUNT reply: plain unknown keys",
            side: Side::Relay,
            input: fill(r#"["COUNT","s",{"count":1,"#, size, plain_key, "}]"),
            expect: Ok(()),
        },
        Shape {
            name: "relay EVENT: escaped unknown keys",
            side: Side::Relay,
            input: {
                let head = format!(r#"["EVENT","s",{}"tags":[],"sig":"{SIG}","#, event_head(1));
                fill(&head, size, escaped_key, "}]")
            },
            expect: Ok(()),
        },
    ];
    // AUTH takes the event parser's path too.
    let mut auth = event_with_members(size, escaped_key, "");
    auth.splice(2..7, b"AUTH".iter().copied());
    shapes.push(Shape {
        name: "AUTH: escaped unknown keys",
        side: Side::Client,
        input: auth,
        expect: Ok(()),
    });
    shapes
}
