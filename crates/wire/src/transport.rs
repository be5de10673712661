//! The binary client–relay transport, `nostrwire.v1`
//! ([spec](https://github.com/nostrwire/nostrwire/blob/main/spec/transport.md)).
//!
//! Negotiated with `Sec-WebSocket-Protocol: nostrwire.v1`; every message is
//! then one binary WebSocket frame: a type byte and a body. Events travel as
//! nwb records (ids and signatures unchanged, so a relay hands out stored
//! records as they are); `OK` and `EOSE` have compact forms; every other
//! NIP-01 message travels as its JSON text in a [`JSON`] frame.
//!
//! ```
//! use nostrwire_wire::transport::{self, RelayFrame};
//!
//! let mut frame = Vec::new();
//! transport::write_eose(&mut frame, "feed");
//! assert_eq!(frame, b"\x05feed");
//! assert_eq!(
//!     transport::decode_relay(&frame, &Default::default())?,
//!     RelayFrame::Eose("feed")
//! );
//! # Ok::<(), nostrwire_wire::Error>(())
//! ```

use nostrwire_event::EventId;

use crate::{Error, EventView, Limits, Result};

/// The `Sec-WebSocket-Protocol` value that selects this transport.
pub const SUBPROTOCOL: &str = "nostrwire.v1";

/// Any NIP-01 message as JSON text (both directions).
pub const JSON: u8 = 0x00;
/// Client → relay `EVENT`: an nwb record.
pub const EVENT: u8 = 0x01;
/// Client → relay `AUTH`: an nwb record (kind 22242).
pub const AUTH: u8 = 0x02;
/// Relay → client `EVENT`: subscription id, then an nwb record.
pub const RELAY_EVENT: u8 = 0x03;
/// Relay → client `OK`: 32-byte id, accepted flag, message.
pub const OK: u8 = 0x04;
/// Relay → client `EOSE`: the subscription id.
pub const EOSE: u8 = 0x05;

/// Longest subscription id in bytes (NIP-01 relays commonly allow 64 chars).
pub const MAX_SUBSCRIPTION_ID_BYTES: usize = 64;

/// A decoded client → relay frame.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientFrame<'a> {
    /// A NIP-01 client message as JSON text (REQ, CLOSE, COUNT, NEG-*, …).
    Json(&'a [u8]),
    /// `EVENT` with its event, validated as an nwb record (not yet verified).
    Event(EventView<'a>),
    /// `AUTH` with its event, validated as an nwb record (not yet verified).
    Auth(EventView<'a>),
}

/// A decoded relay → client frame.
#[derive(Debug, Clone, PartialEq)]
pub enum RelayFrame<'a> {
    /// A NIP-01 relay message as JSON text (CLOSED, NOTICE, COUNT, AUTH, NEG-*).
    Json(&'a [u8]),
    /// A stored or live event for a subscription.
    Event {
        /// The subscription id.
        subscription_id: &'a str,
        /// The event.
        event: EventView<'a>,
    },
    /// The answer to `EVENT` or `AUTH`.
    Ok {
        /// The event's id.
        id: EventId,
        /// Whether it was accepted.
        accepted: bool,
        /// The NIP-01 message (`prefix: text`, or empty).
        message: &'a str,
    },
    /// End of stored events.
    Eose(&'a str),
}

/// Writes a [`JSON`] frame around a NIP-01 message.
pub fn write_json(out: &mut Vec<u8>, json: &[u8]) {
    out.reserve(1 + json.len());
    out.push(JSON);
    out.extend_from_slice(json);
}

/// Writes a client `EVENT` frame.
pub fn write_event(out: &mut Vec<u8>, record: &[u8]) {
    out.reserve(1 + record.len());
    out.push(EVENT);
    out.extend_from_slice(record);
}

/// Writes a client `AUTH` frame.
pub fn write_auth(out: &mut Vec<u8>, record: &[u8]) {
    out.reserve(1 + record.len());
    out.push(AUTH);
    out.extend_from_slice(record);
}

/// Writes a relay `EVENT` frame. `subscription_id` must be 1–64 bytes.
pub fn write_relay_event(out: &mut Vec<u8>, subscription_id: &str, record: &[u8]) {
    debug_assert!((1..=MAX_SUBSCRIPTION_ID_BYTES).contains(&subscription_id.len()));
    out.reserve(2 + subscription_id.len() + record.len());
    out.push(RELAY_EVENT);
    out.push(subscription_id.len() as u8);
    out.extend_from_slice(subscription_id.as_bytes());
    out.extend_from_slice(record);
}

/// Writes an `OK` frame.
pub fn write_ok(out: &mut Vec<u8>, id: &EventId, accepted: bool, message: &str) {
    out.reserve(34 + message.len());
    out.push(OK);
    out.extend_from_slice(id.as_bytes());
    out.push(accepted as u8);
    out.extend_from_slice(message.as_bytes());
}

/// Writes an `EOSE` frame.
pub fn write_eose(out: &mut Vec<u8>, subscription_id: &str) {
    out.push(EOSE);
    out.extend_from_slice(subscription_id.as_bytes());
}

fn subscription_id(bytes: &[u8]) -> Result<&str> {
    if bytes.is_empty() || bytes.len() > MAX_SUBSCRIPTION_ID_BYTES {
        return Err(Error::BadSubscriptionId);
    }
    core::str::from_utf8(bytes).map_err(|_| Error::InvalidUtf8)
}

fn json_body<'a>(body: &'a [u8], limits: &Limits) -> Result<&'a [u8]> {
    if body.len() > limits.max_record_bytes {
        return Err(Error::RecordTooLarge);
    }
    // The JSON parser checks the rest; here only what a frame promises.
    core::str::from_utf8(body).map_err(|_| Error::InvalidUtf8)?;
    Ok(body)
}

/// Decodes a client → relay frame. Never panics; the record limits apply to
/// events and to JSON bodies alike.
pub fn decode_client<'a>(frame: &'a [u8], limits: &Limits) -> Result<ClientFrame<'a>> {
    let (&kind, body) = frame.split_first().ok_or(Error::Truncated)?;
    match kind {
        JSON => json_body(body, limits).map(ClientFrame::Json),
        EVENT => EventView::decode_with(body, limits).map(ClientFrame::Event),
        AUTH => EventView::decode_with(body, limits).map(ClientFrame::Auth),
        _ => Err(Error::UnknownMessage),
    }
}

/// Decodes a relay → client frame. Never panics.
pub fn decode_relay<'a>(frame: &'a [u8], limits: &Limits) -> Result<RelayFrame<'a>> {
    let (&kind, body) = frame.split_first().ok_or(Error::Truncated)?;
    match kind {
        JSON => json_body(body, limits).map(RelayFrame::Json),
        RELAY_EVENT => {
            let (&len, rest) = body.split_first().ok_or(Error::Truncated)?;
            let len = len as usize;
            if rest.len() < len {
                return Err(Error::Truncated);
            }
            let (sub, record) = rest.split_at(len);
            Ok(RelayFrame::Event {
                subscription_id: subscription_id(sub)?,
                event: EventView::decode_with(record, limits)?,
            })
        }
        OK => {
            if body.len() < 33 {
                return Err(Error::Truncated);
            }
            let id = EventId::from_bytes(body[..32].try_into().expect("32 bytes"));
            let accepted = match body[32] {
                0 => false,
                1 => true,
                _ => return Err(Error::NonCanonicalFlag),
            };
            let message = &body[33..];
            if message.len() > limits.max_string_bytes {
                return Err(Error::StringTooLarge);
            }
            let message = core::str::from_utf8(message).map_err(|_| Error::InvalidUtf8)?;
            Ok(RelayFrame::Ok {
                id,
                accepted,
                message,
            })
        }
        EOSE => subscription_id(body).map(RelayFrame::Eose),
        _ => Err(Error::UnknownMessage),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode_event;
    use nostrwire_event::{Keys, Kind, Tag, Timestamp, UnsignedEvent};

    fn record() -> Vec<u8> {
        let keys = Keys::derive(9, 9);
        let event = UnsignedEvent::new(
            &keys,
            Timestamp::new(1_700_000_000).unwrap(),
            Kind(1),
            vec![Tag::from_strs(&["t", "nostr"])],
            "hello",
        )
        .sign(&keys);
        encode_event(&event)
    }

    #[test]
    fn frames_round_trip() {
        let record = record();
        let limits = Limits::default();
        let mut f = Vec::new();
        write_event(&mut f, &record);
        assert!(
            matches!(decode_client(&f, &limits), Ok(ClientFrame::Event(v)) if v.record() == record)
        );
        f.clear();
        write_relay_event(&mut f, "sub", &record);
        match decode_relay(&f, &limits).unwrap() {
            RelayFrame::Event {
                subscription_id,
                event,
            } => {
                assert_eq!(subscription_id, "sub");
                assert_eq!(event.record(), record);
            }
            other => panic!("{other:?}"),
        }
        f.clear();
        let id = EventId::from_bytes([7; 32]);
        write_ok(&mut f, &id, false, "blocked: no");
        assert_eq!(
            decode_relay(&f, &limits).unwrap(),
            RelayFrame::Ok {
                id,
                accepted: false,
                message: "blocked: no"
            }
        );
        f.clear();
        write_json(&mut f, br#"["CLOSE","sub"]"#);
        assert_eq!(
            decode_client(&f, &limits).unwrap(),
            ClientFrame::Json(br#"["CLOSE","sub"]"#)
        );
    }

    #[test]
    fn hostile_frames_are_errors() {
        let limits = Limits::default();
        let record = record();
        let cases: Vec<(Vec<u8>, Error)> = vec![
            (vec![], Error::Truncated),
            (vec![0x7f, 1, 2], Error::UnknownMessage),
            (vec![EVENT], Error::Truncated),
            (
                [&[EVENT][..], &record[..record.len() - 1]].concat(),
                Error::Truncated,
            ),
            (vec![JSON, 0xff, 0xfe], Error::InvalidUtf8),
        ];
        for (frame, want) in cases {
            assert_eq!(
                decode_client(&frame, &limits).unwrap_err(),
                want,
                "{frame:?}"
            );
        }
        let relay_cases: Vec<(Vec<u8>, Error)> = vec![
            (vec![EOSE], Error::BadSubscriptionId),
            (
                [&[EOSE][..], &[b'a'; 65][..]].concat(),
                Error::BadSubscriptionId,
            ),
            (vec![RELAY_EVENT, 9, b'a'], Error::Truncated),
            (vec![RELAY_EVENT, 0, 1], Error::BadSubscriptionId),
            (
                [&[OK][..], &[0; 32][..], &[2][..]].concat(),
                Error::NonCanonicalFlag,
            ),
            ([&[OK][..], &[0; 31][..]].concat(), Error::Truncated),
        ];
        for (frame, want) in relay_cases {
            assert_eq!(
                decode_relay(&frame, &limits).unwrap_err(),
                want,
                "{frame:?}"
            );
        }
        // Every prefix of a valid frame is an error, never a panic.
        let mut f = Vec::new();
        write_relay_event(&mut f, "sub", &record);
        for n in 0..f.len() {
            assert!(decode_relay(&f[..n], &limits).is_err());
        }
    }
}
