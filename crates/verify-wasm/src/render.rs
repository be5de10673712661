//! The records of a `nostrwire.v2` batch (spec/transport.md §7) as JSON
//! text for the engine's `JSON.parse`: one call checks and writes hundreds
//! of events, where decoding them in JavaScript costs a call, strings and
//! garbage per field on a page whose decoder is not compiled yet.
//!
//! A record is written as its event object (`nwb::Layout::Event`) after
//! every check a decoder makes (`nwb::write_record`); a compressed one is
//! decompressed first. A record left to the JavaScript decoder is written
//! as `null`: one that breaks a rule (that decoder then reports the error it
//! always has), one compressed with a dictionary this module does not hold,
//! or one whose JSON does not fit an empty output.

use crate::hash::{Buf, Sink};
use crate::nwb::{self, Layout, Reader, MAX_RECORD_BYTES};
use crate::zstd::{parse_record, Zstd};
use crate::Malformed;

/// Why a batch's record list is refused (spec/transport.md §12), in the
/// order the JS package's `batchRecords` finds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListError {
    /// A length runs past the list, a record is empty, or a compressed
    /// record's header does not leave a payload: `truncated`.
    Truncated,
    /// A record or a compressed record's `R` over the record limit:
    /// `record_too_large`.
    RecordTooLarge,
    /// A record that is neither `0x01` nor `0x81`: `bad_version`.
    BadVersion,
    /// Bytes after the last record: `trailing_bytes`.
    TrailingBytes,
    /// A varint over 2^53 − 1: `varint_overflow`.
    VarintOverflow,
    /// A varint with a needless zero byte: `overlong_varint`.
    OverlongVarint,
}

impl ListError {
    /// The code the wasm export returns (the JS side maps it to the kind).
    pub fn code(self) -> i32 {
        match self {
            ListError::Truncated => -2,
            ListError::RecordTooLarge => -3,
            ListError::BadVersion => -4,
            ListError::TrailingBytes => -5,
            ListError::VarintOverflow => -6,
            ListError::OverlongVarint => -7,
        }
    }
}

/// A varint as the JS package reads one (at most 2^53 − 1), ending before
/// `end`.
fn js_varint(bytes: &[u8], at: &mut usize, end: usize) -> Result<u64, ListError> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        if *at >= end {
            return Err(ListError::Truncated);
        }
        let b = bytes[*at];
        *at += 1;
        if shift == 49 && b > 0x0f {
            return Err(ListError::VarintOverflow);
        }
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            if b == 0 && shift > 0 {
                return Err(ListError::OverlongVarint);
            }
            return Ok(value);
        }
        shift += 7;
    }
}

/// Checks the `count` records of a batch's list (after its count) as the
/// JS package's `batchRecords` does, with the default record limit, so
/// that a client rendering the batch here needs no loop of its own over
/// the records: each length within the list and the limit, each record
/// `0x01` or `0x81` with a whole compressed header, nothing after the last.
pub fn check_list(list: &[u8], count: usize) -> Result<(), ListError> {
    let max = MAX_RECORD_BYTES as u64;
    let mut at = 0;
    for _ in 0..count {
        let len = js_varint(list, &mut at, list.len())?;
        if len > max {
            return Err(ListError::RecordTooLarge);
        }
        if len > (list.len() - at) as u64 {
            return Err(ListError::Truncated);
        }
        let (pos, end) = (at, at + len as usize);
        match list.get(pos) {
            _ if len == 0 => return Err(ListError::Truncated),
            Some(0x81) => {
                at = pos + 1;
                js_varint(list, &mut at, end)?;
                if js_varint(list, &mut at, end)? > max {
                    return Err(ListError::RecordTooLarge);
                }
                if at >= end {
                    return Err(ListError::Truncated);
                }
            }
            Some(0x01) => {}
            _ => return Err(ListError::BadVersion),
        }
        at = end;
    }
    if at != list.len() {
        return Err(ListError::TrailingBytes);
    }
    Ok(())
}

/// What a call rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rendered {
    /// Records written (each an event or `null`).
    pub records: usize,
    /// Where the next record's length starts in the list.
    pub next: usize,
    /// Bytes of JSON written: `[`, the records separated by commas, `]`.
    pub len: usize,
    /// Bytes written to `records` (see [`render_records`]).
    pub records_len: usize,
}

/// Writes the records of `list` from byte `at` on (each a varint length and
/// the record, as a batch frame lists them after its count) as one JSON
/// array into `out`: at most `count` records, fewer when the next would not
/// fit. At least one record is written when `out` holds 6 bytes (`[null]`).
/// With `records_out`, the event records themselves (decompressed) go there
/// too, each a little-endian `u32` length and the record, one per event
/// written (none for a `null`): what a verifier takes.
/// Compressed records are decompressed into `scratch` by `zstd` (without
/// one, or with a record larger than `scratch` or the 1 MiB record limit,
/// they are left to the JavaScript decoder). `Malformed` when a length
/// runs past the list, or `out` is under 6 bytes.
pub fn render_records(
    list: &[u8],
    at: usize,
    count: usize,
    out: &mut [u8],
    mut records_out: Option<&mut [u8]>,
    scratch: &mut [u8],
    mut zstd: Option<&mut Zstd<'_>>,
) -> Result<Rendered, Malformed> {
    let cap = out.len();
    if cap < b"[null]".len() {
        return Err(Malformed);
    }
    let mut r = Reader {
        bytes: list,
        at: at.min(list.len()),
    };
    let mut w = Buf::new(out);
    w.byte(b'[');
    let mut records = 0;
    let mut records_len = 0;
    while records < count && r.left() > 0 {
        let start = r.at;
        let len = r.varint().ok_or(Malformed)?;
        let record = r.take(len).ok_or(Malformed)?;
        let before = w.len;
        let comma = records > 0;
        if comma {
            w.byte(b',');
        }
        let inner = event(record, &mut w, scratch, zstd.as_deref_mut()).map(|i| match i {
            Inner::Raw => record,
            Inner::Scratch(n) => &scratch[..n],
        });
        // Its bytes for the verifier, when asked for.
        let mut kept = records_len;
        if let (Some(to), Some(bytes)) = (records_out.as_deref_mut(), inner) {
            let end = records_len + 4 + bytes.len();
            if let Some(slot) = to.get_mut(records_len..end) {
                slot[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
                slot[4..].copy_from_slice(bytes);
                kept = end;
            }
        }
        let fits = kept > records_len || records_out.is_none();
        // A record fits when the closing `]` still does.
        if inner.is_some() && fits && !w.full && w.len < cap {
            records_len = kept;
            records += 1;
            continue;
        }
        w.len = before;
        w.full = false;
        let null_fits = before + usize::from(comma) + b"null]".len() <= cap;
        if (inner.is_some() && comma) || !null_fits {
            // The next call starts with this record.
            r.at = start;
            break;
        }
        // Invalid, or too large for an empty output: the JavaScript
        // decoder takes it.
        if comma {
            w.byte(b',');
        }
        w.put(b"null");
        records += 1;
    }
    w.byte(b']');
    Ok(Rendered {
        records,
        next: r.at,
        len: w.len,
        records_len,
    })
}

/// Where a rendered record's own bytes are.
enum Inner {
    /// The record as listed (`0x01`).
    Raw,
    /// Decompressed, the first bytes of the scratch buffer.
    Scratch(usize),
}

/// One record, raw (`0x01`) or compressed (`0x81`), as its event object;
/// `None` for the JavaScript decoder.
fn event(
    record: &[u8],
    w: &mut Buf<'_>,
    scratch: &mut [u8],
    zstd: Option<&mut Zstd<'_>>,
) -> Option<Inner> {
    match record.first()? {
        0x01 => nwb::write_record(record, w, Layout::Event).map(|_| Inner::Raw),
        0x81 => {
            let c = parse_record(record).ok()?;
            if c.size > MAX_RECORD_BYTES || c.size > scratch.len() {
                return None;
            }
            let inner = &mut scratch[..c.size];
            zstd?.decompress(c.dictionary, c.frame, inner).ok()?;
            // Envelopes do not nest (spec/nwb.md §11): write_record wants 0x01.
            nwb::write_record(inner, w, Layout::Event).map(|_| Inner::Scratch(c.size))
        }
        _ => None,
    }
}
