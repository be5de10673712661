//! Encoding events into records: one pass, one allocation. Lengths whose
//! size is unknown in advance get a reserved slot that is patched afterwards
//! (moving the bytes behind it only when the estimate was wrong).

use nostrwire_event::{
    Event, EventId, EventRef, Kind, PreimageFields, PublicKey, Signature, SignedFields, Timestamp,
};

use crate::error::{Error, Result};
use crate::layout::{is_hex_compactable, EVENT_V1, PREFIX_LEN};
use crate::limits::Limits;
use crate::unescape::unescape_into;
use crate::varint;

/// Encodes a parsed JSON event as a record.
///
/// The record decodes under [`Limits::from_json`] of the limits the event
/// was parsed with (with the defaults on both sides, under
/// [`Limits::DEFAULT`]): counts carry over, and neither the record nor any
/// string in it is longer than its JSON.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record).
pub fn encode_json_event(event: &EventRef<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_json_event_into(event, &mut out);
    out
}

/// Appends the record of a parsed JSON event to `out`.
///
/// String values are stored unescaped; the JSON escaping is re-applied
/// canonically on output, so any spelling of the same event yields the same
/// record.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record),
/// [§5](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#5-tag-block),
/// [§6](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#6-tag-elements-and-hex-compaction),
/// [§7](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#7-content).
pub fn encode_json_event_into(event: &EventRef<'_>, out: &mut Vec<u8>) {
    let tags = event.tags();
    let content = event.content().raw().as_bytes();
    // Unescaped values and binary headers never outgrow their JSON spelling
    // (a header is at most 3 bytes below 1 MiB; quotes and comma are 3).
    out.reserve(PREFIX_LEN + 3 * varint::MAX_LEN + tags.raw().len() + content.len());
    put_prefix(
        out,
        event.id(),
        event.pubkey(),
        event.sig(),
        event.created_at(),
        event.kind(),
    );

    let block = out.len();
    let reserved = varint::len(tags.raw().len() as u64);
    out.resize(block + reserved, 0);
    varint::push(out, tags.len() as u64);
    if tags.is_canonical() {
        put_canonical_tags(tags.raw().as_bytes(), out);
    } else {
        for tag in tags.iter() {
            let header = out.len();
            out.push(0);
            let mut elements = 0u64;
            let mut short = false;
            for element in tag.iter() {
                put_json_element(
                    out,
                    element.raw().as_bytes(),
                    element.is_escaped(),
                    elements == 0,
                    &mut short,
                );
                elements += 1;
            }
            patch_length(out, header, 1, (elements << 1) | short as u64);
        }
    }
    let block_len = out.len() - block - reserved;
    patch_length(out, block, reserved, block_len as u64);

    if event.content().is_escaped() {
        let at = out.len();
        let reserved = varint::len(content.len() as u64);
        out.resize(at + reserved, 0);
        unescape_into(content, out);
        let len = out.len() - at - reserved;
        patch_length(out, at, reserved, len as u64);
    } else {
        varint::push(out, content.len() as u64);
        out.extend_from_slice(content);
    }
}

/// Writes one element given as the text between its JSON quotes; a one-byte
/// name takes the short form (and sets `short`).
#[inline]
fn put_json_element(out: &mut Vec<u8>, raw: &[u8], escaped: bool, name: bool, short: &mut bool) {
    if escaped {
        let start = out.len();
        unescape_into(raw, out);
        if name && out.len() - start == 1 && out[start] < 0x80 {
            *short = true;
        } else {
            finish_element_at(out, start);
        }
    } else if name && raw.len() == 1 {
        out.push(raw[0]);
        *short = true;
    } else {
        put_element(out, raw);
    }
}

/// Encodes the tags from their JSON text in a single scan. Only for text the
/// parser found canonical: no whitespace, and the only escapes are `\"`,
/// `\\`, `\b \t \n \f \r` and `\u00xx`. Never panics on other input.
fn put_canonical_tags(raw: &[u8], out: &mut Vec<u8>) {
    // Shape: `[` then tags `[` `"…"` (`,"…"`)* `]` separated by `,`, then `]`.
    let mut i = 1;
    while raw.get(i) == Some(&b'[') {
        i += 1;
        let header = out.len();
        out.push(0);
        let mut elements = 0u64;
        let mut short = false;
        while raw.get(i) == Some(&b'"') {
            i += 1;
            let start = i;
            let mut escaped = false;
            loop {
                i = find_quote_or_backslash(raw, i);
                match raw.get(i) {
                    Some(b'\\') => {
                        escaped = true;
                        i += if raw.get(i + 1) == Some(&b'u') { 6 } else { 2 };
                    }
                    _ => break,
                }
            }
            let end = i.min(raw.len());
            put_json_element(
                out,
                &raw[start.min(end)..end],
                escaped,
                elements == 0,
                &mut short,
            );
            elements += 1;
            // Past the closing quote: `,` before another element, or `]`.
            i += 1;
            if raw.get(i) == Some(&b',') {
                i += 1;
            }
        }
        patch_length(out, header, 1, (elements << 1) | short as u64);
        // Past the tag's `]`, and the `,` before the next tag.
        i += 1;
        if raw.get(i) == Some(&b',') {
            i += 1;
        }
    }
}

/// Position of the first `"` or `\\` at or after `from`, or `raw.len()`;
/// eight bytes at a time.
#[inline]
fn find_quote_or_backslash(raw: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut i = from;
    while i + 8 <= raw.len() {
        let x = u64::from_le_bytes(raw[i..i + 8].try_into().expect("8 bytes"));
        // The lowest flagged byte is a true match (borrows only run upward).
        let hits = zero(x ^ (ONES * b'"' as u64)) | zero(x ^ (ONES * b'\\' as u64));
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < raw.len() && raw[i] != b'"' && raw[i] != b'\\' {
        i += 1;
    }
    i
}

/// Encodes an owned event as a record.
///
/// # Panics
///
/// If the event is over [`Limits::DEFAULT`] (more than 20,000 tags, a tag of
/// more than 1,000 elements, a string or the record over 1 MiB): its record
/// would not decode. [`try_encode_event`] returns the error instead.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record).
#[track_caller]
pub fn encode_event(event: &Event) -> Vec<u8> {
    let mut out = Vec::new();
    encode_event_into(event, &mut out);
    out
}

/// Appends the record of an owned event to `out`.
///
/// # Panics
///
/// If the event is over [`Limits::DEFAULT`], as [`encode_event`].
#[track_caller]
pub fn encode_event_into(event: &Event, out: &mut Vec<u8>) {
    if let Err(e) = try_encode_event_into(event, &Limits::DEFAULT, out) {
        panic!("event over the default decoder limits: {e} (use try_encode_event)");
    }
}

/// Encodes an owned event as a record that decodes under `limits`, or
/// returns the error [`EventView::decode_with`](crate::EventView::decode_with)
/// would give its record.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record),
/// [§9](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#9-limits).
pub fn try_encode_event(event: &Event, limits: &Limits) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    try_encode_event_into(event, limits, &mut out)?;
    Ok(out)
}

/// Appends the record of an owned event to `out` if it decodes under
/// `limits`; otherwise leaves `out` as it was and returns the decoder's error.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record),
/// [§5](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#5-tag-block),
/// [§6](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#6-tag-elements-and-hex-compaction),
/// [§7](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#7-content),
/// [§9](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#9-limits).
pub fn try_encode_event_into(event: &Event, limits: &Limits, out: &mut Vec<u8>) -> Result<()> {
    let start = out.len();
    let (tag_bytes, over) = measure(event, limits);
    encode_owned(event, tag_bytes, out);
    // The decoder checks the record's size before anything inside it.
    let error = if out.len() - start > limits.max_record_bytes {
        Some(Error::RecordTooLarge)
    } else {
        over
    };
    match error {
        Some(e) => {
            out.truncate(start);
            Err(e)
        }
        None => Ok(()),
    }
}

/// The tag block's size estimate, and the first limit the event is over,
/// in the order the decoder checks them
/// ([spec §9](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#9-limits)).
fn measure(event: &Event, limits: &Limits) -> (usize, Option<Error>) {
    let mut over = (event.tags.len() > limits.max_tags).then_some(Error::TooManyTags);
    let mut tag_bytes = 0;
    for tag in &event.tags {
        let elements = tag.as_slice();
        if over.is_none() && elements.len() > limits.max_tag_elements {
            over = Some(Error::TooManyTagElements);
        }
        for (i, element) in elements.iter().enumerate() {
            // A one-byte name takes the short form, which has no length.
            // Any other element is text, or hex counted at its text length.
            let short = i == 0 && element.len() == 1;
            if over.is_none() && !short && element.len() > limits.max_string_bytes {
                over = Some(Error::StringTooLarge);
            }
            tag_bytes += element.len() + 3;
        }
        tag_bytes += 3;
    }
    if over.is_none() && event.content.len() > limits.max_string_bytes {
        over = Some(Error::StringTooLarge);
    }
    (tag_bytes, over)
}

fn encode_owned(event: &Event, tag_bytes: usize, out: &mut Vec<u8>) {
    out.reserve(PREFIX_LEN + 3 * varint::MAX_LEN + tag_bytes + event.content.len());
    put_prefix(
        out,
        &event.id,
        &event.pubkey,
        &event.sig,
        event.created_at,
        event.kind,
    );

    let block = out.len();
    let reserved = varint::len(tag_bytes as u64);
    out.resize(block + reserved, 0);
    varint::push(out, event.tags.len() as u64);
    for tag in &event.tags {
        let elements = tag.as_slice();
        let name = elements[0].as_bytes();
        let short = name.len() == 1;
        varint::push(out, ((elements.len() as u64) << 1) | short as u64);
        if short {
            out.push(name[0]);
        } else {
            put_element(out, name);
        }
        for value in &elements[1..] {
            put_element(out, value.as_bytes());
        }
    }
    let block_len = out.len() - block - reserved;
    patch_length(out, block, reserved, block_len as u64);

    varint::push(out, event.content.len() as u64);
    out.extend_from_slice(event.content.as_bytes());
}

/// The fixed prefix ([spec §3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record)).
fn put_prefix(
    out: &mut Vec<u8>,
    id: &EventId,
    pubkey: &PublicKey,
    sig: &Signature,
    created_at: Timestamp,
    kind: Kind,
) {
    out.push(EVENT_V1);
    out.extend_from_slice(&kind.as_u16().to_le_bytes());
    out.extend_from_slice(&created_at.as_u64().to_le_bytes());
    out.extend_from_slice(pubkey.as_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(sig.as_bytes());
}

/// Header of a hex element of `n` bytes ([spec §6](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#6-tag-elements-and-hex-compaction)).
#[inline]
fn hex_header(n: usize) -> u64 {
    if n == 32 {
        1
    } else {
        ((n as u64) << 1) | 1
    }
}

/// Value of a lowercase hex digit already known to be valid.
#[inline]
fn nibble(b: u8) -> u8 {
    // '0'..'9' are 0x30..0x39, 'a'..'f' are 0x61..0x66.
    (b & 0x0f) + 9 * (b >> 6)
}

/// Writes one element: hex bytes if compactable, text otherwise.
#[inline]
fn put_element(out: &mut Vec<u8>, value: &[u8]) {
    // Decoding validates as it goes; most text fails on its first byte.
    if !value.is_empty() && value.len() % 2 == 0 && DECODE[value[0] as usize] != INVALID {
        let start = out.len();
        let n = value.len() / 2;
        varint::push(out, hex_header(n));
        let payload = out.len();
        out.resize(payload + n, 0);
        if decode_hex(value, &mut out[payload..]) {
            return;
        }
        out.truncate(start);
    }
    varint::push(out, (value.len() as u64) << 1);
    out.extend_from_slice(value);
}

const INVALID: u8 = 0xff;

/// Value of each byte as a lowercase hex digit, or [`INVALID`].
const DECODE: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// Decodes lowercase hex `text` into `out` (half as long); false if a
/// character is not `0-9a-f` (`out` then holds garbage).
#[inline]
fn decode_hex(text: &[u8], out: &mut [u8]) -> bool {
    debug_assert_eq!(text.len(), 2 * out.len());
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline. Each iteration loads
        // 32 bytes at `2 * done` with `2 * done + 32 <= text.len()` and stores
        // 16 bytes at `done` with `done + 16 <= out.len()`.
        unsafe {
            // Nibble values and a validity mask for 16 characters. Bytes of
            // 0x80 and above are negative as i8, so they fail both ranges.
            let nibbles = |c: __m128i| {
                let digit = _mm_and_si128(
                    _mm_cmpgt_epi8(c, _mm_set1_epi8(b'0' as i8 - 1)),
                    _mm_cmpgt_epi8(_mm_set1_epi8(b'9' as i8 + 1), c),
                );
                let lower = _mm_and_si128(
                    _mm_cmpgt_epi8(c, _mm_set1_epi8(b'a' as i8 - 1)),
                    _mm_cmpgt_epi8(_mm_set1_epi8(b'f' as i8 + 1), c),
                );
                let value = _mm_sub_epi8(
                    _mm_sub_epi8(c, _mm_set1_epi8(b'0' as i8)),
                    _mm_and_si128(lower, _mm_set1_epi8((b'a' - b'0' - 10) as i8)),
                );
                (value, _mm_or_si128(digit, lower))
            };
            // 16-bit lanes hold (first nibble, second nibble); make each the byte.
            let pairs = |n: __m128i| {
                let high = _mm_slli_epi16(_mm_and_si128(n, _mm_set1_epi16(0x00ff)), 4);
                _mm_or_si128(high, _mm_srli_epi16(n, 8))
            };
            while 2 * done + 32 <= text.len() {
                let src = text.as_ptr().add(2 * done);
                let (a, a_ok) = nibbles(_mm_loadu_si128(src as *const __m128i));
                let (b, b_ok) = nibbles(_mm_loadu_si128(src.add(16) as *const __m128i));
                if _mm_movemask_epi8(_mm_and_si128(a_ok, b_ok)) != 0xffff {
                    return false;
                }
                let bytes = _mm_packus_epi16(pairs(a), pairs(b));
                _mm_storeu_si128(out.as_mut_ptr().add(done) as *mut __m128i, bytes);
                done += 16;
            }
        }
    }
    let mut bad = 0u8;
    for (byte, pair) in out[done..].iter_mut().zip(text[2 * done..].chunks_exact(2)) {
        let (hi, lo) = (DECODE[pair[0] as usize], DECODE[pair[1] as usize]);
        bad |= hi | lo;
        *byte = (hi << 4) | (lo & 0x0f);
    }
    bad & 0x80 == 0
}

/// Turns the unescaped value at `out[start..]` into a complete element
/// (header, then text or hex bytes).
fn finish_element_at(out: &mut Vec<u8>, start: usize) {
    let len = out.len() - start;
    if is_hex_compactable(&out[start..]) {
        // Decoding in place is safe: byte i is written after reading 2i and 2i+1.
        for i in 0..len / 2 {
            out[start + i] = (nibble(out[start + 2 * i]) << 4) | nibble(out[start + 2 * i + 1]);
        }
        out.truncate(start + len / 2);
        patch_length(out, start, 0, hex_header(len / 2));
    } else {
        patch_length(out, start, 0, (len as u64) << 1);
    }
}

/// Writes `value` as a varint into the `reserved` bytes at `at`, moving what
/// follows when the varint needs a different number of bytes.
fn patch_length(out: &mut Vec<u8>, at: usize, reserved: usize, value: u64) {
    let need = varint::len(value);
    if need != reserved {
        let payload = at + reserved;
        let end = out.len();
        if need < reserved {
            out.copy_within(payload..end, at + need);
            out.truncate(end - (reserved - need));
        } else {
            out.resize(end + (need - reserved), 0);
            out.copy_within(payload..end, at + need);
        }
    }
    varint::write(&mut out[at..at + need], value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_length_moves_both_ways() {
        let mut v = vec![9, 0, 0, 0, 1, 2, 3];
        patch_length(&mut v, 1, 3, 5);
        assert_eq!(v, [9, 5, 1, 2, 3]);
        let mut v = vec![9, 0, 1, 2];
        patch_length(&mut v, 1, 1, 300);
        assert_eq!(v, [9, 0xac, 0x02, 1, 2]);
        let mut v = vec![1, 2];
        patch_length(&mut v, 0, 0, 4);
        assert_eq!(v, [4, 1, 2]);
    }

    #[test]
    fn hex_decoding_matches_the_rule() {
        let mut text = nostrwire_event::hex::encode(&(0..=255u8).collect::<Vec<_>>()).into_bytes();
        for len in [2, 30, 32, 34, 62, 64, 66, 96, 512] {
            let mut out = vec![0u8; len / 2];
            assert!(decode_hex(&text[..len], &mut out), "{len}");
            assert_eq!(nostrwire_event::hex::encode(&out).as_bytes(), &text[..len]);
        }
        // Every byte value at every position class is accepted exactly when lowercase hex.
        for at in [0, 1, 15, 16, 31, 33, 63] {
            for b in 0..=255u8 {
                let saved = text[at];
                text[at] = b;
                let mut out = vec![0u8; 32];
                let expected = DECODE[b as usize] != INVALID;
                assert_eq!(
                    decode_hex(&text[..64], &mut out),
                    expected,
                    "byte {b} at {at}"
                );
                text[at] = saved;
            }
        }
    }

    #[test]
    fn canonical_tag_scan_never_panics_on_other_input() {
        let mut state = 0x2545_f491u32;
        let alphabet = b"[],\"\\u0a";
        for len in 0..200 {
            let raw: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    alphabet[state as usize % alphabet.len()]
                })
                .collect();
            put_canonical_tags(&raw, &mut Vec::new());
        }
    }

    #[test]
    fn nibbles() {
        for (i, c) in b"0123456789abcdef".iter().enumerate() {
            assert_eq!(nibble(*c) as usize, i);
        }
    }
}
