//! `nostrwire verify`: full verification of JSON Lines events, in parallel,
//! with output in input order.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use nostrwire_event::{parse_event_line, Error, ErrorKind, EventId, Limits, SignedFields};

use crate::input::{self, Line, Lines};

/// Arguments of `nostrwire verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// JSON Lines input; `-` or nothing reads standard input.
    pub input: Option<PathBuf>,
    /// Worker threads (default: all cores). Output order never depends on it.
    #[arg(long, short = 'j')]
    pub threads: Option<usize>,
    /// Largest accepted line, in bytes.
    #[arg(long, default_value_t = Limits::DEFAULT.max_message_bytes)]
    pub max_line_bytes: usize,
}

/// Lines verified per batch; batches are split among the workers.
const BATCH_LINES: usize = 4096;

/// The outcome for one invalid line.
struct Invalid {
    claimed_id: Option<EventId>,
    error: Error,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let threads = crate::parallel::default_threads(args.threads);
    let limits = Limits {
        max_message_bytes: args.max_line_bytes,
        ..Limits::DEFAULT
    };
    let mut lines = Lines::new(input::open(args.input.as_deref())?, args.max_line_bytes);
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let (mut valid, mut invalid) = (0u64, 0u64);
    let mut line_no = 0u64;
    let mut batch: Vec<(u64, Line)> = Vec::with_capacity(BATCH_LINES);
    loop {
        batch.clear();
        while batch.len() < BATCH_LINES {
            match lines.next_line()? {
                Some(Line::Text(t)) if t.iter().all(u8::is_ascii_whitespace) => line_no += 1,
                Some(line) => {
                    line_no += 1;
                    batch.push((line_no, line));
                }
                None => break,
            }
        }
        if batch.is_empty() {
            break;
        }
        let results = verify_batch(&batch, &limits, threads);
        for ((n, _), result) in batch.iter().zip(results) {
            match result {
                None => valid += 1,
                Some(bad) => {
                    invalid += 1;
                    let id = bad
                        .claimed_id
                        .map_or_else(|| "-".to_string(), |id| id.to_hex());
                    writeln!(out, "line {n}: {id}: {}: {}", bad.error.kind(), bad.error)?;
                }
            }
        }
    }
    writeln!(out, "{valid} valid, {invalid} invalid")?;
    out.flush()?;
    Ok(if invalid == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn verify_line(line: &Line, limits: &Limits) -> Option<Invalid> {
    let text = match line {
        Line::Text(t) => t,
        Line::TooLong => {
            return Some(Invalid {
                claimed_id: None,
                error: Error::new(ErrorKind::TooLarge),
            })
        }
    };
    match parse_event_line(text, limits) {
        Ok(event) => event.verify().err().map(|error| Invalid {
            claimed_id: Some(*event.id()),
            error,
        }),
        Err(error) => Some(Invalid {
            claimed_id: sniff_id(text),
            error,
        }),
    }
}

/// Best effort: the `"id":"<64 hex>"` of a line that failed to parse.
fn sniff_id(text: &[u8]) -> Option<EventId> {
    let key = b"\"id\":\"";
    let at = text.windows(key.len()).position(|w| w == key)? + key.len();
    let hex = text.get(at..at + 64)?;
    EventId::from_hex(std::str::from_utf8(hex).ok()?).ok()
}

fn verify_batch(batch: &[(u64, Line)], limits: &Limits, threads: usize) -> Vec<Option<Invalid>> {
    crate::parallel::map(batch, threads, |(_, line)| verify_line(line, limits))
}
