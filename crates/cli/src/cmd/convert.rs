//! `nostrwire convert`: JSON Lines of events ↔ a stream of nwb records
//! (`spec/nwb.md` §10 framing; §11 compressed records with `--dict`).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use nostrwire_event::{parse_event_line, Limits, SignedFields};
use nostrwire_wire::compress::{DictSet, RecordCompressor, RecordDecompressor};
use nostrwire_wire::frame::{self, FrameReader, ReadError};
use nostrwire_wire::{encode_json_event_into, EventView};

use crate::input::{self, Line, Lines};

/// Output format of `convert`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A stream of length-prefixed nwb records (from JSON Lines).
    Nwb,
    /// JSON Lines of canonical events (from an nwb stream).
    Json,
}

/// Arguments of `nostrwire convert`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format; the input is the other one.
    #[arg(long)]
    pub to: Format,
    /// Dictionary set (from `nostrwire dict train`): compress records with it
    /// (`--to nwb`) or read records compressed with it (`--to json`).
    #[arg(long, value_name = "DICTS")]
    pub dict: Option<PathBuf>,
    /// Output file; standard output by default.
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Input file; `-` or nothing reads standard input.
    pub input: Option<PathBuf>,
}

/// Reads a dictionary set file.
pub fn load_dicts(path: &Path) -> anyhow::Result<DictSet> {
    let bytes = input::read_all(path)?;
    DictSet::from_bytes(&bytes).with_context(|| format!("{}: not a dictionary set", path.display()))
}

fn open_output(path: Option<&Path>) -> anyhow::Result<Box<dyn Write>> {
    Ok(match path {
        None => Box::new(BufWriter::with_capacity(1 << 16, io::stdout().lock())),
        Some(p) if p.as_os_str() == "-" => {
            Box::new(BufWriter::with_capacity(1 << 16, io::stdout().lock()))
        }
        Some(p) => {
            let file = File::create(p).with_context(|| format!("cannot create {}", p.display()))?;
            Box::new(BufWriter::with_capacity(1 << 16, file))
        }
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dicts = args.dict.as_deref().map(load_dicts).transpose()?;
    let mut out = open_output(args.output.as_deref())?;
    let bad = match args.to {
        Format::Nwb => to_nwb(args.input.as_deref(), dicts.as_ref(), &mut out)?,
        Format::Json => to_json(args.input.as_deref(), dicts.as_ref(), &mut out)?,
    };
    out.flush()?;
    if bad > 0 {
        eprintln!("nostrwire: {bad} invalid record(s) skipped");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// JSON Lines → frames. Invalid lines are reported and skipped.
fn to_nwb(
    input: Option<&Path>,
    dicts: Option<&DictSet>,
    out: &mut dyn Write,
) -> anyhow::Result<u64> {
    let limits = Limits::DEFAULT;
    let mut lines = Lines::new(input::open(input)?, limits.max_message_bytes);
    let mut compressor = dicts.map(RecordCompressor::new).transpose()?;
    let (mut record, mut stored) = (Vec::new(), Vec::new());
    let (mut line_no, mut bad) = (0u64, 0u64);
    while let Some(line) = lines.next_line()? {
        line_no += 1;
        let text = match line {
            Line::Text(t) if t.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Text(t) => t,
            Line::TooLong => {
                bad += 1;
                eprintln!(
                    "nostrwire: record {line_no}: too_large: line longer than {} bytes",
                    limits.max_message_bytes
                );
                continue;
            }
        };
        let event = match parse_event_line(&text, &limits) {
            Ok(event) => event,
            Err(e) => {
                bad += 1;
                eprintln!("nostrwire: record {line_no}: {}: {e}", e.kind());
                continue;
            }
        };
        record.clear();
        encode_json_event_into(&event, &mut record);
        let bytes = match compressor.as_mut() {
            Some(c) => {
                stored.clear();
                c.compress_into(&record, &mut stored)?;
                &stored
            }
            None => &record,
        };
        frame::write_frame(out, bytes)?;
    }
    Ok(bad)
}

/// Frames → JSON Lines. Invalid records are reported and skipped; a broken
/// frame ends the stream (nothing after it can be framed).
fn to_json(
    input: Option<&Path>,
    dicts: Option<&DictSet>,
    out: &mut dyn Write,
) -> anyhow::Result<u64> {
    let limits = nostrwire_wire::Limits::DEFAULT;
    let mut frames = FrameReader::new(input::open(input)?, limits.max_record_bytes);
    let mut decompressor = RecordDecompressor::new(dicts)?;
    let (mut n, mut bad) = (0u64, 0u64);
    let mut json = Vec::new();
    loop {
        n += 1;
        let stored = match frames.next_frame() {
            Ok(Some(stored)) => stored,
            Ok(None) => break,
            Err(ReadError::Wire(e)) => {
                eprintln!(
                    "nostrwire: record {n}: {}: {}; stream framing lost, stopping",
                    e.as_str(),
                    e.describe()
                );
                return Ok(bad + 1);
            }
            Err(ReadError::Io(e)) => return Err(e).context("reading input"),
        };
        let decoded = decompressor.record(stored, &limits).and_then(|record| {
            EventView::decode_with(record, &limits).map(|view| {
                json.clear();
                view.write_json(&mut json);
            })
        });
        match decoded {
            Ok(()) => {
                json.push(b'\n');
                out.write_all(&json)?;
            }
            Err(e) => {
                bad += 1;
                eprintln!("nostrwire: record {n}: {}: {}", e.as_str(), e.describe());
            }
        }
    }
    Ok(bad)
}
