//! Decoding the escapes of JSON strings the event parser has already
//! validated, straight into the output buffer (no temporary string).

/// Appends the decoded value of `raw` (text between the quotes, escapes
/// validated by the JSON parser) to `out`.
pub(crate) fn unescape_into(raw: &[u8], out: &mut Vec<u8>) {
    let mut start = 0;
    let mut i = 0;
    loop {
        i = find_backslash(raw, i);
        if i >= raw.len() {
            break;
        }
        out.extend_from_slice(&raw[start..i]);
        let (ch, step) = match raw.get(i + 1) {
            Some(b'"') => ('"', 2),
            Some(b'\\') => ('\\', 2),
            Some(b'/') => ('/', 2),
            Some(b'b') => ('\u{8}', 2),
            Some(b't') => ('\t', 2),
            Some(b'n') => ('\n', 2),
            Some(b'f') => ('\u{c}', 2),
            Some(b'r') => ('\r', 2),
            _ => {
                let hi = read_u4(raw, i + 2);
                if (0xD800..0xDC00).contains(&hi) {
                    let lo = read_u4(raw, i + 8);
                    let code = 0x10000 + ((hi - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3ff);
                    (char::from_u32(code).unwrap_or('\u{fffd}'), 12)
                } else {
                    (char::from_u32(hi).unwrap_or('\u{fffd}'), 6)
                }
            }
        };
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        i += step;
        start = i;
    }
    out.extend_from_slice(&raw[start.min(raw.len())..]);
}

/// Position of the first `\\` at or after `from`, or `raw.len()`; eight
/// bytes at a time.
#[inline]
fn find_backslash(raw: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    while i + 8 <= raw.len() {
        let x =
            u64::from_le_bytes(raw[i..i + 8].try_into().expect("8 bytes")) ^ (ONES * b'\\' as u64);
        // Lowest set high bit marks the first zero byte (borrows only run upward).
        let zero = x.wrapping_sub(ONES) & !x & HIGH;
        if zero != 0 {
            return i + (zero.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < raw.len() && raw[i] != b'\\' {
        i += 1;
    }
    i
}

/// Four hex digits at `at` (validated input; missing digits read as zero).
fn read_u4(raw: &[u8], at: usize) -> u32 {
    (0..4).fold(0u32, |v, k| {
        let d = match raw.get(at + k) {
            Some(b @ b'0'..=b'9') => b - b'0',
            Some(b @ b'a'..=b'f') => b - b'a' + 10,
            Some(b @ b'A'..=b'F') => b - b'A' + 10,
            _ => 0,
        };
        (v << 4) | d as u32
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostrwire_event::EventRef;

    #[test]
    fn agrees_with_the_event_parser() {
        let cases = [
            r#"plain"#,
            r#"a\"b\\c\/d\b\t\n\f\r"#,
            r#"\u0000\u001f\u00e9\u00E9 \ud83d\ude00 end"#,
            r#"\u0070"#,
            r#"x\u2028y"#,
            r#"exactly eight\nthen sixteen bytes\tof text \\ and a tail"#,
            r#"0123456\n01234567\"012345678"#,
        ];
        for raw in cases {
            let json = format!(
                r#"{{"id":"{z}","pubkey":"{z}","created_at":1,"kind":1,"tags":[],"content":"{raw}","sig":"{z}{z}"}}"#,
                z = "0".repeat(64)
            );
            let event = EventRef::parse(json.as_bytes()).unwrap();
            let mut out = Vec::new();
            unescape_into(raw.as_bytes(), &mut out);
            assert_eq!(out, event.content().value().as_bytes(), "{raw}");
        }
    }
}
