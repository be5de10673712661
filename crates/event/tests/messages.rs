//! Client and relay messages: parsing, error kinds and round trips; and the
//! parsers' behaviour on truncated and garbage input.

use nostrwire_event::{
    message::write, parse_event_line, ClientMessage, ErrorKind, EventRef, Filter, Limits,
    RelayMessage, SignedFields,
};

const CORPUS: &str = include_str!("../../../testdata/real-events.jsonl");

fn first_event() -> &'static str {
    CORPUS.lines().next().unwrap()
}

fn client_err(s: &str) -> ErrorKind {
    ClientMessage::parse(s.as_bytes()).unwrap_err().kind()
}

fn round_trip_client(s: &str) -> String {
    let m = ClientMessage::parse(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"));
    let mut out = Vec::new();
    m.write_json(&mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn client_messages() {
    let ev = first_event();
    assert_eq!(
        round_trip_client(&format!("[\"EVENT\",{ev}]")),
        format!("[\"EVENT\",{ev}]")
    );
    assert_eq!(
        round_trip_client(&format!(" [ \"AUTH\" , {ev} ] ")),
        format!("[\"AUTH\",{ev}]")
    );
    assert_eq!(
        round_trip_client(r##"["REQ","sub 1",{"kinds":[1,0],"limit":10},{"#t":["x"]}]"##),
        r##"["REQ","sub 1",{"kinds":[0,1],"limit":10},{"#t":["x"]}]"##
    );
    assert_eq!(
        round_trip_client(r#"["COUNT","c",{}]"#),
        r#"["COUNT","c",{}]"#
    );
    assert_eq!(
        round_trip_client(r#"["CLOSE","sub"]"#),
        r#"["CLOSE","sub"]"#
    );
    assert_eq!(
        round_trip_client(r#"["NEG-OPEN","n",{"kinds":[1]},"6100000200"]"#),
        r#"["NEG-OPEN","n",{"kinds":[1]},"6100000200"]"#
    );
    assert_eq!(
        round_trip_client(r#"["NEG-MSG","n","61"]"#),
        r#"["NEG-MSG","n","61"]"#
    );
    assert_eq!(
        round_trip_client(r#"["NEG-CLOSE","n"]"#),
        r#"["NEG-CLOSE","n"]"#
    );
    match ClientMessage::parse(br#"["NEG-OPEN","n",{},"61ff00"]"#).unwrap() {
        ClientMessage::NegOpen { message, .. } => assert_eq!(message, vec![0x61, 0xff, 0x00]),
        other => panic!("{other:?}"),
    }
    match ClientMessage::parse(br#"["REQ","s",{"ids":[]}]"#).unwrap() {
        ClientMessage::Req {
            subscription_id,
            filters,
        } => {
            assert_eq!(subscription_id, "s");
            assert!(filters[0].is_empty_match());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn client_message_errors() {
    assert_eq!(client_err(r#"["HELLO","x"]"#), ErrorKind::UnknownMessage);
    assert_eq!(client_err(r#"{"kind":1}"#), ErrorKind::InvalidMessage);
    assert_eq!(client_err(r#"["REQ","s"]"#), ErrorKind::InvalidMessage);
    assert_eq!(
        client_err(r#"["REQ","",{}]"#),
        ErrorKind::InvalidSubscriptionId
    );
    let long = "x".repeat(65);
    assert_eq!(
        client_err(&format!(r#"["REQ","{long}",{{}}]"#)),
        ErrorKind::InvalidSubscriptionId
    );
    let ok64 = "é".repeat(64);
    assert!(ClientMessage::parse(format!(r#"["CLOSE","{ok64}"]"#).as_bytes()).is_ok());
    assert_eq!(
        client_err(r#"["CLOSE","a","b"]"#),
        ErrorKind::InvalidMessage
    );
    assert_eq!(client_err(r#"["CLOSE","a"] x"#), ErrorKind::TrailingData);
    assert_eq!(
        client_err(r#"["REQ","s",{"kinds":[1]},[]]"#),
        ErrorKind::WrongType
    );
    let many = vec!["{}"; 33].join(",");
    assert_eq!(
        client_err(&format!(r#"["REQ","s",{many}]"#)),
        ErrorKind::TooManyFilters
    );
    let small = Limits {
        max_message_bytes: 10,
        ..Limits::DEFAULT
    };
    assert_eq!(
        ClientMessage::parse_with(br#"["CLOSE","abcdefgh"]"#, &small)
            .unwrap_err()
            .kind(),
        ErrorKind::TooLarge
    );
    // NIP-77 messages carry even-length lowercase hex and nothing more.
    assert_eq!(client_err(r#"["NEG-MSG","n","6"]"#), ErrorKind::HexLength);
    assert_eq!(client_err(r#"["NEG-MSG","n","6G"]"#), ErrorKind::InvalidHex);
    assert_eq!(client_err(r#"["NEG-MSG","n","6A"]"#), ErrorKind::InvalidHex);
    assert_eq!(
        client_err(r#"["NEG-OPEN","n",{}]"#),
        ErrorKind::InvalidMessage
    );
    assert_eq!(
        client_err(r#"["NEG-OPEN","n",{},{},"61"]"#),
        ErrorKind::WrongType
    );
    assert_eq!(
        client_err(r#"["NEG-CLOSE","n","x"]"#),
        ErrorKind::InvalidMessage
    );
    // Errors inside the event keep their own kind.
    let bad = first_event().replace("\"kind\":0", "\"kind\":-1");
    assert_eq!(
        client_err(&format!("[\"EVENT\",{bad}]")),
        ErrorKind::NegativeNumber
    );
}

#[test]
fn filter_errors_name_their_key() {
    let hex = "a".repeat(64);
    for (filter, kind, key) in [
        (r#"{"ids":["ab"]}"#.to_string(), ErrorKind::HexLength, "ids"),
        (r##"{"#e":["ab"]}"##.into(), ErrorKind::HexLength, "#e"),
        (r##"{"#p":["zz"]}"##.into(), ErrorKind::HexLength, "#p"),
        (
            format!(r##"{{"#p":["{}"]}}"##, hex.to_uppercase()),
            ErrorKind::InvalidHex,
            "#p",
        ),
        (r##"{"#t":[1]}"##.into(), ErrorKind::WrongType, "#t"),
        (r##"{"#Z":"x"}"##.into(), ErrorKind::WrongType, "#Z"),
        (
            format!(r##"{{"#e":["{hex}"],"#e":[]}}"##),
            ErrorKind::DuplicateKey,
            "#e",
        ),
    ] {
        for message in [
            format!(r#"["REQ","s",{filter}]"#),
            format!(r#"["COUNT","s",{filter}]"#),
        ] {
            let err = ClientMessage::parse(message.as_bytes()).unwrap_err();
            assert_eq!((err.kind(), err.field()), (kind, Some(key)), "{message}");
            assert!(err.to_string().contains(&format!(" in `{key}` ")), "{err}");
        }
        let err = Filter::from_json(filter.as_bytes()).unwrap_err();
        assert_eq!((err.kind(), err.field()), (kind, Some(key)), "{filter}");
    }
    for letter in ('a'..='z').chain('A'..='Z') {
        let key = format!("#{letter}");
        let err = Filter::from_json(format!(r#"{{"{key}":[1]}}"#).as_bytes()).unwrap_err();
        assert_eq!(err.field(), Some(key.as_str()));
    }
    // The whole filter still names `filter` when no key is at fault.
    let err = ClientMessage::parse(br#"["REQ","s",{"x":1}]"#).unwrap_err();
    assert_eq!(err.field(), Some("filter"));
}

#[test]
fn relay_messages_round_trip() {
    let ev = EventRef::parse(first_event().as_bytes()).unwrap();
    let filter = Filter::new().with_tag(b'p', vec![ev.pubkey_hex()]);
    let mut cases: Vec<Vec<u8>> = Vec::new();
    let mut push = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut out = Vec::new();
        f(&mut out);
        cases.push(out);
    };
    push(&|o| write::relay_event(o, "sub", &ev));
    push(&|o| write::ok(o, ev.id(), true, ""));
    push(&|o| write::ok(o, ev.id(), false, "invalid: bad \"sig\""));
    push(&|o| write::eose(o, "sub"));
    push(&|o| write::closed(o, "sub", "error: shutting down"));
    push(&|o| write::notice(o, "hello\nworld"));
    push(&|o| write::auth_challenge(o, "challenge"));
    push(&|o| write::count_result(o, "c", 42));
    push(&|o| write::req(o, "s", std::slice::from_ref(&filter)));
    push(&|o| write::neg_msg(o, "n", &[0x61, 0x00, 0xab]));
    push(&|o| write::neg_err(o, "n", "blocked: too many records"));
    push(&|o| write::neg_open(o, "n", &filter, &[0x61]));
    push(&|o| write::neg_close(o, "n"));
    for bytes in cases {
        let text = String::from_utf8(bytes.clone()).unwrap();
        let parsed_relay = RelayMessage::parse(&bytes);
        let parsed_client = ClientMessage::parse(&bytes);
        let mut out = Vec::new();
        match (parsed_relay, parsed_client) {
            (Ok(m), _) => m.write_json(&mut out),
            (_, Ok(m)) => m.write_json(&mut out),
            (Err(a), Err(b)) => panic!("{text}: {a} / {b}"),
        }
        assert_eq!(String::from_utf8(out).unwrap(), text);
    }
    match RelayMessage::parse(br#"["COUNT","c",{"count":5,"approximate":false}]"#).unwrap() {
        RelayMessage::Count { count, .. } => assert_eq!(count, 5),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        RelayMessage::parse(br#"["OK","abc",true,""]"#)
            .unwrap_err()
            .kind(),
        ErrorKind::HexLength
    );
}

#[test]
fn event_lines_in_every_form() {
    let ev = first_event();
    let limits = Limits::DEFAULT;
    for line in [
        ev.to_string(),
        format!("[\"EVENT\",{ev}]"),
        format!("[\"EVENT\",\"s\",{ev}]"),
    ] {
        let parsed = parse_event_line(line.as_bytes(), &limits).unwrap();
        parsed.verify().unwrap();
    }
    assert_eq!(
        parse_event_line(format!("[\"REQ\",{ev}]").as_bytes(), &limits)
            .unwrap_err()
            .kind(),
        ErrorKind::UnknownMessage
    );
}

#[test]
fn truncations_and_garbage_never_panic() {
    // Every prefix of a sample of small events (quadratic, so sizes are capped).
    for line in CORPUS.lines().step_by(37).filter(|l| l.len() < 3000) {
        let message = format!("[\"EVENT\",\"s\",{line}]");
        for cut in 0..message.len() {
            let bytes = &message.as_bytes()[..cut];
            assert!(RelayMessage::parse(bytes).is_err());
            assert!(ClientMessage::parse(bytes).is_err());
            if cut <= line.len() {
                assert!(EventRef::parse(&line.as_bytes()[..cut]).is_err() || cut == line.len());
            }
        }
    }
    // Deterministic garbage made of JSON-ish bytes.
    let alphabet = b"[]{}\",:0123456789-.eE truefalsnul\\u\x00\xff\xc3\xa9EVENTREQ";
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..512usize {
        for _ in 0..8 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            let _ = EventRef::parse(&bytes);
            let _ = ClientMessage::parse(&bytes);
            let _ = RelayMessage::parse(&bytes);
            let _ = Filter::from_json(&bytes);
        }
    }
}

trait PubkeyHex {
    fn pubkey_hex(&self) -> String;
}

impl PubkeyHex for EventRef<'_> {
    fn pubkey_hex(&self) -> String {
        nostrwire_event::PreimageFields::pubkey(self).to_hex()
    }
}
