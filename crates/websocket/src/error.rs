//! Errors of the WebSocket layer.

use std::fmt;

/// Why a stream of frames was refused. Every variant maps to the close code
/// the receiving side sends before it drops the connection
/// ([`Error::close_code`]); [`Error::as_str`] names are stable.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// RSV2 or RSV3 set, or RSV1 set without a negotiated compression
    /// extension, or RSV1 on a control or continuation frame.
    ReservedBits,
    /// A control frame that is fragmented or longer than 125 bytes.
    BadControlFrame,
    /// An opcode RFC 6455 does not define.
    UnknownOpcode(u8),
    /// A client frame without a mask, or a server frame with one.
    Masking,
    /// A continuation frame with no message open, or a new data frame
    /// inside a fragmented message.
    Fragmentation,
    /// A frame or message (after decompression) over the size limit.
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A text message that is not UTF-8, or a close reason that is not.
    InvalidUtf8,
    /// A close frame with a one-byte payload or a code RFC 6455 forbids.
    BadClose,
    /// A compressed message that does not inflate.
    Inflate,
    /// A handshake header that does not follow the rules (for example an
    /// extension the client did not offer).
    Handshake(String),
}

impl Error {
    /// A stable machine-readable name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Error::ReservedBits => "reserved_bits",
            Error::BadControlFrame => "bad_control_frame",
            Error::UnknownOpcode(_) => "unknown_opcode",
            Error::Masking => "masking",
            Error::Fragmentation => "fragmentation",
            Error::TooLarge { .. } => "too_large",
            Error::InvalidUtf8 => "invalid_utf8",
            Error::BadClose => "bad_close",
            Error::Inflate => "inflate",
            Error::Handshake(_) => "handshake",
        }
    }

    /// The close status code (RFC 6455 §7.4.1) to send for this error.
    pub fn close_code(&self) -> u16 {
        match self {
            Error::TooLarge { .. } => 1009,
            Error::InvalidUtf8 | Error::Inflate => 1007,
            _ => 1002,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ReservedBits => f.write_str("reserved bits set without a negotiated extension"),
            Error::BadControlFrame => f.write_str("fragmented or oversized control frame"),
            Error::UnknownOpcode(op) => write!(f, "unknown opcode {op:#x}"),
            Error::Masking => f.write_str("frame masking does not match the sender's role"),
            Error::Fragmentation => f.write_str("continuation frame out of place"),
            Error::TooLarge { limit } => write!(f, "message exceeds the {limit}-byte limit"),
            Error::InvalidUtf8 => f.write_str("text is not valid UTF-8"),
            Error::BadClose => f.write_str("malformed close frame"),
            Error::Inflate => f.write_str("compressed message does not inflate"),
            Error::Handshake(why) => write!(f, "handshake: {why}"),
        }
    }
}

impl std::error::Error for Error {}
