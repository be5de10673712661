//! `nostrwire inspect`: prints each record of an nwb stream with its fields
//! and sizes (`spec/nwb.md` §3, §10, §11).

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nostrwire_wire::compress::RecordDecompressor;
use nostrwire_wire::frame::{FrameReader, ReadError};
use nostrwire_wire::{
    varint, EventView, Limits, PreimageFields, SignedFields, Value, COMPRESSED_V1, PREFIX_LEN,
};

use crate::input;

/// Arguments of `nostrwire inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Dictionary set for compressed records.
    #[arg(long, value_name = "DICTS")]
    pub dict: Option<PathBuf>,
    /// Tags shown per record (the count is always shown).
    #[arg(long, default_value_t = 8)]
    pub tags: usize,
    /// nwb stream; `-` or nothing reads standard input.
    pub input: Option<PathBuf>,
}

/// A short rendering of a tag element: text quoted (cut at 48 bytes), hex
/// as `hex32:` or `hexN:` with its first bytes.
fn element(value: Value<'_>) -> String {
    match value {
        Value::Text(s) => {
            let mut cut = s.len().min(48);
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            let more = if cut < s.len() {
                format!("…(+{} B)", s.len() - cut)
            } else {
                String::new()
            };
            format!("{:?}{more}", &s[..cut])
        }
        Value::Hex(b) => {
            let head: String = b.iter().take(8).map(|x| format!("{x:02x}")).collect();
            let more = if b.len() > 8 { "…" } else { "" };
            format!("hex{}:{head}{more}", b.len())
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dicts = args
        .dict
        .as_deref()
        .map(super::convert::load_dicts)
        .transpose()?;
    let limits = Limits::DEFAULT;
    let mut frames = FrameReader::new(input::open(args.input.as_deref())?, limits.max_record_bytes);
    let mut decompressor = RecordDecompressor::new(dicts.as_ref())?;
    let mut out = BufWriter::new(io::stdout().lock());
    let (mut n, mut offset, mut bad) = (0u64, 0u64, 0u64);
    loop {
        n += 1;
        let stored = match frames.next_frame() {
            Ok(Some(stored)) => stored,
            Ok(None) => break,
            Err(ReadError::Wire(e)) => {
                writeln!(
                    out,
                    "record {n} @{offset}: {}: {}; stream framing lost, stopping",
                    e.as_str(),
                    e.describe()
                )?;
                bad += 1;
                break;
            }
            Err(ReadError::Io(e)) => return Err(e).context("reading input"),
        };
        let frame_len = varint::len(stored.len() as u64) + stored.len();
        let envelope = if stored.first() == Some(&COMPRESSED_V1) {
            let mut pos = 1;
            let dict = varint::read(stored, &mut pos).ok();
            let raw = varint::read(stored, &mut pos).ok();
            format!(
                "compressed, dictionary {}, {} B stored for {} B raw",
                dict.map_or("?".into(), |d| d.to_string()),
                stored.len(),
                raw.map_or("?".into(), |r| r.to_string())
            )
        } else {
            format!("raw, {} B", stored.len())
        };
        write!(out, "record {n} @{offset}: {envelope}")?;
        offset += frame_len as u64;
        let view = decompressor
            .record(stored, &limits)
            .and_then(|record| EventView::decode_with(record, &limits));
        let view = match view {
            Ok(view) => view,
            Err(e) => {
                writeln!(out, "\n  invalid: {}: {}", e.as_str(), e.describe())?;
                bad += 1;
                continue;
            }
        };
        let record = view.record();
        let content_len = view.content().len();
        let tag_bytes = record.len() - PREFIX_LEN - varint::len(content_len as u64) - content_len;
        writeln!(out)?;
        writeln!(out, "  kind        {}", view.kind())?;
        writeln!(out, "  created_at  {}", view.created_at())?;
        writeln!(out, "  pubkey      {}", view.pubkey())?;
        writeln!(out, "  id          {}", view.id())?;
        writeln!(out, "  sig         {}", view.sig())?;
        writeln!(
            out,
            "  tags        {} tags, {} B (length prefix included)",
            view.tag_count(),
            tag_bytes
        )?;
        for tag in view.tags().take(args.tags) {
            let elements: Vec<String> = tag.iter().map(element).collect();
            writeln!(out, "    [{}]", elements.join(", "))?;
        }
        if view.tag_count() > args.tags {
            writeln!(out, "    … {} more", view.tag_count() - args.tags)?;
        }
        writeln!(
            out,
            "  content     {} B: {}",
            content_len,
            element(Value::Text(view.content()))
        )?;
        writeln!(
            out,
            "  id check    {}",
            if view.verify_id().is_ok() {
                "ok"
            } else {
                "MISMATCH"
            }
        )?;
    }
    out.flush()?;
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
