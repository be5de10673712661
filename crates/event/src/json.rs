//! JSON strings: scanning, unescaping and the one canonical escaping rule.
//!
//! # The canonical rule (NIP-01 as practised)
//!
//! A string is written between double quotes with exactly these escapes:
//! `\"`, `\\`, the short forms `\b \t \n \f \r`, and `\u00xx` with
//! **lowercase** hex for every other byte below 0x20. Everything else,
//! including `/`, DEL (0x7F), U+2028/U+2029 and astral code points, is copied
//! verbatim as UTF-8. Input escapes are fully decoded before re-serializing.
//!
//! # The raw fast path
//!
//! While scanning, each string records whether its source text is already
//! byte-identical to its canonical form (no escapes other than the ones the
//! rule above produces). Such strings are hashed and written straight from
//! the input without decoding. This is a proof of equality, not trust in the
//! sender: a string with `\/`, `\u00e9` or `\u001F` is not canonical and is
//! decoded and re-escaped.

use std::borrow::Cow;

use crate::error::{Error, ErrorKind};

/// A byte sink for canonical output: a `Vec<u8>` or a hash.
pub trait Sink {
    /// Appends bytes.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Position of the first byte at or after `from` that is `"`, `\` or below 0x20.
#[inline]
pub(crate) fn find_special(bytes: &[u8], from: usize) -> usize {
    let mut ignored = false;
    find_special_impl::<false>(bytes, from, &mut ignored)
}

/// Like [`find_special`], and also sets `non_ascii` if any byte skipped over
/// (or the byte found) is 0x80 or above.
#[inline]
pub(crate) fn find_special_tracking(bytes: &[u8], from: usize, non_ascii: &mut bool) -> usize {
    find_special_impl::<true>(bytes, from, non_ascii)
}

#[inline(always)]
fn find_special_impl<const TRACK: bool>(bytes: &[u8], from: usize, non_ascii: &mut bool) -> usize {
    let mut i = from;
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() - i >= 32 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected at run time.
            return unsafe { find_special_avx2::<TRACK>(bytes, i, non_ascii) };
        }
        use core::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; every load reads 16
        // bytes starting at `i` with `i + 16 <= bytes.len()`.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let control_max = _mm_set1_epi8(0x1f);
            let mut high = 0i32;
            while i + 16 <= bytes.len() {
                let chunk = _mm_loadu_si128(bytes.as_ptr().add(i) as *const __m128i);
                let is_quote = _mm_cmpeq_epi8(chunk, quote);
                let is_backslash = _mm_cmpeq_epi8(chunk, backslash);
                // b <= 0x1f (unsigned) iff min(b, 0x1f) == b.
                let is_control = _mm_cmpeq_epi8(_mm_min_epu8(chunk, control_max), chunk);
                let hits = _mm_or_si128(_mm_or_si128(is_quote, is_backslash), is_control);
                let mask = _mm_movemask_epi8(hits) as u32;
                if TRACK {
                    high |= _mm_movemask_epi8(chunk);
                }
                if mask != 0 {
                    if TRACK && high != 0 {
                        *non_ascii = true;
                    }
                    return i + mask.trailing_zeros() as usize;
                }
                i += 16;
            }
            if TRACK && high != 0 {
                *non_ascii = true;
            }
        }
    }
    find_special_scalar::<TRACK>(bytes, i, non_ascii)
}

#[inline(always)]
fn find_special_scalar<const TRACK: bool>(
    bytes: &[u8],
    mut i: usize,
    non_ascii: &mut bool,
) -> usize {
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'"' || b == b'\\' || b < 0x20 {
            return i;
        }
        if TRACK && b >= 0x80 {
            *non_ascii = true;
        }
        i += 1;
    }
    i
}

/// The AVX2 form of [`find_special_impl`]: 32 bytes per step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn find_special_avx2<const TRACK: bool>(
    bytes: &[u8],
    mut i: usize,
    non_ascii: &mut bool,
) -> usize {
    use core::arch::x86_64::*;
    let quote = _mm256_set1_epi8(b'"' as i8);
    let backslash = _mm256_set1_epi8(b'\\' as i8);
    let control_max = _mm256_set1_epi8(0x1f);
    let mut high = 0i32;
    while i + 32 <= bytes.len() {
        // SAFETY: `i + 32 <= bytes.len()`.
        let chunk = unsafe { _mm256_loadu_si256(bytes.as_ptr().add(i) as *const __m256i) };
        let is_quote = _mm256_cmpeq_epi8(chunk, quote);
        let is_backslash = _mm256_cmpeq_epi8(chunk, backslash);
        let is_control = _mm256_cmpeq_epi8(_mm256_min_epu8(chunk, control_max), chunk);
        let hits = _mm256_or_si256(_mm256_or_si256(is_quote, is_backslash), is_control);
        let mask = _mm256_movemask_epi8(hits) as u32;
        if TRACK {
            high |= _mm256_movemask_epi8(chunk);
        }
        if mask != 0 {
            if TRACK && high != 0 {
                *non_ascii = true;
            }
            return i + mask.trailing_zeros() as usize;
        }
        i += 32;
    }
    if TRACK && high != 0 {
        *non_ascii = true;
    }
    find_special_scalar::<TRACK>(bytes, i, non_ascii)
}

/// A string as it appears in validated JSON input: the text between the quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonStr<'a> {
    raw: &'a str,
    escaped: bool,
    canonical: bool,
}

impl<'a> JsonStr<'a> {
    /// The source text between the quotes, escapes included.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// True if the source text has backslash escapes.
    pub fn is_escaped(&self) -> bool {
        self.escaped
    }

    /// True if the source text is byte-identical to the canonical escaping.
    pub fn is_canonical(&self) -> bool {
        self.canonical
    }

    /// The decoded value; borrowed when the source had no escapes.
    pub fn value(&self) -> Cow<'a, str> {
        if self.escaped {
            Cow::Owned(unescape_validated(self.raw))
        } else {
            Cow::Borrowed(self.raw)
        }
    }

    /// Compares the decoded value with `other` without allocating when possible.
    pub fn eq_str(&self, other: &str) -> bool {
        if self.escaped {
            unescape_validated(self.raw) == other
        } else {
            self.raw == other
        }
    }

    /// Writes the canonical JSON form, quotes excluded.
    pub fn write_canonical<S: Sink + ?Sized>(&self, out: &mut S) {
        if self.canonical {
            out.put(self.raw.as_bytes());
        } else {
            write_escaped(out, &unescape_validated(self.raw));
        }
    }
}

/// Writes `s` with the canonical escaping rule, quotes excluded.
pub fn write_escaped<S: Sink + ?Sized>(out: &mut S, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    loop {
        let i = find_special(bytes, start);
        if i > start {
            out.put(&bytes[start..i]);
        }
        if i == bytes.len() {
            return;
        }
        let b = bytes[i];
        match b {
            b'"' => out.put(b"\\\""),
            b'\\' => out.put(b"\\\\"),
            0x08 => out.put(b"\\b"),
            0x09 => out.put(b"\\t"),
            0x0a => out.put(b"\\n"),
            0x0c => out.put(b"\\f"),
            0x0d => out.put(b"\\r"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ]);
            }
        }
        start = i + 1;
    }
}

/// Writes `s` as a quoted canonical JSON string.
pub fn write_quoted<S: Sink + ?Sized>(out: &mut S, s: &str) {
    out.put(b"\"");
    write_escaped(out, s);
    out.put(b"\"");
}

/// Result of scanning one string in the input.
pub(crate) struct Scanned<'a> {
    pub(crate) value: JsonStr<'a>,
    /// Offset just past the closing quote.
    pub(crate) end: usize,
}

fn hex_val(b: u8) -> Option<u16> {
    match b {
        b'0'..=b'9' => Some((b - b'0') as u16),
        b'a'..=b'f' => Some((b - b'a' + 10) as u16),
        b'A'..=b'F' => Some((b - b'A' + 10) as u16),
        _ => None,
    }
}

fn read_u4(src: &[u8], at: usize) -> Result<u16, Error> {
    if at + 4 > src.len() {
        return Err(Error::at(ErrorKind::InvalidEscape, at));
    }
    let mut v = 0u16;
    for k in 0..4 {
        let d = hex_val(src[at + k]).ok_or(Error::at(ErrorKind::InvalidEscape, at + k))?;
        v = (v << 4) | d;
    }
    Ok(v)
}

/// Scans a string whose opening quote is at `start`.
///
/// Validates UTF-8 (only when a non-ASCII byte is present), escapes (including surrogate pairing) and rejects raw control
/// characters; records whether the text is already canonical.
pub(crate) fn scan_string(
    bytes: &[u8],
    start: usize,
    max_len: usize,
) -> Result<Scanned<'_>, Error> {
    debug_assert_eq!(bytes[start], b'"');
    let body = start + 1;
    let mut i = body;
    let mut escaped = false;
    let mut canonical = true;
    let mut non_ascii = false;
    loop {
        i = find_special_tracking(bytes, i, &mut non_ascii);
        if i >= bytes.len() {
            return Err(Error::at(ErrorKind::Syntax, bytes.len()));
        }
        match bytes[i] {
            b'"' => break,
            b'\\' => {
                escaped = true;
                let Some(&e) = bytes.get(i + 1) else {
                    return Err(Error::at(ErrorKind::Syntax, bytes.len()));
                };
                match e {
                    b'"' | b'\\' | b'b' | b't' | b'n' | b'f' | b'r' => i += 2,
                    b'/' => {
                        canonical = false;
                        i += 2;
                    }
                    b'u' => {
                        let cu = read_u4(bytes, i + 2)?;
                        let digits = &bytes[i + 2..i + 6];
                        // Canonical only for C0 characters without a short form,
                        // written as lowercase `\u00xx`.
                        let lowercase = !digits.iter().any(|d| d.is_ascii_uppercase());
                        if cu >= 0x20
                            || matches!(cu, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)
                            || !lowercase
                        {
                            canonical = false;
                        }
                        if (0xD800..0xDC00).contains(&cu) {
                            // High surrogate: must be followed by an escaped low one.
                            let next = i + 6;
                            if bytes.get(next) != Some(&b'\\') || bytes.get(next + 1) != Some(&b'u')
                            {
                                return Err(Error::at(ErrorKind::LoneSurrogate, i));
                            }
                            let low = read_u4(bytes, next + 2)?;
                            if !(0xDC00..0xE000).contains(&low) {
                                return Err(Error::at(ErrorKind::LoneSurrogate, i));
                            }
                            i = next + 6;
                        } else if (0xDC00..0xE000).contains(&cu) {
                            return Err(Error::at(ErrorKind::LoneSurrogate, i));
                        } else {
                            i += 6;
                        }
                    }
                    _ => return Err(Error::at(ErrorKind::InvalidEscape, i)),
                }
            }
            _ => return Err(Error::at(ErrorKind::UnescapedControl, i)),
        }
    }
    if i - body > max_len {
        return Err(Error::at(ErrorKind::TooLarge, body));
    }
    let text = &bytes[body..i];
    let raw = if non_ascii {
        core::str::from_utf8(text)
            .map_err(|e| Error::at(ErrorKind::InvalidUtf8, body + e.valid_up_to()))?
    } else {
        // SAFETY: every byte is below 0x80, and ASCII is UTF-8.
        unsafe { core::str::from_utf8_unchecked(text) }
    };
    Ok(Scanned {
        value: JsonStr {
            raw,
            escaped,
            canonical,
        },
        end: i + 1,
    })
}

/// Decodes the escapes of text already accepted by [`scan_string`].
pub(crate) fn unescape_validated(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        out.push_str(&raw[start..i]);
        let e = bytes[i + 1];
        let mut step = 2;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b't' => '\t',
            b'n' => '\n',
            b'f' => '\u{c}',
            b'r' => '\r',
            _ => {
                let cu = read_u4(bytes, i + 2).expect("validated escape") as u32;
                step = 6;
                let code = if (0xD800..0xDC00).contains(&cu) {
                    let low = read_u4(bytes, i + 8).expect("validated pair") as u32;
                    step = 12;
                    0x10000 + ((cu - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    cu
                };
                char::from_u32(code).expect("validated code point")
            }
        };
        out.push(c);
        i += step;
        start = i;
    }
    out.push_str(&raw[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(s: &str) -> Result<JsonStr<'_>, ErrorKind> {
        scan_string(s.as_bytes(), 0, usize::MAX)
            .map(|s| s.value)
            .map_err(|e| e.kind())
    }

    fn canonical(s: &str) -> String {
        let mut out = Vec::new();
        write_escaped(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escaping_rule() {
        assert_eq!(canonical("a\"b\\c"), r#"a\"b\\c"#);
        assert_eq!(canonical("\u{8}\t\n\u{c}\r"), r"\b\t\n\f\r");
        assert_eq!(canonical("\u{0}\u{1f}\u{b}"), r"\u0000\u001f\u000b");
        assert_eq!(
            canonical("/\u{7f}\u{2028}\u{2029}<>&é😀"),
            "/\u{7f}\u{2028}\u{2029}<>&é😀"
        );
    }

    #[test]
    fn canonical_detection() {
        assert!(scan(r#""plain""#).unwrap().is_canonical());
        assert!(scan(r#""a\nb\u001f""#).unwrap().is_canonical());
        assert!(!scan(r#""a\/b""#).unwrap().is_canonical());
        assert!(!scan(r#""\u001F""#).unwrap().is_canonical());
        assert!(!scan(r#""\u000a""#).unwrap().is_canonical());
        assert!(!scan(r#""\u00e9""#).unwrap().is_canonical());
    }

    #[test]
    fn unescape() {
        let s = scan(r#""\ud83d\ude00 \u00e9\/\"""#).unwrap();
        assert_eq!(s.value(), "😀 é/\"");
        assert_eq!(scan(r#""\ud83d""#), Err(ErrorKind::LoneSurrogate));
        assert_eq!(scan(r#""\ude00""#), Err(ErrorKind::LoneSurrogate));
        assert_eq!(scan(r#""\ud83d\u0041""#), Err(ErrorKind::LoneSurrogate));
        assert_eq!(scan(r#""\x""#), Err(ErrorKind::InvalidEscape));
        assert_eq!(scan(r#""\u12g4""#), Err(ErrorKind::InvalidEscape));
        assert_eq!(scan("\"a\u{1}\""), Err(ErrorKind::UnescapedControl));
        assert_eq!(scan("\"abc"), Err(ErrorKind::Syntax));
    }

    #[test]
    fn utf8_checked_inside_strings() {
        assert_eq!(
            scan_string(b"\"ok \xc3\xa9\"", 0, 99).unwrap().value.raw(),
            "ok é"
        );
        for bad in [
            &b"\"\xff\""[..],
            b"\"0123456789abcdef\xc3\"",
            b"\"\xed\xa0\x80\"",
        ] {
            assert_eq!(
                scan_string(bad, 0, 99).err().map(|e| e.kind()),
                Some(ErrorKind::InvalidUtf8)
            );
        }
    }

    #[test]
    fn utf8_checked_in_long_strings() {
        // Long enough for the 32-byte path, with the non-ASCII byte late.
        let mut ok = b"\"".to_vec();
        ok.extend_from_slice(&[b'a'; 70]);
        ok.extend_from_slice("é".as_bytes());
        ok.extend_from_slice(b"\"");
        assert!(scan_string(&ok, 0, 999).unwrap().value.raw().ends_with('é'));
        let mut bad = ok.clone();
        bad[72] = 0xff;
        assert_eq!(
            scan_string(&bad, 0, 999).err().map(|e| e.kind()),
            Some(ErrorKind::InvalidUtf8)
        );
        let mut early = ok.clone();
        early[3] = 0xc3;
        assert_eq!(
            scan_string(&early, 0, 999).err().map(|e| e.kind()),
            Some(ErrorKind::InvalidUtf8)
        );
    }

    #[test]
    fn find_special_agrees_with_scalar() {
        let mut data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for start in 0..64 {
            let expected = data[start..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .map_or(data.len(), |p| p + start);
            assert_eq!(find_special(&data, start), expected);
        }
        data.iter_mut().for_each(|b| *b = b'a');
        assert_eq!(find_special(&data, 0), data.len());
        data[999] = b'"';
        assert_eq!(find_special(&data, 3), 999);
    }
}
