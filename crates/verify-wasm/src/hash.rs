//! SHA-256 (libsecp256k1's) behind a small staging buffer, and the JSON
//! pieces of the canonical serialization written straight into it.

use core::mem::MaybeUninit;

/// libsecp256k1's `secp256k1_sha256` (`src/hash.h`), by value.
#[repr(C)]
pub(crate) struct Sha256 {
    s: [u32; 8],
    buf: [u8; 64],
    bytes: u64,
}

extern "C" {
    #[cfg(test)]
    pub(crate) fn nw_sha256_size() -> usize;
    fn nw_sha256_init(h: *mut Sha256);
    fn nw_sha256_write(h: *mut Sha256, data: *const u8, len: usize);
    fn nw_sha256_finalize(h: *mut Sha256, out32: *mut u8);
}

const STAGE: usize = 256;

/// Bytes go to a stack buffer first, so that the many short pieces of a
/// serialization cost one call into the hash per 256 bytes.
pub(crate) struct Hasher {
    sha: Sha256,
    stage: [u8; STAGE],
    len: usize,
}

impl Hasher {
    pub(crate) fn new() -> Self {
        let mut sha = MaybeUninit::<Sha256>::uninit();
        // SAFETY: `nw_sha256_init` writes every field of the state.
        let sha = unsafe {
            nw_sha256_init(sha.as_mut_ptr());
            sha.assume_init()
        };
        Hasher {
            sha,
            stage: [0; STAGE],
            len: 0,
        }
    }

    fn flush(&mut self) {
        // SAFETY: `stage[..len]` is initialized memory of this struct.
        unsafe { nw_sha256_write(&mut self.sha, self.stage.as_ptr(), self.len) };
        self.len = 0;
    }

    #[inline]
    pub(crate) fn put(&mut self, data: &[u8]) {
        if self.len + data.len() > STAGE {
            self.flush();
            if data.len() >= STAGE {
                // SAFETY: `data` is a live slice.
                unsafe { nw_sha256_write(&mut self.sha, data.as_ptr(), data.len()) };
                return;
            }
        }
        self.stage[self.len..self.len + data.len()].copy_from_slice(data);
        self.len += data.len();
    }

    #[inline]
    pub(crate) fn byte(&mut self, b: u8) {
        if self.len == STAGE {
            self.flush();
        }
        self.stage[self.len] = b;
        self.len += 1;
    }

    pub(crate) fn finish(mut self) -> [u8; 32] {
        self.flush();
        let mut out = [0u8; 32];
        // SAFETY: `out` has room for the 32-byte digest.
        unsafe { nw_sha256_finalize(&mut self.sha, out.as_mut_ptr()) };
        out
    }

    /// A JSON string with the canonical escaping of NIP-01 (and of
    /// `JSON.stringify`): `\"`, `\\`, `\b \t \n \f \r`, `\u00xx` in
    /// lowercase for every other byte below 0x20, everything else as is.
    pub(crate) fn json_str(&mut self, s: &[u8]) {
        self.byte(b'"');
        let mut start = 0;
        for (i, &b) in s.iter().enumerate() {
            if b != b'"' && b != b'\\' && b >= 0x20 {
                continue;
            }
            self.put(&s[start..i]);
            match b {
                b'"' => self.put(b"\\\""),
                b'\\' => self.put(b"\\\\"),
                0x08 => self.put(b"\\b"),
                b'\t' => self.put(b"\\t"),
                b'\n' => self.put(b"\\n"),
                0x0c => self.put(b"\\f"),
                b'\r' => self.put(b"\\r"),
                _ => self.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]),
            }
            start = i + 1;
        }
        self.put(&s[start..]);
        self.byte(b'"');
    }

    /// `bytes` as a JSON string of lowercase hex.
    pub(crate) fn json_hex(&mut self, bytes: &[u8]) {
        self.byte(b'"');
        for chunk in bytes.chunks(64) {
            let mut buf = [0u8; 128];
            for (i, &b) in chunk.iter().enumerate() {
                buf[2 * i] = HEX[usize::from(b >> 4)];
                buf[2 * i + 1] = HEX[usize::from(b & 15)];
            }
            self.put(&buf[..2 * chunk.len()]);
        }
        self.byte(b'"');
    }

    /// A JSON integer.
    pub(crate) fn json_int(&mut self, v: i64) {
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

pub(crate) const HEX: &[u8; 16] = b"0123456789abcdef";

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
