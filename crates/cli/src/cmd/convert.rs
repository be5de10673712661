//! `nostrwire convert`: JSON Lines of events ↔ a stream of nwb records
//! (`spec/nwb.md` §10 framing; §11 compressed records with `--dict`).

use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
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
        Format::Nwb => to_nwb(
            input::open(args.input.as_deref())?,
            dicts.as_ref(),
            &mut out,
            &mut io::stderr(),
        )?,
        Format::Json => to_json(
            input::open(args.input.as_deref())?,
            dicts.as_ref(),
            &mut out,
            &mut io::stderr(),
        )?,
    };
    out.flush()?;
    if bad > 0 {
        eprintln!("{bad} invalid record(s) skipped");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// JSON Lines → frames. Invalid lines are reported and skipped.
fn to_nwb(
    input: impl BufRead,
    dicts: Option<&DictSet>,
    out: &mut dyn Write,
    errors: &mut dyn Write,
) -> anyhow::Result<u64> {
    let limits = Limits::DEFAULT;
    let mut lines = Lines::new(input, limits.max_message_bytes);
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
                writeln!(
                    errors,
                    "record {line_no}: too_large: line longer than {} bytes",
                    limits.max_message_bytes
                )?;
                continue;
            }
        };
        let event = match parse_event_line(&text, &limits) {
            Ok(event) => event,
            Err(e) => {
                bad += 1;
                writeln!(errors, "record {line_no}: {}: {e}", e.kind())?;
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
    input: impl BufRead,
    dicts: Option<&DictSet>,
    out: &mut dyn Write,
    errors: &mut dyn Write,
) -> anyhow::Result<u64> {
    let limits = nostrwire_wire::Limits::DEFAULT;
    let mut frames = FrameReader::new(input, limits.max_record_bytes);
    let mut decompressor = RecordDecompressor::new(dicts)?;
    let (mut n, mut bad) = (0u64, 0u64);
    let mut json = Vec::new();
    loop {
        n += 1;
        let stored = match frames.next_frame() {
            Ok(Some(stored)) => stored,
            Ok(None) => break,
            Err(ReadError::Wire(e)) => {
                writeln!(
                    errors,
                    "record {n}: {}: {}; stream framing lost, stopping",
                    e.as_str(),
                    e.describe()
                )?;
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
                writeln!(errors, "record {n}: {}: {}", e.as_str(), e.describe())?;
            }
        }
    }
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORPUS: &str = include_str!("../../../../testdata/real-events.jsonl");

    fn convert_to_nwb(input: &[u8], dicts: Option<&DictSet>) -> (Vec<u8>, String, u64) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let bad = to_nwb(input, dicts, &mut out, &mut err).unwrap();
        (out, String::from_utf8(err).unwrap(), bad)
    }

    fn convert_to_json(input: &[u8], dicts: Option<&DictSet>) -> (Vec<u8>, String, u64) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let bad = to_json(input, dicts, &mut out, &mut err).unwrap();
        (out, String::from_utf8(err).unwrap(), bad)
    }

    #[test]
    fn json_to_nwb_and_back_is_byte_identical() {
        let head: String = CORPUS.lines().take(300).map(|l| format!("{l}\n")).collect();
        let (stream, err, bad) = convert_to_nwb(head.as_bytes(), None);
        assert_eq!((bad, err.as_str()), (0, ""));
        assert!(stream.len() * 100 < head.len() * 70);
        let (json, err, bad) = convert_to_json(&stream, None);
        assert_eq!((bad, err.as_str()), (0, ""));
        assert_eq!(String::from_utf8(json).unwrap(), head);
    }

    #[test]
    fn bad_json_lines_are_named_and_skipped() {
        let good = CORPUS.lines().next().unwrap();
        let input = format!("{good}\n\nnot json\n{{\"id\":1}}\n{good}\n");
        let (stream, err, bad) = convert_to_nwb(input.as_bytes(), None);
        assert_eq!(bad, 2);
        assert!(err.contains("record 3: syntax"), "{err}");
        assert!(err.contains("record 4: wrong_type"), "{err}");
        let (json, _, bad) = convert_to_json(&stream, None);
        assert_eq!(bad, 0);
        assert_eq!(
            String::from_utf8(json).unwrap(),
            format!("{good}\n{good}\n")
        );
    }

    #[test]
    fn bad_records_are_named_with_their_kind() {
        let lines: String = CORPUS.lines().take(3).map(|l| format!("{l}\n")).collect();
        let (stream, _, _) = convert_to_nwb(lines.as_bytes(), None);
        // Corrupt the second record's form byte: that record fails, the others convert.
        let (first, rest) = frame::split_frame(&stream, 1 << 20).unwrap();
        let second_at = stream.len() - rest.len() + 2;
        let mut broken = stream.clone();
        broken[second_at] = 0x07;
        let (json, err, bad) = convert_to_json(&broken, None);
        assert_eq!(bad, 1, "{err}");
        assert!(err.contains("record 2: bad_version"), "{err}");
        assert_eq!(json.iter().filter(|&&b| b == b'\n').count(), 2);
        assert!(!first.is_empty());
        // A cut stream stops at the broken frame with `truncated`.
        let (json, err, bad) = convert_to_json(&stream[..stream.len() - 5], None);
        assert_eq!(bad, 1);
        assert!(err.contains("record 3: truncated"), "{err}");
        assert_eq!(json.iter().filter(|&&b| b == b'\n').count(), 2);
    }
}
