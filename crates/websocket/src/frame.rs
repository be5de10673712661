//! Frame headers (RFC 6455 §5.2), masking and encoding.

// RFC 6455 writes lengths and close codes in network (big-endian) byte order.
#![allow(clippy::big_endian_bytes)]

use crate::Error;

/// Frame opcodes (RFC 6455 §5.2).
pub mod opcode {
    /// Continuation of a fragmented message.
    pub const CONTINUATION: u8 = 0x0;
    /// Text message.
    pub const TEXT: u8 = 0x1;
    /// Binary message.
    pub const BINARY: u8 = 0x2;
    /// Connection close.
    pub const CLOSE: u8 = 0x8;
    /// Ping.
    pub const PING: u8 = 0x9;
    /// Pong.
    pub const PONG: u8 = 0xA;
}

/// The largest header: 2 bytes, an 8-byte length and a 4-byte mask.
pub const MAX_HEADER: usize = 14;

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// FIN bit.
    pub fin: bool,
    /// RSV1 bit: "this message is compressed" under permessage-deflate.
    pub rsv1: bool,
    /// Opcode.
    pub opcode: u8,
    /// Masking key, if the frame is masked.
    pub mask: Option<[u8; 4]>,
    /// Header length in bytes.
    pub header_len: usize,
    /// Payload length in bytes.
    pub payload_len: u64,
}

/// Decodes a frame header from the start of `buf`; `Ok(None)` when more
/// bytes are needed. RSV1 is accepted only when `allow_rsv1` (an extension
/// that defines it was negotiated); RSV2 and RSV3 never are.
pub fn decode_header(buf: &[u8], allow_rsv1: bool) -> Result<Option<FrameHeader>, Error> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let rsv1 = buf[0] & 0x40 != 0;
    if buf[0] & 0x30 != 0 || (rsv1 && !allow_rsv1) {
        return Err(Error::ReservedBits);
    }
    let fin = buf[0] & 0x80 != 0;
    let opcode = buf[0] & 0x0F;
    let masked = buf[1] & 0x80 != 0;
    let (payload_len, mut header_len) = match buf[1] & 0x7F {
        126 => {
            if buf.len() < 4 {
                return Ok(None);
            }
            (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4)
        }
        127 => {
            if buf.len() < 10 {
                return Ok(None);
            }
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            (u64::from_be_bytes(b), 10)
        }
        n => (u64::from(n), 2),
    };
    let mask = if masked {
        if buf.len() < header_len + 4 {
            return Ok(None);
        }
        let k = [
            buf[header_len],
            buf[header_len + 1],
            buf[header_len + 2],
            buf[header_len + 3],
        ];
        header_len += 4;
        Some(k)
    } else {
        None
    };
    if opcode >= 0x8 && (!fin || payload_len > 125) {
        return Err(Error::BadControlFrame);
    }
    Ok(Some(FrameHeader {
        fin,
        rsv1,
        opcode,
        mask,
        header_len,
        payload_len,
    }))
}

/// Appends a frame header for a payload of `len` bytes.
pub fn encode_header(
    out: &mut Vec<u8>,
    fin: bool,
    rsv1: bool,
    opcode: u8,
    len: usize,
    mask: Option<[u8; 4]>,
) {
    out.push(if fin { 0x80 } else { 0 } | if rsv1 { 0x40 } else { 0 } | (opcode & 0x0F));
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if len <= 0xFFFF {
        out.push(mask_bit | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    if let Some(key) = mask {
        out.extend_from_slice(&key);
    }
}

/// Appends one uncompressed frame to `out`. A client passes a mask; a server
/// must not.
pub fn encode_frame(
    out: &mut Vec<u8>,
    fin: bool,
    opcode: u8,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) {
    encode_header(out, fin, false, opcode, payload.len(), mask);
    let start = out.len();
    out.extend_from_slice(payload);
    if let Some(key) = mask {
        apply_mask(&mut out[start..], key);
    }
}

/// XORs `data` with the repeating 4-byte `key` (masking and unmasking are the same).
pub fn apply_mask(data: &mut [u8], key: [u8; 4]) {
    let wide = u64::from_le_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word) ^ wide;
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6455_frame_examples() {
        // §5.7: a single-frame unmasked and masked text message "Hello".
        let mut out = Vec::new();
        encode_frame(&mut out, true, opcode::TEXT, b"Hello", None);
        assert_eq!(out, [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
        out.clear();
        encode_frame(
            &mut out,
            true,
            opcode::TEXT,
            b"Hello",
            Some([0x37, 0xfa, 0x21, 0x3d]),
        );
        assert_eq!(
            out,
            [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
        );
        let h = decode_header(&out, false).unwrap().unwrap();
        assert_eq!(h.header_len, 6);
        assert_eq!(h.payload_len, 5);
        let mut payload = out[6..].to_vec();
        apply_mask(&mut payload, h.mask.unwrap());
        assert_eq!(payload, b"Hello");
    }

    #[test]
    fn header_lengths_and_partial_input() {
        for len in [0usize, 125, 126, 65535, 65536, 200_000] {
            let payload = vec![b'x'; len];
            let mut out = Vec::new();
            encode_frame(&mut out, true, opcode::TEXT, &payload, None);
            let h = decode_header(&out, false).unwrap().unwrap();
            assert_eq!(h.payload_len as usize, len);
            assert_eq!(h.header_len + len, out.len());
            for cut in 0..h.header_len {
                assert_eq!(
                    decode_header(&out[..cut], false).unwrap(),
                    None,
                    "len {len} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn mask_is_an_involution_for_every_length() {
        let key = [1, 2, 3, 250];
        for len in 0..40 {
            let original: Vec<u8> = (0..len as u8).collect();
            let mut data = original.clone();
            apply_mask(&mut data, key);
            for (i, (a, b)) in data.iter().zip(&original).enumerate() {
                assert_eq!(*a, b ^ key[i % 4]);
            }
            apply_mask(&mut data, key);
            assert_eq!(data, original);
        }
    }

    #[test]
    fn control_frames_and_reserved_bits_are_checked() {
        assert_eq!(
            decode_header(&[0x09, 0x00], false),
            Err(Error::BadControlFrame)
        );
        assert_eq!(
            decode_header(&[0x89, 126, 0, 200], false),
            Err(Error::BadControlFrame)
        );
        assert_eq!(
            decode_header(&[0xC1, 0x00], false),
            Err(Error::ReservedBits)
        );
        assert!(decode_header(&[0xC1, 0x00], true).unwrap().unwrap().rsv1);
        assert_eq!(decode_header(&[0xA1, 0x00], true), Err(Error::ReservedBits));
        assert_eq!(decode_header(&[0x91, 0x00], true), Err(Error::ReservedBits));
    }

    #[test]
    fn rsv1_round_trips_through_the_header() {
        let mut out = Vec::new();
        encode_header(
            &mut out,
            true,
            true,
            opcode::BINARY,
            300,
            Some([1, 2, 3, 4]),
        );
        let h = decode_header(&out, true).unwrap().unwrap();
        assert!(h.fin && h.rsv1);
        assert_eq!(
            (h.opcode, h.payload_len, h.header_len),
            (opcode::BINARY, 300, 8)
        );
        assert_eq!(h.mask, Some([1, 2, 3, 4]));
    }
}
