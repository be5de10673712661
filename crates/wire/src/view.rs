//! Decoding: canonical validation of a record and the zero-copy
//! [`EventView`] over the verified bytes.

use std::borrow::Cow;

use nostrwire_event::json::{write_escaped, Sink};
use nostrwire_event::{
    hex, Event, EventId, Kind, PreimageFields, PublicKey, Signature, SignedFields, Tag, Timestamp,
};

use crate::error::{Error, Result};
use crate::layout::{self, is_hex_compactable, EVENT_V1, OFF_ID, OFF_PUBKEY, OFF_SIG, PREFIX_LEN};
use crate::limits::Limits;
use crate::varint;

/// A decoded event borrowing its tags and content from a verified record.
///
/// Only [`EventView::decode`] creates one, after checking every canonical
/// rule of the spec, so accessors never fail. The id and signature are *not*
/// checked by decoding: call [`SignedFields::verify`] (which recomputes the id
/// from the view, with no JSON built).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventView<'a> {
    record: &'a [u8],
    id: EventId,
    pubkey: PublicKey,
    sig: Signature,
    created_at: Timestamp,
    kind: Kind,
    /// The tag block from the first tag (after the count) to its end.
    tags: &'a [u8],
    tag_count: usize,
    content: &'a str,
}

impl<'a> EventView<'a> {
    /// Decodes and validates an event record with the default [`Limits`].
    ///
    /// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record),
    /// [§8](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#8-canonical-and-accepted-encodings).
    pub fn decode(record: &'a [u8]) -> Result<EventView<'a>> {
        Self::decode_with(record, &Limits::DEFAULT)
    }

    /// Decodes and validates an event record.
    ///
    /// Every rule of the canonical table is enforced: form byte, exact
    /// lengths, minimal varints, UTF-8, the hex compaction rule both ways, the
    /// short name form, no trailing bytes; limits are checked before use.
    ///
    /// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record),
    /// [§8](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#8-canonical-and-accepted-encodings),
    /// [§9](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#9-limits).
    pub fn decode_with(record: &'a [u8], limits: &Limits) -> Result<EventView<'a>> {
        if record.len() > limits.max_record_bytes {
            return Err(Error::RecordTooLarge);
        }
        let prefix: &[u8; PREFIX_LEN] = match record.first() {
            None => return Err(Error::Truncated),
            Some(&EVENT_V1) => record
                .get(..PREFIX_LEN)
                .and_then(|p| p.try_into().ok())
                .ok_or(Error::Truncated)?,
            Some(_) => return Err(Error::BadVersion),
        };
        let created_at = layout::read_created_at(prefix)?;
        let kind = layout::read_kind(prefix);

        let mut pos = PREFIX_LEN;
        let block_len = varint::read(record, &mut pos)?;
        if block_len > (record.len() - pos) as u64 {
            return Err(Error::Truncated);
        }
        let block_end = pos + block_len as usize;
        let block = &record[..block_end];
        let tag_count = varint::read(block, &mut pos).map_err(in_block)?;
        if tag_count > limits.max_tags as u64 {
            return Err(Error::TooManyTags);
        }
        // Each tag takes at least two bytes (header and one element).
        if tag_count > ((block_end - pos) / 2) as u64 {
            return Err(Error::TagBlockMismatch);
        }
        let tags_start = pos;
        for _ in 0..tag_count {
            check_tag(block, &mut pos, limits).map_err(in_block)?;
        }
        if pos != block_end {
            return Err(Error::TagBlockMismatch);
        }

        let content_len = varint::read(record, &mut pos)?;
        if content_len > limits.max_string_bytes as u64 {
            return Err(Error::StringTooLarge);
        }
        let rest = (record.len() - pos) as u64;
        if content_len > rest {
            return Err(Error::Truncated);
        }
        if content_len < rest {
            return Err(Error::TrailingBytes);
        }
        let content = core::str::from_utf8(&record[pos..]).map_err(|_| Error::InvalidUtf8)?;

        Ok(EventView {
            record,
            id: EventId::from_bytes(prefix[OFF_ID..OFF_ID + 32].try_into().expect("32 bytes")),
            pubkey: PublicKey::from_bytes(
                prefix[OFF_PUBKEY..OFF_PUBKEY + 32]
                    .try_into()
                    .expect("32 bytes"),
            ),
            sig: Signature::from_bytes(prefix[OFF_SIG..OFF_SIG + 64].try_into().expect("64 bytes")),
            created_at,
            kind,
            tags: &record[tags_start..block_end],
            tag_count: tag_count as usize,
            content,
        })
    }

    /// The record this view reads.
    pub fn record(&self) -> &'a [u8] {
        self.record
    }

    /// Number of tags.
    pub fn tag_count(&self) -> usize {
        self.tag_count
    }

    /// Iterates over the tags without touching the content.
    pub fn tags(&self) -> Tags<'a> {
        Tags {
            block: self.tags,
            pos: 0,
            remaining: self.tag_count,
        }
    }

    /// The content.
    pub fn content(&self) -> &'a str {
        self.content
    }

    /// Converts to an owned [`Event`].
    pub fn to_event(&self) -> Event {
        let mut tags = Vec::with_capacity(self.tag_count);
        for tag in self.tags() {
            let mut elements = Vec::with_capacity(tag.len());
            elements.extend(tag.iter().map(|v| v.to_str().into_owned()));
            tags.push(Tag::new(elements).expect("decoded tags are never empty"));
        }
        Event {
            id: self.id,
            pubkey: self.pubkey,
            created_at: self.created_at,
            kind: self.kind,
            tags,
            content: self.content.to_owned(),
            sig: self.sig,
        }
    }
}

/// A `Truncated` inside the tag block means the block length was wrong.
fn in_block(e: Error) -> Error {
    if e == Error::Truncated {
        Error::TagBlockMismatch
    } else {
        e
    }
}

/// Validates one tag ([spec §5](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#5-tag-block)).
#[inline]
fn check_tag(block: &[u8], pos: &mut usize, limits: &Limits) -> Result<()> {
    let header = varint::read(block, pos)?;
    let elements = header >> 1;
    if elements == 0 {
        return Err(Error::EmptyTag);
    }
    if elements > limits.max_tag_elements as u64 {
        return Err(Error::TooManyTagElements);
    }
    // Each element takes at least one byte.
    if elements > (block.len() - *pos) as u64 {
        return Err(Error::Truncated);
    }
    let mut rest = elements;
    if header & 1 == 1 {
        let &name = block.get(*pos).ok_or(Error::Truncated)?;
        if name >= 0x80 {
            return Err(Error::InvalidUtf8);
        }
        *pos += 1;
    } else if check_element(block, pos, limits)? == Some(1) {
        return Err(Error::NonCanonicalName);
    }
    rest -= 1;
    for _ in 0..rest {
        check_element(block, pos, limits)?;
    }
    Ok(())
}

/// Validates one element; returns the text length for text, `None` for hex
/// ([spec §6](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#6-tag-elements-and-hex-compaction)).
#[inline]
fn check_element(block: &[u8], pos: &mut usize, limits: &Limits) -> Result<Option<usize>> {
    let header = varint::read(block, pos)?;
    let len = header >> 1;
    let available = (block.len() - *pos) as u64;
    if header & 1 == 1 {
        let bytes = match len {
            0 => 32,
            32 => return Err(Error::NonCanonicalHex),
            n => n,
        };
        if bytes > (limits.max_string_bytes / 2) as u64 {
            return Err(Error::StringTooLarge);
        }
        if bytes > available {
            return Err(Error::Truncated);
        }
        *pos += bytes as usize;
        Ok(None)
    } else {
        if len > limits.max_string_bytes as u64 {
            return Err(Error::StringTooLarge);
        }
        if len > available {
            return Err(Error::Truncated);
        }
        let text = &block[*pos..*pos + len as usize];
        if !text.is_ascii() && core::str::from_utf8(text).is_err() {
            return Err(Error::InvalidUtf8);
        }
        if is_hex_compactable(text) {
            return Err(Error::NonCanonicalHex);
        }
        *pos += len as usize;
        Ok(Some(len as usize))
    }
}

/// Reads a varint of verified bytes (no checks needed; never panics).
#[inline]
fn read_verified(bytes: &[u8], pos: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0u32;
    while let Some(&b) = bytes.get(*pos) {
        *pos += 1;
        value |= ((b & 0x7f) as u64) << (shift & 63);
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    value
}

/// Text of a verified record.
#[inline]
fn verified_str(bytes: &[u8]) -> &str {
    debug_assert!(core::str::from_utf8(bytes).is_ok());
    // SAFETY: these bytes are a text element of a record that
    // `EventView::decode_with` validated as UTF-8; views, tags and elements
    // are only created from such records and slice the same ranges.
    unsafe { core::str::from_utf8_unchecked(bytes) }
}

/// Iterator over the tags of an [`EventView`].
#[derive(Clone, Debug)]
pub struct Tags<'a> {
    block: &'a [u8],
    pos: usize,
    remaining: usize,
}

impl<'a> Iterator for Tags<'a> {
    type Item = TagView<'a>;

    #[inline]
    fn next(&mut self) -> Option<TagView<'a>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let header = read_verified(self.block, &mut self.pos);
        let len = (header >> 1) as usize;
        let short = header & 1 == 1;
        let start = self.pos;
        let mut rest = len;
        if short {
            self.pos += 1;
            rest = rest.saturating_sub(1);
        }
        for _ in 0..rest {
            skip_element(self.block, &mut self.pos);
        }
        let end = self.pos.min(self.block.len());
        Some(TagView {
            bytes: self.block.get(start..end).unwrap_or_default(),
            len,
            short,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Tags<'_> {}

#[inline]
fn skip_element(block: &[u8], pos: &mut usize) {
    let header = read_verified(block, pos);
    let len = (header >> 1) as usize;
    *pos += if header & 1 == 1 && len == 0 { 32 } else { len };
}

/// One tag of an [`EventView`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagView<'a> {
    bytes: &'a [u8],
    len: usize,
    short: bool,
}

impl<'a> TagView<'a> {
    /// Number of elements, name included (at least 1).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: tags have a name.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Iterates over the elements, name first.
    pub fn iter(&self) -> Elements<'a> {
        Elements {
            bytes: self.bytes,
            pos: 0,
            remaining: self.len,
            short_name: self.short,
        }
    }

    /// The name (first element).
    pub fn name(&self) -> Value<'a> {
        self.iter().next().unwrap_or(Value::Text(""))
    }

    /// The first value (second element), the one NIP-01 indexes.
    pub fn first_value(&self) -> Option<Value<'a>> {
        self.iter().nth(1)
    }

    /// The elements as an owned [`Tag`].
    pub fn to_tag(&self) -> Tag {
        Tag::new(self.iter().map(|v| v.to_str().into_owned()).collect())
            .expect("decoded tags are never empty")
    }
}

/// Iterator over the elements of a [`TagView`].
#[derive(Clone, Debug)]
pub struct Elements<'a> {
    bytes: &'a [u8],
    pos: usize,
    remaining: usize,
    short_name: bool,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Value<'a>;

    #[inline]
    fn next(&mut self) -> Option<Value<'a>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        if self.short_name {
            self.short_name = false;
            let name = self.bytes.get(self.pos..self.pos + 1).unwrap_or_default();
            self.pos += 1;
            return Some(Value::Text(verified_str(name)));
        }
        let header = read_verified(self.bytes, &mut self.pos);
        let len = (header >> 1) as usize;
        let hex = header & 1 == 1;
        let n = if hex && len == 0 { 32 } else { len };
        let payload = self.bytes.get(self.pos..self.pos + n).unwrap_or_default();
        self.pos += n;
        Some(if hex {
            Value::Hex(payload)
        } else {
            Value::Text(verified_str(payload))
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Elements<'_> {}

/// A tag element as stored: text, or the bytes of a lowercase hex string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// A string stored as text.
    Text(&'a str),
    /// A lowercase hex string stored as its bytes.
    Hex(&'a [u8]),
}

impl<'a> Value<'a> {
    /// The string value (hex values are re-encoded in lowercase).
    pub fn to_str(&self) -> Cow<'a, str> {
        match *self {
            Value::Text(s) => Cow::Borrowed(s),
            Value::Hex(b) => Cow::Owned(hex::encode(b)),
        }
    }

    /// The string value, encoding a hex value of up to 64 bytes into `buf`
    /// instead of a new allocation (for tests run on every tag).
    pub fn to_str_in<'b>(&self, buf: &'b mut [u8; 128]) -> Cow<'b, str>
    where
        'a: 'b,
    {
        match *self {
            Value::Text(s) => Cow::Borrowed(s),
            Value::Hex(b) if b.len() <= 64 => {
                let out = &mut buf[..2 * b.len()];
                encode_hex(b, out);
                // Hex digits are ASCII.
                Cow::Borrowed(std::str::from_utf8(out).unwrap_or_default())
            }
            Value::Hex(b) => Cow::Owned(hex::encode(b)),
        }
    }

    /// Length of the string value in bytes.
    pub fn text_len(&self) -> usize {
        match self {
            Value::Text(s) => s.len(),
            Value::Hex(b) => 2 * b.len(),
        }
    }

    /// Compares the string value with `other` without allocating.
    pub fn eq_str(&self, other: &str) -> bool {
        match *self {
            Value::Text(s) => s == other,
            Value::Hex(b) => {
                let o = other.as_bytes();
                o.len() == 2 * b.len() && {
                    let mut buf = [0u8; 128];
                    b.chunks(64).zip(o.chunks(128)).all(|(chunk, text)| {
                        let out = &mut buf[..2 * chunk.len()];
                        hex::encode_to_slice(chunk, out);
                        out == text
                    })
                }
            }
        }
    }

    /// Writes the canonical JSON string body (quotes excluded).
    #[inline]
    pub fn write_json<S: Sink + ?Sized>(&self, out: &mut S) {
        match *self {
            Value::Text(s) => write_escaped(out, s),
            Value::Hex(b) => {
                let mut buf = [0u8; 128];
                for chunk in b.chunks(64) {
                    let text = &mut buf[..2 * chunk.len()];
                    hex::encode_to_slice(chunk, text);
                    out.put(text);
                }
            }
        }
    }
}

/// Lowercase hex digit pairs of every byte value.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut table = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = [DIGITS[i >> 4], DIGITS[i & 0xf]];
        i += 1;
    }
    table
};

const RENDER_BUF: usize = 4096;

/// Renders tag JSON into a stack buffer and hands it to the sink in large
/// pieces: a hash sink then sees a few big writes instead of five small ones
/// per tag, which is most of the cost of the id of a follow list.
struct Renderer {
    buf: [u8; RENDER_BUF],
    len: usize,
}

impl Renderer {
    #[inline]
    fn flush<S: Sink + ?Sized>(&mut self, out: &mut S) {
        if self.len > 0 {
            out.put(&self.buf[..self.len]);
            self.len = 0;
        }
    }

    /// Makes room for `n` bytes; false if they can never fit.
    #[inline]
    fn room<S: Sink + ?Sized>(&mut self, out: &mut S, n: usize) -> bool {
        if self.len + n > RENDER_BUF {
            self.flush(out);
        }
        n <= RENDER_BUF
    }

    #[inline]
    fn small<S: Sink + ?Sized>(&mut self, out: &mut S, bytes: &[u8]) {
        if self.room(out, bytes.len()) {
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        } else {
            out.put(bytes);
        }
    }

    #[inline]
    fn value<S: Sink + ?Sized>(&mut self, out: &mut S, value: Value<'_>) {
        match value {
            Value::Hex(bytes) if self.room(out, 2 * bytes.len()) => {
                encode_hex(bytes, &mut self.buf[self.len..self.len + 2 * bytes.len()]);
                self.len += 2 * bytes.len();
            }
            Value::Text(text) if !needs_escape(text.as_bytes()) => self.small(out, text.as_bytes()),
            other => {
                self.flush(out);
                other.write_json(out);
            }
        }
    }
}

/// True if the canonical JSON of `text` differs from its bytes: some byte is
/// below 0x20, `"` or `\\`. Eight bytes at a time.
#[inline]
fn needs_escape(text: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Nonzero iff some byte of `x` is zero; `x - 0x20..` likewise for a
    // byte below 0x20 (the classic has-zero / has-less tests, exact as "any").
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut chunks = text.chunks_exact(8);
    for chunk in chunks.by_ref() {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        if below_space | zero(x ^ (ONES * b'"' as u64)) | zero(x ^ (ONES * b'\\' as u64)) != 0 {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// Lowercase hex of `bytes` into `out` (twice as long).
#[inline]
fn encode_hex(bytes: &[u8], out: &mut [u8]) {
    debug_assert_eq!(out.len(), 2 * bytes.len());
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline. Each iteration loads
        // 16 bytes at `done` with `done + 16 <= bytes.len()` and stores 32
        // bytes at `2 * done` with `2 * done + 32 <= out.len()`.
        unsafe {
            let low4 = _mm_set1_epi8(0x0f);
            let nine = _mm_set1_epi8(9);
            let zero = _mm_set1_epi8(b'0' as i8);
            let gap = _mm_set1_epi8((b'a' - b'0' - 10) as i8);
            let ascii = |n: __m128i| {
                let letters = _mm_and_si128(_mm_cmpgt_epi8(n, nine), gap);
                _mm_add_epi8(_mm_add_epi8(n, zero), letters)
            };
            while done + 16 <= bytes.len() {
                let v = _mm_loadu_si128(bytes.as_ptr().add(done) as *const __m128i);
                let hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
                let lo = _mm_and_si128(v, low4);
                let first = ascii(_mm_unpacklo_epi8(hi, lo));
                let second = ascii(_mm_unpackhi_epi8(hi, lo));
                let dst = out.as_mut_ptr().add(2 * done);
                _mm_storeu_si128(dst as *mut __m128i, first);
                _mm_storeu_si128(dst.add(16) as *mut __m128i, second);
                done += 16;
            }
        }
    }
    for (pair, b) in out[2 * done..].chunks_exact_mut(2).zip(&bytes[done..]) {
        pair.copy_from_slice(&HEX_PAIRS[*b as usize]);
    }
}

impl PreimageFields for EventView<'_> {
    fn pubkey(&self) -> &PublicKey {
        &self.pubkey
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn kind(&self) -> Kind {
        self.kind
    }
    fn write_tags_json<S: Sink + ?Sized>(&self, out: &mut S) {
        let mut r = Renderer {
            buf: [0; RENDER_BUF],
            len: 0,
        };
        r.small(out, b"[");
        for (i, tag) in self.tags().enumerate() {
            r.small(out, if i == 0 { b"[\"" } else { b",[\"" });
            for (j, value) in tag.iter().enumerate() {
                if j > 0 {
                    r.small(out, b"\",\"");
                }
                r.value(out, value);
            }
            r.small(out, b"\"]");
        }
        r.small(out, b"]");
        r.flush(out);
    }
    fn write_content_json<S: Sink + ?Sized>(&self, out: &mut S) {
        write_escaped(out, self.content);
    }
    fn any_tag(&self, visit: &mut dyn FnMut(&str, Option<&str>) -> bool) -> bool {
        // Hex values (ids and pubkeys: most tags) are spelled out on the
        // stack: a follow list has hundreds.
        let (mut name_buf, mut value_buf) = ([0u8; 128], [0u8; 128]);
        self.tags().any(|tag| {
            let mut elements = tag.iter();
            let name = elements
                .next()
                .map(|v| v.to_str_in(&mut name_buf))
                .unwrap_or_default();
            let value = elements.next().map(|v| v.to_str_in(&mut value_buf));
            visit(&name, value.as_deref())
        })
    }
    fn json_size_hint(&self) -> usize {
        // Hex doubles, headers become quotes and commas, escapes are rare.
        2 * self.tags.len() + 4 * self.tag_count + self.content.len() + self.content.len() / 8 + 320
    }
}

impl SignedFields for EventView<'_> {
    fn id(&self) -> &EventId {
        &self.id
    }
    fn sig(&self) -> &Signature {
        &self.sig
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_spell_out_in_a_buffer_or_allocate() {
        let mut buf = [0u8; 128];
        assert_eq!(Value::Text("nostr").to_str_in(&mut buf), "nostr");
        let raw: Vec<u8> = (0..64u8).collect();
        for len in [0, 1, 32, 64] {
            let value = Value::Hex(&raw[..len]);
            let expected = hex::encode(&raw[..len]);
            assert_eq!(value.to_str_in(&mut buf), expected.as_str());
            assert!(matches!(value.to_str_in(&mut buf), Cow::Borrowed(_)));
        }
        let long = [0xabu8; 65];
        assert_eq!(Value::Hex(&long).to_str_in(&mut buf), "ab".repeat(65));
    }

    #[test]
    fn hex_encoding_matches_the_reference() {
        let bytes: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for len in [0, 1, 15, 16, 17, 31, 32, 33, 64, 100, 512] {
            let mut out = vec![0u8; 2 * len];
            encode_hex(&bytes[..len], &mut out);
            assert_eq!(out, hex::encode(&bytes[..len]).into_bytes(), "{len}");
        }
    }

    #[test]
    fn escape_detection_matches_the_scalar_rule() {
        let scalar = |t: &[u8]| t.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        let mut text: Vec<u8> = b"plain text with \xc3\xa9 and more plain text".to_vec();
        for special in 0..=255u8 {
            for at in [0, 7, 8, 15, 20, text.len() - 1] {
                let saved = text[at];
                text[at] = special;
                for len in [at + 1, text.len()] {
                    assert_eq!(
                        needs_escape(&text[..len]),
                        scalar(&text[..len]),
                        "{special} at {at}"
                    );
                }
                text[at] = saved;
            }
        }
    }
}
