#![no_main]
//! The WebSocket message reader on hostile bytes, as a server reads what
//! any client sends: frames of any shape, split at any points, with and
//! without permessage-deflate. It returns messages or an error with a close
//! code, never panics, and never hands out a message over its limit.

use libfuzzer_sys::fuzz_target;
use nostrwire_websocket::deflate::DeflateParams;
use nostrwire_websocket::{Message, MessageReader, Role};

/// The reader's message limit: small, so that hostile lengths cross it.
const MAX_MESSAGE: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&control, bytes)) = data.split_first() else {
        return;
    };
    let inflater = (control & 1 == 1).then(|| DeflateParams::default().decompressor(Role::Server));
    let mut reader = MessageReader::new(Role::Server, MAX_MESSAGE, inflater);
    // Bytes arrive in pieces of 1 to 64 bytes, as reads of a socket would.
    let piece = usize::from(control >> 2) + 1;
    for chunk in bytes.chunks(piece) {
        reader.push(chunk);
        loop {
            match reader.next_message() {
                Ok(Some(Message::Text(m) | Message::Binary(m))) => {
                    assert!(m.len() <= MAX_MESSAGE);
                }
                Ok(Some(Message::Ping(p) | Message::Pong(p))) => assert!(p.len() <= 125),
                Ok(Some(Message::Close(_))) => {}
                Ok(None) => break,
                Err(e) => {
                    let _ = e.close_code();
                    return;
                }
            }
        }
    }
});
