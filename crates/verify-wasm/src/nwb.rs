//! nwb event records (spec/nwb.md §3–§9): every rule a decoder checks, and
//! the canonical serialization hashed straight from the record, without
//! building the event.

use crate::hash::Sink;
use crate::Signed;

/// Default policy limits of spec §9 (`DEFAULT_LIMITS` in the JS package).
pub(crate) const MAX_RECORD_BYTES: usize = 1 << 20;
const MAX_TAGS: u64 = 20_000;
const MAX_TAG_ELEMENTS: u64 = 1_000;
const MAX_STRING_BYTES: u64 = 1 << 20;
const PREFIX_LEN: usize = 139;
const MAX_TIMESTAMP: u64 = (1 << 53) - 1;

pub(crate) struct Reader<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub(crate) fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        if n > self.left() as u64 {
            return None;
        }
        let s = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Some(s)
    }

    /// A minimal LEB128 varint of at most 10 bytes (§4).
    pub(crate) fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            if i == 9 && b > 1 {
                return None;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return None;
                }
                return Some(v);
            }
        }
        None
    }
}

/// §6: a value stored as hex if and only if it is non-empty, of even length
/// and only `0-9a-f`.
fn compactable(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len() % 2 == 0
        && s.iter()
            .all(|&c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// One tag element (§6) as a JSON string; `None` if it breaks a rule.
fn element<S: Sink>(r: &mut Reader<'_>, h: &mut S, is_name: bool, layout: Layout) -> Option<()> {
    let head = r.varint()?;
    let len = head >> 1;
    if head & 1 == 0 {
        if len > MAX_STRING_BYTES {
            return None;
        }
        let text = r.take(len)?;
        core::str::from_utf8(text).ok()?;
        // A one-byte name has the short form (§5); hex-looking text is hex.
        if compactable(text) || (is_name && text.len() == 1) {
            return None;
        }
        text_value(h, text, layout);
    } else {
        let n = match len {
            0 => 32,
            32 => return None,
            n => n,
        };
        if n.saturating_mul(2) > MAX_STRING_BYTES {
            return None;
        }
        h.json_hex(r.take(n)?);
    }
    Some(())
}

/// A text value (valid UTF-8) as a JSON string: as the canonical
/// serialization has it, or in ASCII alone for `JSON.parse`.
fn text_value<S: Sink>(h: &mut S, text: &[u8], layout: Layout) {
    match layout {
        Layout::Canonical => h.json_str(text),
        Layout::Event => h.json_str_ascii(text),
    }
}

/// The JSON written for a record.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// The canonical serialization `[0,pubkey,created_at,kind,tags,content]`,
    /// the preimage of the id.
    Canonical,
    /// The event object, its keys in the order the JS package's decoder
    /// gives them: `{"id","pubkey","created_at","kind","tags","content","sig"}`.
    Event,
}

/// Checks `record` as an nwb event record (form byte 0x01) and feeds the
/// sink its canonical serialization `[0,pubkey,created_at,kind,tags,content]`.
/// `None` when the bytes are not a valid record.
pub(crate) fn hash_record<S: Sink>(record: &[u8], h: &mut S) -> Option<Signed> {
    write_record(record, h, Layout::Canonical)
}

/// Checks `record` as an nwb event record (form byte 0x01) and feeds the
/// sink its JSON in `layout`; `None` when the bytes are not a valid record
/// (what was written is then no JSON).
pub(crate) fn write_record<S: Sink>(record: &[u8], h: &mut S, layout: Layout) -> Option<Signed> {
    if record.len() < PREFIX_LEN || record.len() > MAX_RECORD_BYTES || record[0] != 0x01 {
        return None;
    }
    let kind = u16::from_le_bytes([record[1], record[2]]);
    let created_at = u64::from_le_bytes(record[3..11].try_into().ok()?);
    if created_at > MAX_TIMESTAMP {
        return None;
    }
    let signed = Signed {
        pubkey: record[11..43].try_into().ok()?,
        id: record[43..75].try_into().ok()?,
        sig: record[75..139].try_into().ok()?,
    };
    let event = layout == Layout::Event;
    if event {
        h.put(b"{\"id\":");
        h.json_hex(&signed.id);
        h.put(b",\"pubkey\":");
    } else {
        h.put(b"[0,");
    }
    h.json_hex(&signed.pubkey);
    h.put(if event {
        &b",\"created_at\":"[..]
    } else {
        b","
    });
    h.json_int(created_at as i64);
    h.put(if event { &b",\"kind\":"[..] } else { b"," });
    h.json_int(i64::from(kind));
    h.put(if event { &b",\"tags\":["[..] } else { b",[" });

    let mut r = Reader {
        bytes: record,
        at: PREFIX_LEN,
    };
    let block_len = r.varint()?;
    let block = r.take(block_len)?;
    let mut t = Reader {
        bytes: block,
        at: 0,
    };
    let tags = t.varint()?;
    if tags > MAX_TAGS || tags > (t.left() / 2) as u64 {
        return None;
    }
    for i in 0..tags {
        if i > 0 {
            h.byte(b',');
        }
        h.byte(b'[');
        let head = t.varint()?;
        let elements = head >> 1;
        if elements == 0 || elements > MAX_TAG_ELEMENTS || elements > t.left() as u64 {
            return None;
        }
        if head & 1 == 1 {
            let name = *t.take(1)?.first()?;
            if name > 0x7f {
                return None;
            }
            h.json_str(&[name]);
        } else {
            element(&mut t, h, true, layout)?;
        }
        for _ in 1..elements {
            h.byte(b',');
            element(&mut t, h, false, layout)?;
        }
        h.byte(b']');
    }
    if t.left() != 0 {
        return None;
    }
    h.put(if event { &b"],\"content\":"[..] } else { b"]," });

    let content_len = r.varint()?;
    if content_len != r.left() as u64 || content_len > MAX_STRING_BYTES {
        return None;
    }
    let content = r.take(content_len)?;
    core::str::from_utf8(content).ok()?;
    text_value(h, content, layout);
    if event {
        h.put(b",\"sig\":");
        h.json_hex(&signed.sig);
        h.byte(b'}');
    } else {
        h.byte(b']');
    }
    Some(signed)
}
