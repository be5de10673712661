//! Where a canonical serialization goes ([`Sink`]): straight into a SHA-256
//! ([`Hasher`]), or into a buffer hashed later with other events
//! ([`Buf`]); and the JSON pieces of that serialization.

use crate::sha256::Sha256;

/// Receives the bytes of a serialization.
pub(crate) trait Sink {
    fn put(&mut self, data: &[u8]);

    #[inline]
    fn byte(&mut self, b: u8) {
        self.put(&[b]);
    }

    /// A JSON string with the canonical escaping of NIP-01 (and of
    /// `JSON.stringify`): `\"`, `\\`, `\b \t \n \f \r`, `\u00xx` in
    /// lowercase for every other byte below 0x20, everything else as is.
    fn json_str(&mut self, s: &[u8]) {
        self.byte(b'"');
        let mut start = 0;
        loop {
            let i = start + plain_prefix(&s[start..]);
            self.put(&s[start..i]);
            let Some(&b) = s.get(i) else {
                break;
            };
            self.escape(b);
            start = i + 1;
        }
        self.byte(b'"');
    }

    /// The same string as [`Sink::json_str`] for `JSON.parse`, in ASCII
    /// alone: every character outside ASCII as `\uxxxx` (two for one
    /// outside the BMP). A browser decodes ASCII several times faster
    /// than other UTF-8 and parses it faster too. `s` is valid UTF-8.
    fn json_str_ascii(&mut self, s: &[u8]) {
        self.byte(b'"');
        let mut start = 0;
        loop {
            let i = start + plain_prefix_of::<true>(&s[start..]);
            self.put(&s[start..i]);
            let Some(&b) = s.get(i) else {
                break;
            };
            if b < 0x80 {
                self.escape(b);
                start = i + 1;
                continue;
            }
            let len = match b {
                0xf0.. => 4,
                0xe0.. => 3,
                _ => 2,
            };
            let mut c = u32::from(b) & (0x7f >> len);
            for &cont in s.get(i + 1..i + len).unwrap_or(&[]) {
                c = (c << 6) | u32::from(cont & 0x3f);
            }
            if c >= 0x1_0000 {
                let v = c - 0x1_0000;
                self.u_escape(0xd800 | (v >> 10));
                self.u_escape(0xdc00 | (v & 0x3ff));
            } else {
                self.u_escape(c);
            }
            start = i + len;
        }
        self.byte(b'"');
    }

    /// An ASCII byte a JSON string must escape.
    fn escape(&mut self, b: u8) {
        match b {
            b'"' => self.put(b"\\\""),
            b'\\' => self.put(b"\\\\"),
            0x08 => self.put(b"\\b"),
            b'\t' => self.put(b"\\t"),
            b'\n' => self.put(b"\\n"),
            0x0c => self.put(b"\\f"),
            b'\r' => self.put(b"\\r"),
            _ => self.u_escape(u32::from(b)),
        }
    }

    /// `\uxxxx` for one UTF-16 unit, in lowercase hex.
    fn u_escape(&mut self, unit: u32) {
        self.put(&[
            b'\\',
            b'u',
            HEX[(unit >> 12 & 15) as usize],
            HEX[(unit >> 8 & 15) as usize],
            HEX[(unit >> 4 & 15) as usize],
            HEX[(unit & 15) as usize],
        ]);
    }

    /// `bytes` as a JSON string of lowercase hex.
    fn json_hex(&mut self, bytes: &[u8]) {
        self.byte(b'"');
        for chunk in bytes.chunks(64) {
            let mut buf = [0u8; 128];
            hex_into(chunk, &mut buf[..2 * chunk.len()]);
            self.put(&buf[..2 * chunk.len()]);
        }
        self.byte(b'"');
    }

    /// A JSON integer.
    fn json_int(&mut self, v: i64) {
        let mut buf = [0u8; 20];
        let mut at = buf.len();
        let mut n = v.unsigned_abs();
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if v < 0 {
            self.byte(b'-');
        }
        self.put(&buf[at..]);
    }
}

const STAGE: usize = 256;

/// A serialization hashed as it is written. Bytes go to a stack buffer
/// first, so that the many short pieces of a serialization cost one call
/// into the hash per 256 bytes.
pub(crate) struct Hasher {
    sha: Sha256,
    stage: [u8; STAGE],
    len: usize,
}

impl Hasher {
    pub(crate) fn new() -> Self {
        Hasher {
            sha: Sha256::new(),
            stage: [0; STAGE],
            len: 0,
        }
    }

    pub(crate) fn finish(mut self) -> [u8; 32] {
        self.sha.update(&self.stage[..self.len]);
        self.sha.finish()
    }
}

impl Sink for Hasher {
    #[inline]
    fn put(&mut self, data: &[u8]) {
        if self.len + data.len() > STAGE {
            self.sha.update(&self.stage[..self.len]);
            self.len = 0;
            if data.len() >= STAGE {
                self.sha.update(data);
                return;
            }
        }
        self.stage[self.len..self.len + data.len()].copy_from_slice(data);
        self.len += data.len();
    }

    #[inline]
    fn byte(&mut self, b: u8) {
        if self.len == STAGE {
            self.sha.update(&self.stage);
            self.len = 0;
        }
        self.stage[self.len] = b;
        self.len += 1;
    }
}

/// A serialization written into a slice; `full` once a write did not fit
/// (what was written is then no serialization).
pub(crate) struct Buf<'a> {
    out: &'a mut [u8],
    pub(crate) len: usize,
    pub(crate) full: bool,
}

impl<'a> Buf<'a> {
    pub(crate) fn new(out: &'a mut [u8]) -> Self {
        Buf {
            out,
            len: 0,
            full: false,
        }
    }
}

impl Sink for Buf<'_> {
    #[inline]
    fn put(&mut self, data: &[u8]) {
        match self.out.get_mut(self.len..self.len + data.len()) {
            Some(to) => {
                to.copy_from_slice(data);
                self.len += data.len();
            }
            None => self.full = true,
        }
    }

    #[inline]
    fn byte(&mut self, b: u8) {
        match self.out.get_mut(self.len) {
            Some(to) => {
                *to = b;
                self.len += 1;
            }
            None => self.full = true,
        }
    }
}

/// True for a byte a JSON string holds as it is (and, `ASCII`, that is
/// not part of a character outside ASCII).
#[inline]
fn plain<const ASCII: bool>(b: u8) -> bool {
    b != b'"' && b != b'\\' && b >= 0x20 && (!ASCII || b < 0x80)
}

/// How many leading bytes of `s` a JSON string holds as they are.
#[inline]
pub(crate) fn plain_prefix(s: &[u8]) -> usize {
    plain_prefix_of::<false>(s)
}

/// How many leading bytes of `s` a JSON string holds as they are: 16 at a
/// time with SIMD128.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline]
fn plain_prefix_of<const ASCII: bool>(s: &[u8]) -> usize {
    use core::arch::wasm32::*;
    let mut i = 0;
    while i + 16 <= s.len() {
        // SAFETY: 16 bytes at `i` are inside `s`; v128_load has no
        // alignment requirement.
        let v = unsafe { v128_load(s.as_ptr().add(i) as *const v128) };
        // Signed, bytes from 0x80 on are below 0x20 too.
        let low = if ASCII {
            i8x16_lt(v, i8x16_splat(0x20))
        } else {
            u8x16_lt(v, u8x16_splat(0x20))
        };
        let special = v128_or(
            v128_or(
                i8x16_eq(v, u8x16_splat(b'"')),
                i8x16_eq(v, u8x16_splat(b'\\')),
            ),
            low,
        );
        let bits = i8x16_bitmask(special);
        if bits != 0 {
            return i + bits.trailing_zeros() as usize;
        }
        i += 16;
    }
    i + s[i..].iter().take_while(|&&b| plain::<ASCII>(b)).count()
}

/// How many leading bytes of `s` a JSON string holds as they are.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline]
fn plain_prefix_of<const ASCII: bool>(s: &[u8]) -> usize {
    s.iter().take_while(|&&b| plain::<ASCII>(b)).count()
}

pub(crate) const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes` into `out` (twice as long): 16 bytes at a time
/// with SIMD128.
pub(crate) fn hex_into(bytes: &[u8], out: &mut [u8]) {
    let done = hex_sixteens(bytes, out);
    for (i, &b) in bytes.iter().enumerate().skip(done) {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 15)];
    }
}

/// The whole 16-byte blocks of `bytes` as hex; how many bytes that was.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline]
fn hex_sixteens(bytes: &[u8], out: &mut [u8]) -> usize {
    use core::arch::wasm32::*;
    let digits = i8x16(
        b'0' as i8, b'1' as i8, b'2' as i8, b'3' as i8, b'4' as i8, b'5' as i8, b'6' as i8,
        b'7' as i8, b'8' as i8, b'9' as i8, b'a' as i8, b'b' as i8, b'c' as i8, b'd' as i8,
        b'e' as i8, b'f' as i8,
    );
    let mut done = 0;
    for (src, dst) in bytes.chunks_exact(16).zip(out.chunks_exact_mut(32)) {
        // SAFETY: 16 bytes read from `src` and 32 written to `dst`, both of
        // exactly that length; no alignment is required.
        unsafe {
            let v = v128_load(src.as_ptr() as *const v128);
            let hi = i8x16_swizzle(digits, u8x16_shr(v, 4));
            let lo = i8x16_swizzle(digits, v128_and(v, u8x16_splat(15)));
            let a = i8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(hi, lo);
            let b = i8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(
                hi, lo,
            );
            v128_store(dst.as_mut_ptr() as *mut v128, a);
            v128_store(dst.as_mut_ptr().add(16) as *mut v128, b);
        }
        done += 16;
    }
    done
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline]
fn hex_sixteens(_: &[u8], _: &mut [u8]) -> usize {
    0
}

/// The bytes of `N * 2` lowercase hex characters, or `None` for any other
/// input (uppercase included).
pub(crate) fn unhex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

#[inline]
fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}
