//! The publishing floor of this host: a WebSocket endpoint that answers every
//! `EVENT` with `OK` and does nothing else a relay must do.
//!
//! It is not a relay. It stores nothing, serves no `REQ` and keeps no
//! limits. It measures how fast `nostrwire load --scenario publish` can go on
//! this host when the endpoint's only work is the socket and, with `--verify`,
//! the NIP-01 parse, id hash and BIP-340 check. Its rate is then an upper
//! bound for any relay that verifies what it accepts, measured with the same
//! load tester on the same cores (see `docs/bench-methodology.md`).
//!
//! ```text
//! cargo run --release -p nostrwire-loadgen --example floor_relay -- [--verify] [--listen 127.0.0.1:7898] [--threads 2]
//! ```
//!
//! Modes:
//! - default: find the id in the frame and answer `["OK",<id>,true,""]`;
//! - `--verify`: parse the message (`ClientMessage::parse`), check the id and
//!   the signature, and answer `OK true` or `OK false` with `invalid:`.
//!
//! Each connection is one task on a Tokio runtime of `--threads` workers
//! (default: the available cores). Replies for every message of one read go
//! out in one write, with `TCP_NODELAY` set, as the relay does. The process
//! stops by itself after `--seconds` (default 600).

use std::time::Duration;

use nostrwire_event::{ClientMessage, SignedFields, Sink};
use nostrwire_websocket::{handshake, Message, MessageReader, MessageWriter, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest message accepted, as the relay's default.
const MAX_MESSAGE: usize = 1 << 20;

struct Options {
    listen: String,
    verify: bool,
    threads: usize,
    seconds: u64,
}

fn options() -> Options {
    let mut options = Options {
        listen: "127.0.0.1:7898".into(),
        verify: false,
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

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads.max(1))
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let listener = TcpListener::bind(&options.listen)
            .await
            .unwrap_or_else(|e| fail(&format!("bind {}: {e}", options.listen)));
        eprintln!(
            "floor_relay on ws://{} ({}), {} threads, stops after {} s",
            options.listen,
            if options.verify {
                "parse + verify"
            } else {
                "ack only"
            },
            options.threads,
            options.seconds
        );
        let verify = options.verify;
        let accept = async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(async move {
                    let _ = serve(socket, verify).await;
                });
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(options.seconds), accept).await;
    });
}

/// One connection: the HTTP upgrade, then messages until the peer closes.
async fn serve(mut socket: TcpStream, verify: bool) -> std::io::Result<()> {
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
    let mut ok = Vec::with_capacity(128);
    loop {
        while let Some(message) = reader.next_message().map_err(std::io::Error::other)? {
            match message {
                Message::Text(text) => {
                    ok.clear();
                    if answer(text, verify, &mut ok) {
                        writer.text(&mut out, &ok, None);
                    }
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
        reader.push(&chunk[..n]);
    }
}

/// Writes the `OK` for an `EVENT` message into `ok`; false for anything else.
fn answer(text: &[u8], verify: bool, ok: &mut Vec<u8>) -> bool {
    if verify {
        let Ok(ClientMessage::Event(event)) = ClientMessage::parse(text) else {
            return false;
        };
        let (accepted, reason) = match event.verify() {
            Ok(()) => (true, ""),
            Err(_) => (false, "invalid: bad id or signature"),
        };
        nostrwire_event::message::write::ok(ok, event.id(), accepted, reason);
        return true;
    }
    // Ack only: the first `"id":"` in the frame is the event's (the load
    // tester writes the id first, as canonical JSON does).
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
