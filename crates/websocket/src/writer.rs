//! Appends whole messages as frames.

use crate::deflate::Compressor;
use crate::frame::{apply_mask, encode_frame, encode_header, opcode};
use crate::Role;

/// Frames outgoing messages, one frame per message, compressing those
/// [`Compressor::wants`] when permessage-deflate was negotiated.
///
/// A client passes a fresh mask for every frame; a server passes `None`.
#[derive(Debug)]
pub struct MessageWriter {
    role: Role,
    deflater: Option<Compressor>,
    scratch: Vec<u8>,
}

impl MessageWriter {
    /// A writer for `role`, compressing with `deflater` if negotiated.
    pub fn new(role: Role, deflater: Option<Compressor>) -> MessageWriter {
        MessageWriter {
            role,
            deflater,
            scratch: Vec::new(),
        }
    }

    /// Whether messages may go out compressed.
    pub fn compresses(&self) -> bool {
        self.deflater.is_some()
    }

    /// Appends a text message.
    pub fn text(&mut self, out: &mut Vec<u8>, payload: &[u8], mask: Option<[u8; 4]>) {
        self.message(out, opcode::TEXT, payload, mask);
    }

    /// Appends a binary message.
    pub fn binary(&mut self, out: &mut Vec<u8>, payload: &[u8], mask: Option<[u8; 4]>) {
        self.message(out, opcode::BINARY, payload, mask);
    }

    /// Appends a control frame (ping, pong, close); payloads over 125 bytes
    /// are cut to 125 as RFC 6455 §5.5 requires.
    pub fn control(&mut self, out: &mut Vec<u8>, op: u8, payload: &[u8], mask: Option<[u8; 4]>) {
        debug_assert_eq!(mask.is_some(), self.role == Role::Client);
        encode_frame(out, true, op, &payload[..payload.len().min(125)], mask);
    }

    /// Appends a close frame with a status code (RFC 6455 §5.5.1).
    pub fn close(&mut self, out: &mut Vec<u8>, code: u16, mask: Option<[u8; 4]>) {
        // Status codes go in network byte order.
        #[allow(clippy::big_endian_bytes)]
        let code = code.to_be_bytes();
        self.control(out, opcode::CLOSE, &code, mask);
    }

    fn message(&mut self, out: &mut Vec<u8>, op: u8, payload: &[u8], mask: Option<[u8; 4]>) {
        debug_assert_eq!(mask.is_some(), self.role == Role::Client);
        match &mut self.deflater {
            Some(deflater) if deflater.wants(payload.len()) => {
                self.scratch.clear();
                deflater.compress(payload, &mut self.scratch);
                encode_header(out, true, true, op, self.scratch.len(), mask);
                let start = out.len();
                out.extend_from_slice(&self.scratch);
                if let Some(key) = mask {
                    apply_mask(&mut out[start..], key);
                }
                if self.scratch.capacity() > 1 << 20 {
                    self.scratch = Vec::new();
                }
            }
            _ => encode_frame(out, true, op, payload, mask),
        }
    }
}
