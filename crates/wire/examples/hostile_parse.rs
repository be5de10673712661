//! Prints what each hostile message shape costs to parse, in µs of CPU per
//! 100 KB of input: the JSON messages of `crates/event/tests/support/hostile.rs`
//! and binary `nostrwire.v1` frames with records at the decoder's limits.
//!
//! ```text
//! cargo run --release -p nostrwire-wire --example hostile_parse [bytes]
//! ```
//!
//! `bytes` sets the size the JSON shapes grow to (default 1 MiB).
//!
//! Every shape should cost about what plain JSON or record validation costs
//! (tens to hundreds of µs per 100 KB); a shape far above the others is a
//! super-linear path.

#[path = "../../event/tests/support/hostile.rs"]
mod hostile;

use std::hint::black_box;
use std::time::{Duration, Instant};

use nostrwire_event::{
    ClientMessage, Event, EventId, Kind, PublicKey, RelayMessage, Signature, Tag, Timestamp,
};
use nostrwire_wire::transport::{self, decode_client};
use nostrwire_wire::{encode_event, Limits};

/// CPU time of this thread (wall time would count other processes' turns).
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The least CPU time of several runs (at least 3, for at least 200 ms, or
/// one run if that alone takes a second).
fn time(mut run: impl FnMut()) -> Duration {
    let mut best = Duration::MAX;
    let started = Instant::now();
    let mut runs = 0;
    while runs < 3 || started.elapsed() < Duration::from_millis(200) {
        let t = cpu_time();
        run();
        best = best.min(cpu_time() - t);
        runs += 1;
        if best > Duration::from_secs(1) {
            break;
        }
    }
    best
}

fn report(name: &str, bytes: usize, took: Duration, outcome: &str) {
    let per_100k = took.as_secs_f64() * 1e6 * 100_000.0 / bytes as f64;
    println!(
        "{name:<44} {:>9} B {:>11.0} µs {:>9.1} µs/100KB  {outcome}",
        bytes,
        took.as_secs_f64() * 1e6,
        per_100k
    );
}

/// An EVENT frame whose record has `tags` tags of `elements` elements.
fn binary_event(tags: usize, elements: usize, element: &str) -> Vec<u8> {
    let event = Event {
        id: EventId::from_bytes([1; 32]),
        pubkey: PublicKey::from_bytes([2; 32]),
        created_at: Timestamp::new(1_700_000_000).unwrap(),
        kind: Kind(1),
        tags: (0..tags)
            .map(|_| Tag::new(vec![element.to_string(); elements]).unwrap())
            .collect(),
        content: String::new(),
        sig: Signature::from_bytes([3; 64]),
    };
    let mut frame = Vec::new();
    transport::write_event(&mut frame, &encode_event(&event));
    frame
}

fn main() {
    let size = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("a size in bytes"))
        .unwrap_or(hostile::SIZE);
    println!(
        "{:<44} {:>11} {:>14} {:>16}",
        "shape", "size", "parse", "per 100 KB"
    );
    for shape in hostile::shapes_of(size) {
        let mut outcome = String::new();
        let took = time(|| {
            let got = match shape.side {
                hostile::Side::Client => ClientMessage::parse(black_box(&shape.input)).map(|_| ()),
                hostile::Side::Relay => RelayMessage::parse(black_box(&shape.input)).map(|_| ()),
            };
            outcome = match got {
                Ok(()) => "parsed".to_string(),
                Err(e) => format!("refused: {}", e.kind()),
            };
        });
        report(shape.name, shape.input.len(), took, &outcome);
    }
    let limits = Limits::DEFAULT;
    let frames = [
        (
            "binary EVENT: 20k tags of 3 text elements",
            binary_event(20_000, 3, "abcdefghijk"),
        ),
        (
            "binary EVENT: 1,000-element tags",
            binary_event(200, 1_000, "ab"),
        ),
        (
            "binary EVENT: hex elements",
            binary_event(1_000, 30, &"ab".repeat(16)),
        ),
        ("binary JSON frame: 80k plain unknown keys", {
            let shape = hostile::shapes_of(size).into_iter().nth(2).unwrap();
            let mut frame = Vec::new();
            transport::write_json(&mut frame, &shape.input);
            frame
        }),
    ];
    for (name, frame) in frames {
        let mut outcome = String::new();
        let took = time(|| {
            outcome = match decode_client(black_box(&frame), &limits) {
                Ok(transport::ClientFrame::Json(json)) => match ClientMessage::parse(json) {
                    Ok(_) => "parsed".to_string(),
                    Err(e) => format!("refused: {}", e.kind()),
                },
                Ok(_) => "decoded".to_string(),
                Err(e) => format!("refused: {}", e.as_str()),
            };
        });
        report(name, frame.len(), took, &outcome);
    }
}
