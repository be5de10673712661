//! Strict lowercase hex: the only spelling NIP-01 allows for ids, keys and signatures.

use crate::error::ErrorKind;

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Value of each byte as a lowercase hex digit, or 0xff.
const DECODE: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// Decodes exactly `2 * N` lowercase hex characters into `N` bytes.
pub fn decode_array<const N: usize>(text: &[u8]) -> Result<[u8; N], ErrorKind> {
    if text.len() != 2 * N {
        return Err(ErrorKind::HexLength);
    }
    let mut out = [0u8; N];
    let mut bad = 0u8;
    for (i, pair) in text.chunks_exact(2).enumerate() {
        let hi = DECODE[pair[0] as usize];
        let lo = DECODE[pair[1] as usize];
        bad |= hi | lo;
        out[i] = (hi << 4) | (lo & 0x0f);
    }
    // Any invalid digit has its high bit set in the table.
    if bad & 0x80 != 0 {
        return Err(ErrorKind::InvalidHex);
    }
    Ok(out)
}

/// True if the length is even and every byte is a lowercase hex digit
/// (the condition for reversible hex compaction).
pub fn is_lower_hex(text: &[u8]) -> bool {
    text.len() % 2 == 0 && text.iter().all(|&b| DECODE[b as usize] != 0xff)
}

/// Decodes lowercase hex of any even length into `out` (cleared first).
pub fn decode_into(text: &[u8], out: &mut Vec<u8>) -> Result<(), ErrorKind> {
    if text.len() % 2 != 0 {
        return Err(ErrorKind::HexLength);
    }
    out.clear();
    out.reserve(text.len() / 2);
    for pair in text.chunks_exact(2) {
        let hi = DECODE[pair[0] as usize];
        let lo = DECODE[pair[1] as usize];
        if (hi | lo) & 0x80 != 0 {
            return Err(ErrorKind::InvalidHex);
        }
        out.push((hi << 4) | lo);
    }
    Ok(())
}

/// Writes the lowercase hex of `bytes` into `out`, which must be twice as long.
pub fn encode_to_slice(bytes: &[u8], out: &mut [u8]) {
    debug_assert_eq!(out.len(), bytes.len() * 2);
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[(b >> 4) as usize];
        out[2 * i + 1] = DIGITS[(b & 0x0f) as usize];
    }
}

/// Lowercase hex of a fixed-size array, on the stack.
pub fn encode_array<const N: usize, const M: usize>(bytes: &[u8; N]) -> [u8; M] {
    debug_assert_eq!(M, 2 * N);
    let mut out = [0u8; M];
    encode_to_slice(bytes, &mut out);
    out
}

/// Lowercase hex of `bytes` as a `String`.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = vec![0u8; bytes.len() * 2];
    encode_to_slice(bytes, &mut out);
    // Hex digits are ASCII.
    String::from_utf8(out).expect("hex is ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_strictness() {
        let bytes: [u8; 4] = decode_array(b"00ff10ab").unwrap();
        assert_eq!(bytes, [0x00, 0xff, 0x10, 0xab]);
        assert_eq!(encode(&bytes), "00ff10ab");
        assert_eq!(decode_array::<4>(b"00FF10ab"), Err(ErrorKind::InvalidHex));
        assert_eq!(decode_array::<4>(b"00ff10a"), Err(ErrorKind::HexLength));
        assert_eq!(decode_array::<4>(b"00ff10ag"), Err(ErrorKind::InvalidHex));
        assert!(is_lower_hex(b"deadbeef"));
        assert!(!is_lower_hex(b"DEADBEEF"));
        assert!(!is_lower_hex(b"abc"));
    }
}
