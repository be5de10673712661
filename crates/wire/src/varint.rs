//! Unsigned LEB128, minimal encodings only
//! ([spec §4](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#4-varints)).

use crate::error::{Error, Result};

/// Most bytes a `u64` varint can take.
pub const MAX_LEN: usize = 10;

/// Bytes needed to encode `value`.
///
/// Spec: [§4](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#4-varints).
#[inline]
pub const fn len(value: u64) -> usize {
    // 1 + floor(bits_needed / 7), with bits_needed of 0 counted as 1.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Appends the minimal encoding of `value`.
///
/// Spec: [§4](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#4-varints).
#[inline]
pub fn push(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Writes the minimal encoding of `value` into `out`, returning the length.
/// `out` must hold at least [`len`]`(value)` bytes.
///
/// Spec: [§4](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#4-varints).
#[inline]
pub fn write(out: &mut [u8], mut value: u64) -> usize {
    let mut i = 0;
    while value >= 0x80 {
        out[i] = (value as u8) | 0x80;
        value >>= 7;
        i += 1;
    }
    out[i] = value as u8;
    i + 1
}

/// Reads a varint at `*pos`, advancing it. Rejects overlong and overflowing encodings.
///
/// Spec: [§4](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#4-varints).
#[inline]
pub fn read(bytes: &[u8], pos: &mut usize) -> Result<u64> {
    let start = *pos;
    // One-byte fast path: the common case for counts, headers and small lengths.
    match bytes.get(start) {
        None => return Err(Error::Truncated),
        Some(&b) if b < 0x80 => {
            *pos = start + 1;
            return Ok(b as u64);
        }
        Some(_) => {}
    }
    let mut value = 0u64;
    let mut shift = 0u32;
    let mut i = start;
    loop {
        let Some(&b) = bytes.get(i) else {
            return Err(Error::Truncated);
        };
        i += 1;
        if shift == 63 && b > 1 {
            return Err(Error::VarintOverflow);
        }
        value |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            // A final zero byte after the first adds nothing: not minimal.
            if b == 0 {
                return Err(Error::OverlongVarint);
            }
            *pos = i;
            return Ok(value);
        }
        shift += 7;
        if shift > 63 {
            return Err(Error::VarintOverflow);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        push(&mut out, v);
        out
    }

    #[test]
    fn table() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (16_383, &[0xff, 0x7f]),
            (16_384, &[0x80, 0x80, 0x01]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for &(v, bytes) in cases {
            assert_eq!(enc(v), bytes, "{v}");
            assert_eq!(len(v), bytes.len(), "{v}");
            let mut pos = 0;
            assert_eq!(read(bytes, &mut pos), Ok(v));
            assert_eq!(pos, bytes.len());
            let mut buf = [0u8; MAX_LEN];
            assert_eq!(write(&mut buf, v), bytes.len());
            assert_eq!(&buf[..bytes.len()], bytes);
        }
    }

    #[test]
    fn rejects_non_minimal_and_overflow() {
        let r = |b: &[u8]| read(b, &mut 0);
        assert_eq!(r(&[0x80, 0x00]), Err(Error::OverlongVarint));
        assert_eq!(r(&[0x81, 0x80, 0x00]), Err(Error::OverlongVarint));
        assert_eq!(r(&[0x80]), Err(Error::Truncated));
        assert_eq!(r(&[]), Err(Error::Truncated));
        assert_eq!(
            r(&[0xff; 9].iter().chain(&[0x02]).copied().collect::<Vec<_>>()),
            Err(Error::VarintOverflow)
        );
        assert_eq!(
            r(&[0xff; 10]
                .iter()
                .chain(&[0x01])
                .copied()
                .collect::<Vec<_>>()),
            Err(Error::VarintOverflow)
        );
    }

    #[test]
    fn every_small_value_round_trips() {
        for v in (0..70_000u64).chain([1 << 21, (1 << 28) - 1, 1 << 35, 1 << 56, 1 << 63]) {
            let bytes = enc(v);
            let mut pos = 0;
            assert_eq!(read(&bytes, &mut pos), Ok(v));
            assert_eq!(pos, len(v));
        }
    }
}
