//! WebSocket framing for nostrwire, without I/O.
//!
//! One implementation of RFC 6455 frames and RFC 7692 permessage-deflate,
//! used by both ends the project owns: the relay (server role) and the load
//! tester (client role). The caller owns the socket; this crate turns bytes
//! into messages and messages into bytes.
//!
//! - [`frame`]: frame headers, masking, encoding.
//! - [`handshake`]: `Sec-WebSocket-Accept` and the permessage-deflate
//!   negotiation (offer, answer, checking the answer).
//! - [`deflate`]: per-message compression with or without context takeover.
//! - [`MessageReader`]: a buffered reader that joins fragments, unmasks,
//!   inflates, checks UTF-8 and enforces the message size limit before it
//!   allocates.
//! - [`MessageWriter`]: appends whole messages as frames, compressed when
//!   negotiated.
//!
//! ```
//! use nostrwire_websocket::{Message, MessageReader, MessageWriter, Role};
//!
//! let mut client = MessageWriter::new(Role::Client, None);
//! let mut wire = Vec::new();
//! client.text(&mut wire, br#"["REQ","s",{"kinds":[1]}]"#, Some([7, 7, 7, 7]));
//!
//! let mut server = MessageReader::new(Role::Server, 1 << 20, None);
//! server.push(&wire);
//! match server.next_message()? {
//!     Some(Message::Text(text)) => assert_eq!(text, br#"["REQ","s",{"kinds":[1]}]"#),
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), nostrwire_websocket::Error>(())
//! ```

#![warn(missing_docs)]

pub mod deflate;
mod error;
pub mod frame;
pub mod handshake;
mod reader;
mod writer;

pub use error::Error;
pub use reader::{Message, MessageReader};
pub use writer::MessageWriter;

/// Which end of the connection this side is. Clients mask every frame they
/// send; servers never do (RFC 6455 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Accepts connections; reads masked frames, writes unmasked ones.
    Server,
    /// Opens connections; reads unmasked frames, writes masked ones.
    Client,
}
