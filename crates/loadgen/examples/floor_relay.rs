//! The host's floors for a relay benchmark: a WebSocket endpoint that answers
//! every `EVENT` with `OK` and, with `--req`, every `REQ` from a fixed set of
//! events, and does nothing else a relay must do.
//!
//! It is not a relay. It stores nothing, checks no filter beyond one tag
//! lookup and keeps no limits. It measures how fast a load tester can go on
//! this host when the endpoint's only work is the socket and the parse:
//!
//! - publishing (`nostrwire load --scenario publish`): the socket and, with
//!   `--verify`, the NIP-01 parse, id hash and BIP-340 check. Its rate is an
//!   upper bound for any relay that verifies what it accepts;
//! - queries (`nostr-bench req`, `--req FILE`): the socket, the parse of each
//!   `REQ` and the write of answers rendered in advance. Its rate is what the
//!   load tool itself can do on these cores, the ceiling a relay's REQ rate is
//!   read against, and its CPU per `REQ` is the socket + parse floor of a
//!   relay's.
//!
//! Both are measured with the same load tester on the same cores as the
//! relays (see `docs/bench-methodology.md` and `scripts/scale.sh --floor`).
//!
//! ```text
//! cargo run --release -p nostrwire-loadgen --example floor_relay -- [--verify] [--req FILE] [--listen 127.0.0.1:7898] [--threads 2]
//! ```
//!
//! Modes:
//! - default: find the id in the frame and answer `["OK",<id>,true,""]`;
//! - `--verify`: parse the message (`ClientMessage::parse`), check the id and
//!   the signature, and answer `OK true` or `OK false` with `invalid:`;
//! - `--req FILE`: FILE holds signed events, one JSON event a line (the
//!   relays' seed, as `nostr_bench_seed` writes it). At start they are
//!   grouped by the first value of each of their `t` tags, newest first
//!   (ties by id), each rendered once as its canonical JSON. Every message is
//!   parsed with `ClientMessage::parse`. A `REQ` whose one filter is
//!   `{"#t":[v]}` with at most a `limit` (nostr-bench's shape) is answered
//!   with `["EVENT",<sub>,<event>]` for the first `limit` events of `v`
//!   (default 500 and at most 5,000, the relay's defaults), then
//!   `["EOSE",<sub>]`: the bytes the relay sends for it. Any other `REQ` gets
//!   `EOSE` alone. `CLOSE` is read and ignored; an `EVENT` gets `OK true`
//!   (checked first with `--verify`). Signatures in FILE are not checked.
//!
//! Each connection is one task on a Tokio runtime of `--threads` workers
//! (default: the available cores). Replies for every message of one read go
//! out in one write, with `TCP_NODELAY` set, and each read is acknowledged at
//! once (`TCP_QUICKACK`), as the relay does. The process stops by itself
//! after `--seconds` (default 600).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nostrwire_event::message::write;
use nostrwire_event::{
    parse_event_line, ClientMessage, Filter, Limits, PreimageFields, SignedFields, Sink,
};
use nostrwire_websocket::{handshake, Message, MessageReader, MessageWriter, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest message accepted, as the relay's default.
const MAX_MESSAGE: usize = 1 << 20;
/// Events for a `REQ` without `limit`, as the relay's `default_limit`.
const DEFAULT_LIMIT: u64 = 500;
/// Most events for one `REQ`, as the relay's `max_limit`.
const MAX_LIMIT: u64 = 5_000;

struct Options {
    listen: String,
    verify: bool,
    req: Option<String>,
    threads: usize,
    seconds: u64,
}

fn options() -> Options {
    let mut options = Options {
        listen: "127.0.0.1:7898".into(),
        verify: false,
        req: None,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        seconds: 600,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| fail(&format!("{name} needs a value")))
        };
        match arg.as_str() {
            "--verify" => options.verify = true,
            "--req" => options.req = Some(value("--req")),
            "--listen" => options.listen = value("--listen"),
            "--threads" => {
                options.threads = value("--threads")
                    .parse()
                    .unwrap_or_else(|_| fail("--threads takes a number"))
            }
            "--seconds" => {
                options.seconds = value("--seconds")
                    .parse()
                    .unwrap_or_else(|_| fail("--seconds takes a number"))
            }
            other => fail(&format!("unknown argument {other}")),
        }
    }
    if !options.listen.starts_with("127.0.0.1:") {
        fail("--listen must be a 127.0.0.1 address");
    }
    options
}

fn fail(message: &str) -> ! {
    eprintln!("floor_relay: {message}");
    std::process::exit(2)
}

/// What the endpoint answers.
struct Mode {
    /// Parse `EVENT`s and check their id and signature.
    verify: bool,
    /// The events `REQ`s are answered from (`--req`).
    seed: Option<Seed>,
}

/// The events of `--req`, each rendered once, listed by `t` value.
struct Seed {
    /// Canonical JSON of each event, newest first.
    events: Vec<Box<[u8]>>,
    /// For each `t` value, the indexes in `events` of the events carrying it.
    by_tag: HashMap<String, Vec<usize>>,
}

impl Seed {
    /// Reads JSON lines of events (bare objects or `["EVENT",…]`); blank
    /// lines are skipped.
    fn parse(text: &[u8]) -> Result<Seed, String> {
        let limits = Limits::DEFAULT;
        let mut events = Vec::new();
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event =
                parse_event_line(line, &limits).map_err(|e| format!("line {}: {e}", n + 1))?;
            let mut tags = Vec::new();
            event.any_tag(&mut |name, value| {
                if let (Some(value), "t") = (value, name) {
                    tags.push(value.to_owned());
                }
                false
            });
            let mut json = Vec::with_capacity(event.json_size_hint());
            event.write_json(&mut json);
            events.push((event.created_at(), *event.id(), tags, json));
        }
        // The relay's order: newest first, ties by lowest id.
        events.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut by_tag: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, (_, _, tags, _)) in events.iter().enumerate() {
            for tag in tags {
                let list = by_tag.entry(tag.clone()).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
        let events = events
            .into_iter()
            .map(|(_, _, _, json)| json.into_boxed_slice())
            .collect();
        Ok(Seed { events, by_tag })
    }

    /// The events for `filters`: those of the one `t` value when the `REQ`
    /// has nostr-bench's shape, none otherwise.
    fn answer(&self, filters: &[Filter]) -> impl Iterator<Item = &[u8]> {
        let found = match filters {
            [Filter {
                ids: None,
                authors: None,
                kinds: None,
                tags,
                since: None,
                until: None,
                limit,
                search: None,
            }] => match tags.as_slice() {
                [condition] if condition.letter == b't' && condition.values.len() == 1 => self
                    .by_tag
                    .get(&condition.values[0])
                    .map(|list| (list, limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT))),
                _ => None,
            },
            _ => None,
        };
        let (list, limit): (&[usize], u64) = match found {
            Some((list, limit)) => (list, limit),
            None => (&[], 0),
        };
        let take = usize::try_from(limit).unwrap_or(usize::MAX);
        list.iter().take(take).map(|&i| &*self.events[i])
    }
}

fn main() {
    let options = options();
    let seed = options.req.as_ref().map(|path| {
        let text = std::fs::read(path).unwrap_or_else(|e| fail(&format!("--req {path}: {e}")));
        Seed::parse(&text).unwrap_or_else(|e| fail(&format!("--req {path}: {e}")))
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads.max(1))
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mode = Arc::new(Mode {
        verify: options.verify,
        seed,
    });
    runtime.block_on(async {
        let listener = TcpListener::bind(&options.listen)
            .await
            .unwrap_or_else(|e| fail(&format!("bind {}: {e}", options.listen)));
        eprintln!(
            "floor_relay on ws://{} ({}{}), {} threads, stops after {} s",
            options.listen,
            if options.verify {
                "parse + verify"
            } else {
                "ack only"
            },
            match &mode.seed {
                Some(seed) => format!(
                    ", REQs from {} events under {} t values",
                    seed.events.len(),
                    seed.by_tag.len()
                ),
                None => String::new(),
            },
            options.threads,
            options.seconds
        );
        let accept = async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let mode = Arc::clone(&mode);
                tokio::spawn(async move {
                    let _ = serve(socket, &mode).await;
                });
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(options.seconds), accept).await;
    });
}

/// One connection: the HTTP upgrade, then messages until the peer closes.
async fn serve(mut socket: TcpStream, mode: &Mode) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let mut request = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        request.extend_from_slice(&chunk[..n]);
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if request.len() > 16 * 1024 {
            return Ok(());
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
    let Some(key) = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("sec-websocket-key")
            .then(|| value.trim().to_owned())
    }) else {
        socket
            .write_all(b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    let reply = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n\r\n",
        handshake::accept_key(key.as_bytes())
    );
    socket.write_all(reply.as_bytes()).await?;

    let mut reader = MessageReader::new(Role::Server, MAX_MESSAGE, None);
    reader.push(&request[head_end..]);
    let mut writer = MessageWriter::new(Role::Server, None);
    let mut out = Vec::with_capacity(4096);
    let mut scratch = Vec::with_capacity(1024);
    loop {
        while let Some(message) = reader.next_message().map_err(std::io::Error::other)? {
            match message {
                Message::Text(text) => {
                    answer(text, mode, &mut scratch, &mut |reply| {
                        writer.text(&mut out, reply, None)
                    });
                }
                Message::Ping(payload) => {
                    let payload = payload.to_vec();
                    writer.control(&mut out, 0xA, &payload, None);
                }
                Message::Close(_) => {
                    writer.close(&mut out, 1000, None);
                    socket.write_all(&out).await?;
                    return Ok(());
                }
                Message::Binary(_) | Message::Pong(_) => {}
            }
        }
        if !out.is_empty() {
            socket.write_all(&out).await?;
            out.clear();
        }
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        quick_ack(&socket);
        reader.push(&chunk[..n]);
    }
}

/// Acknowledges what was just read at once, as the relay does: a client
/// without `TCP_NODELAY` (nostr-bench) sends `CLOSE` and its next `REQ` as
/// two small writes and holds the second until the first is acknowledged,
/// which Linux otherwise delays by up to 40 ms.
#[cfg(target_os = "linux")]
fn quick_ack(socket: &TcpStream) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is the connection's open socket, and the
    // option's value is a c_int of the size given.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            std::ptr::from_ref(&on).cast(),
            std::mem::size_of_val(&on) as libc::socklen_t,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn quick_ack(_socket: &TcpStream) {}

/// Hands each reply to one client message to `send`, in order; `scratch`
/// holds the reply being written.
fn answer(text: &[u8], mode: &Mode, scratch: &mut Vec<u8>, send: &mut dyn FnMut(&[u8])) {
    scratch.clear();
    if !mode.verify && mode.seed.is_none() {
        if ack_only(text, scratch) {
            send(scratch);
        }
        return;
    }
    match ClientMessage::parse(text) {
        Ok(ClientMessage::Event(event)) => {
            let (accepted, reason) = match mode.verify.then(|| event.verify()) {
                Some(Err(_)) => (false, "invalid: bad id or signature"),
                _ => (true, ""),
            };
            write::ok(scratch, event.id(), accepted, reason);
            send(scratch);
        }
        Ok(ClientMessage::Req {
            subscription_id,
            filters,
        }) => {
            let Some(seed) = &mode.seed else {
                return;
            };
            for event in seed.answer(&filters) {
                scratch.clear();
                write::relay_event_json(scratch, &subscription_id, |out| out.put(event));
                send(scratch);
            }
            scratch.clear();
            write::eose(scratch, &subscription_id);
            send(scratch);
        }
        _ => {}
    }
}

/// Writes `["OK",<id>,true,""]` for an `EVENT` message into `ok`; false for
/// anything else. The first `"id":"` in the frame is the event's (the load
/// tester writes the id first, as canonical JSON does).
fn ack_only(text: &[u8], ok: &mut Vec<u8>) -> bool {
    const NEEDLE: &[u8] = br#""id":""#;
    let Some(at) = text.windows(NEEDLE.len()).position(|w| w == NEEDLE) else {
        return false;
    };
    let start = at + NEEDLE.len();
    let Some(id) = text.get(start..start + 64) else {
        return false;
    };
    ok.put(br#"["OK",""#);
    ok.put(id);
    ok.put(br#"",true,""]"#);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostrwire_event::{EventRef, RelayMessage};
    use nostrwire_loadgen::nostr_bench::write_seed;

    const NEWEST: u64 = 1_700_000_000;

    /// nostr-bench's seed with `per_tag` events for each of its 1,000
    /// hashtags: event i has `t` "nostr-bench-" and "nostr-bench-{i % 1000}"
    /// and `created_at` NEWEST - (total - 1 - i).
    fn seed(per_tag: u64) -> Seed {
        let mut text = Vec::new();
        write_seed(&mut text, per_tag, 5, 1, NEWEST).unwrap();
        Seed::parse(&text).unwrap()
    }

    fn replies(mode: &Mode, message: &str) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        answer(message.as_bytes(), mode, &mut Vec::new(), &mut |r| {
            all.push(r.to_vec())
        });
        all
    }

    /// The `created_at` of each `EVENT` for `sub`, after checking that each
    /// carries `t` = `tag` and is written as canonical JSON; the last reply
    /// must be the `EOSE`.
    fn events_of(replies: &[Vec<u8>], sub: &str, tag: &str) -> Vec<u64> {
        let (last, events) = replies.split_last().expect("an EOSE");
        assert_eq!(
            RelayMessage::parse(last).unwrap(),
            RelayMessage::Eose(sub.into())
        );
        events
            .iter()
            .map(|raw| {
                let text = std::str::from_utf8(raw).unwrap();
                let prefix = format!(r#"["EVENT","{sub}","#);
                let json = text
                    .strip_prefix(&prefix)
                    .unwrap()
                    .strip_suffix(']')
                    .unwrap();
                let event = EventRef::parse(json.as_bytes()).unwrap();
                event.verify().unwrap();
                let mut canonical = Vec::new();
                event.write_json(&mut canonical);
                assert_eq!(canonical, json.as_bytes());
                assert!(event.any_tag(&mut |n, v| n == "t" && v == Some(tag)));
                event.created_at().as_u64()
            })
            .collect()
    }

    #[test]
    fn a_tag_query_gets_the_newest_events_of_the_tag_then_eose() {
        let mode = Mode {
            verify: false,
            seed: Some(seed(3)),
        };
        // Events 7, 1007 and 2007 of 3,000 carry nostr-bench-7.
        let at = |i: u64| NEWEST - (2999 - i);
        let two = replies(&mode, r##"["REQ","s",{"#t":["nostr-bench-7"],"limit":2}]"##);
        assert_eq!(events_of(&two, "s", "nostr-bench-7"), [at(2007), at(1007)]);
        let all = replies(
            &mode,
            r##"["REQ","q 1",{"limit":10,"#t":["nostr-bench-7"]}]"##,
        );
        assert_eq!(
            events_of(&all, "q 1", "nostr-bench-7"),
            [at(2007), at(1007), at(7)]
        );
        let unlimited = replies(&mode, r##"["REQ","s",{"#t":["nostr-bench-"]}]"##);
        assert_eq!(unlimited.len(), DEFAULT_LIMIT as usize + 1);
        assert_eq!(events_of(&unlimited, "s", "nostr-bench-")[0], at(2999));
    }

    #[test]
    fn other_queries_get_eose_alone_and_close_gets_nothing() {
        let mode = Mode {
            verify: false,
            seed: Some(seed(1)),
        };
        for req in [
            r##"["REQ","s",{"#t":["nostr-bench-9"],"kinds":[1]}]"##,
            r##"["REQ","s",{"#t":["nostr-bench-9","nostr-bench-8"]}]"##,
            r##"["REQ","s",{"#t":["elsewhere"],"limit":10}]"##,
            r##"["REQ","s",{"#t":["nostr-bench-9"]},{"#t":["nostr-bench-8"]}]"##,
            r##"["REQ","s",{"limit":10}]"##,
        ] {
            assert_eq!(
                events_of(&replies(&mode, req), "s", ""),
                [] as [u64; 0],
                "{req}"
            );
        }
        assert!(replies(&mode, r##"["CLOSE","s"]"##).is_empty());
        assert!(replies(&mode, r##"["REQ","s",{"#t":["nostr-bench-9"]"##).is_empty());
    }

    /// Over a socket, as nostr-bench asks: the load tester's equal-work
    /// check (100 tags, one REQ at a time, `limit` 10) finds every event.
    #[test]
    fn the_equal_work_check_finds_every_event_over_a_socket() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mode = Arc::new(Mode {
            verify: false,
            seed: Some(seed(3)),
        });
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        runtime.spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let mode = Arc::clone(&mode);
                tokio::spawn(async move { serve(socket, &mode).await });
            }
        });
        let check = nostrwire_loadgen::relays::bench::req_check(&url, 10);
        assert_eq!(check.error, None);
        assert_eq!((check.reqs, check.events), (100, 300));
    }
}
