//! The binary client–relay transport, `nostrwire.v1` and `nostrwire.v2`
//! ([spec](https://github.com/nostrwire/nostrwire/blob/main/spec/transport.md)).
//!
//! Negotiated with `Sec-WebSocket-Protocol` ([`Version::pick`]); every
//! message is then one binary WebSocket frame: a type byte and a body.
//! Events travel as nwb records (ids and signatures unchanged, so a relay
//! hands out stored records as they are); `OK` and `EOSE` have compact
//! forms; every other NIP-01 message travels as its JSON text in a [`JSON`]
//! frame. Version 2 sends a subscription's events in [`BATCH`] frames, as
//! the relay stores them (compressed with a dictionary set the client
//! holds, [`DICTIONARY_SET`] / [`HOLD`]), and decodes with
//! [`decode_relay_v2`] / [`decode_client_v2`].
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

use crate::{varint, Error, EventView, Limits, Result};

/// The `Sec-WebSocket-Protocol` value that selects version 1.
pub const SUBPROTOCOL: &str = "nostrwire.v1";
/// The `Sec-WebSocket-Protocol` value that selects version 2.
pub const SUBPROTOCOL_V2: &str = "nostrwire.v2";

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
/// Relay → client, version 2: a subscription id, then many records.
pub const BATCH: u8 = 0x06;
/// Relay → client, version 2: the relay's dictionary set (its SHA-256), or
/// none (empty body).
pub const DICTIONARY_SET: u8 = 0x07;
/// Client → relay, version 2: the dictionary sets the client holds.
pub const HOLD: u8 = 0x08;

/// Bytes of records a relay puts in one batch of stored results; a larger
/// record goes alone.
pub const BATCH_TARGET_BYTES: usize = 64 << 10;
/// Most dictionary sets a [`HOLD`] frame names.
pub const MAX_HELD_SETS: usize = 8;
/// Bytes of a dictionary set's name (its SHA-256).
pub const SET_HASH_BYTES: usize = 32;
/// Fewest bytes one entry of a batch takes: a length and a compressed
/// record's form byte, dictionary id, size and one byte of payload.
const MIN_BATCH_ENTRY: usize = 5;

/// A dictionary set's name: the SHA-256 of its file's bytes.
pub type SetHash = [u8; SET_HASH_BYTES];

/// A transport version, as negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// `nostrwire.v1`: one frame per event, uncompressed records.
    V1,
    /// `nostrwire.v2`: batches, records as stored.
    V2,
}

impl Version {
    /// Its `Sec-WebSocket-Protocol` value.
    pub const fn subprotocol(self) -> &'static str {
        match self {
            Version::V1 => SUBPROTOCOL,
            Version::V2 => SUBPROTOCOL_V2,
        }
    }

    /// The highest version among comma-separated `Sec-WebSocket-Protocol`
    /// values that is at most `max`, wherever it is listed; `None`: JSON.
    pub fn pick<'v>(offered: impl IntoIterator<Item = &'v str>, max: Version) -> Option<Version> {
        offered
            .into_iter()
            .flat_map(|v| v.split(','))
            .filter_map(|p| match p.trim() {
                SUBPROTOCOL => Some(Version::V1),
                SUBPROTOCOL_V2 => Some(Version::V2),
                _ => None,
            })
            .filter(|v| *v <= max)
            .max()
    }
}

/// Limits on batch frames, checked before anything is allocated for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most records in one batch.
    pub max_records: usize,
    /// Most bytes in one batch frame.
    pub max_frame_bytes: usize,
}

impl Default for BatchLimits {
    fn default() -> BatchLimits {
        BatchLimits {
            max_records: 4096,
            max_frame_bytes: 2 << 20,
        }
    }
}

/// Longest subscription id in bytes (NIP-01 relays commonly allow 64 chars).
pub const MAX_SUBSCRIPTION_ID_BYTES: usize = 64;

/// A decoded client → relay frame.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum ClientFrame<'a> {
    /// A NIP-01 client message as JSON text (REQ, CLOSE, COUNT, NEG-*, …).
    Json(&'a [u8]),
    /// `EVENT` with its event, validated as an nwb record (not yet verified).
    Event(EventView<'a>),
    /// `AUTH` with its event, validated as an nwb record (not yet verified).
    Auth(EventView<'a>),
    /// Version 2: the dictionary sets the client holds (at most
    /// [`MAX_HELD_SETS`]).
    Hold(Vec<SetHash>),
}

/// A decoded relay → client frame.
#[non_exhaustive]
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
    /// Version 2: events for a subscription, as records (raw or compressed).
    Batch {
        /// The subscription id.
        subscription_id: &'a str,
        /// The records, their framing checked.
        records: Batch<'a>,
    },
    /// Version 2: the set the relay compresses with, if any.
    DictionarySet(Option<SetHash>),
}

/// The records of a batch frame, in order. Decoding checked the framing,
/// every uncompressed record and every compressed record's header, so
/// iterating cannot fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch<'a> {
    bytes: &'a [u8],
    len: usize,
}

impl<'a> Batch<'a> {
    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true for a decoded batch (a batch holds at least one record).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The records: each an event record (`0x01`) or a compressed record
    /// (`0x81`, to be decompressed with the client's sets).
    pub fn records(&self) -> BatchRecords<'a> {
        BatchRecords {
            bytes: self.bytes,
            pos: 0,
        }
    }
}

/// Iterator over a [`Batch`]'s records.
#[derive(Clone, Debug)]
pub struct BatchRecords<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for BatchRecords<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        // Checked when the frame was decoded.
        let len = varint::read(self.bytes, &mut self.pos).ok()? as usize;
        let record = self.bytes.get(self.pos..self.pos + len)?;
        self.pos += len;
        Some(record)
    }
}

/// Builds one [`BATCH`] frame: records are appended until the batch is
/// full ([`BatchBuilder::fits`]), then [`BatchBuilder::finish`] gives the
/// frame. One allocation per batch; no record is copied twice.
#[derive(Debug)]
pub struct BatchBuilder {
    frame: Vec<u8>,
    /// Where the record count goes (two bytes are kept for it).
    count_at: usize,
    count: usize,
    target: usize,
}

impl BatchBuilder {
    /// An empty batch for `subscription_id` (1–64 bytes), holding about
    /// `target` bytes of records (a larger record goes alone).
    pub fn new(subscription_id: &str, target: usize) -> BatchBuilder {
        debug_assert!((1..=MAX_SUBSCRIPTION_ID_BYTES).contains(&subscription_id.len()));
        let mut frame = Vec::with_capacity(4 + subscription_id.len() + target.min(1 << 20));
        frame.push(BATCH);
        frame.push(subscription_id.len() as u8);
        frame.extend_from_slice(subscription_id.as_bytes());
        let count_at = frame.len();
        frame.extend_from_slice(&[0, 0]);
        BatchBuilder {
            frame,
            count_at,
            count: 0,
            target,
        }
    }

    /// Records in it so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True while it holds no record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether a record of `len` bytes still fits: always into an empty
    /// batch, else within the target and under the record limit the
    /// count's two bytes allow.
    pub fn fits(&self, len: usize) -> bool {
        self.count == 0
            || (self.frame.len() - self.count_at + len + 3 <= self.target
                && self.count < BatchLimits::default().max_records)
    }

    /// Appends a record (raw or compressed, as stored).
    pub fn push(&mut self, record: &[u8]) {
        varint::push(&mut self.frame, record.len() as u64);
        self.frame.extend_from_slice(record);
        self.count += 1;
    }

    /// The frame. The count is a minimal varint: one byte below 128
    /// records, else two (the builder holds at most 4,096).
    pub fn finish(mut self) -> Vec<u8> {
        let mut count = [0u8; 10];
        let n = varint::write(&mut count, self.count as u64);
        debug_assert!(n <= 2);
        self.frame[self.count_at..self.count_at + n].copy_from_slice(&count[..n]);
        if n == 1 {
            self.frame.remove(self.count_at + 1);
        }
        self.frame
    }
}

/// Writes a [`DICTIONARY_SET`] frame.
pub fn write_dictionary_set(out: &mut Vec<u8>, set: Option<&SetHash>) {
    out.push(DICTIONARY_SET);
    if let Some(hash) = set {
        out.extend_from_slice(hash);
    }
}

/// Writes a [`HOLD`] frame naming at most [`MAX_HELD_SETS`] sets.
pub fn write_hold(out: &mut Vec<u8>, sets: &[SetHash]) {
    debug_assert!(sets.len() <= MAX_HELD_SETS);
    out.push(HOLD);
    for hash in sets {
        out.extend_from_slice(hash);
    }
}

/// The dictionary id a compressed record (`0x81`) names; `None` for a raw
/// record or a malformed header.
pub fn record_dictionary(record: &[u8]) -> Option<u64> {
    if record.first() != Some(&crate::COMPRESSED_V1) {
        return None;
    }
    let mut pos = 1;
    varint::read(record, &mut pos).ok()
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

fn set_hashes(body: &[u8], max: usize) -> Result<Vec<SetHash>> {
    if body.len() % SET_HASH_BYTES != 0 || body.len() / SET_HASH_BYTES > max {
        return Err(Error::BadDictionaryHash);
    }
    Ok(body
        .chunks_exact(SET_HASH_BYTES)
        .map(|c| c.try_into().expect("32 bytes"))
        .collect())
}

/// Checks a batch's body (after the subscription id): the count against
/// the limits and the bytes left, then every entry.
fn batch<'a>(body: &'a [u8], limits: &Limits) -> Result<Batch<'a>> {
    let batch_limits = BatchLimits::default();
    let mut pos = 0;
    let n = varint::read(body, &mut pos)?;
    if n == 0 {
        return Err(Error::Truncated);
    }
    let room = (body.len() - pos) / MIN_BATCH_ENTRY;
    if n > batch_limits.max_records as u64 || n > room as u64 {
        return Err(Error::TooManyRecords);
    }
    let records = &body[pos..];
    let mut at = 0;
    for _ in 0..n {
        let len = varint::read(records, &mut at)?;
        if len > limits.max_record_bytes as u64 {
            return Err(Error::RecordTooLarge);
        }
        let record = records.get(at..at + len as usize).ok_or(Error::Truncated)?;
        at += len as usize;
        match record.first() {
            Some(&crate::EVENT_V1) => {
                EventView::decode_with(record, limits)?;
            }
            Some(&crate::COMPRESSED_V1) => {
                let mut p = 1;
                varint::read(record, &mut p)?;
                let size = varint::read(record, &mut p)?;
                if size > limits.max_record_bytes as u64 {
                    return Err(Error::RecordTooLarge);
                }
                if p >= record.len() {
                    return Err(Error::Truncated);
                }
            }
            Some(_) => return Err(Error::BadVersion),
            None => return Err(Error::Truncated),
        }
    }
    if at != records.len() {
        return Err(Error::TrailingBytes);
    }
    Ok(Batch {
        bytes: records,
        len: n as usize,
    })
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

/// Decodes a client → relay frame of version 2. Never panics.
pub fn decode_client_v2<'a>(frame: &'a [u8], limits: &Limits) -> Result<ClientFrame<'a>> {
    match frame.split_first() {
        Some((&HOLD, body)) => set_hashes(body, MAX_HELD_SETS).map(ClientFrame::Hold),
        _ => decode_client(frame, limits),
    }
}

/// Decodes a relay → client frame of version 2: batches, the dictionary
/// set, and every version 1 frame but the single `EVENT`. Never panics;
/// limits are checked before anything is allocated or looped over.
pub fn decode_relay_v2<'a>(frame: &'a [u8], limits: &Limits) -> Result<RelayFrame<'a>> {
    let (&kind, body) = frame.split_first().ok_or(Error::Truncated)?;
    match kind {
        BATCH => {
            if frame.len() > BatchLimits::default().max_frame_bytes {
                return Err(Error::BatchTooLarge);
            }
            let (&len, rest) = body.split_first().ok_or(Error::Truncated)?;
            let len = len as usize;
            if rest.len() < len {
                return Err(Error::Truncated);
            }
            let (sub, records) = rest.split_at(len);
            Ok(RelayFrame::Batch {
                subscription_id: subscription_id(sub)?,
                records: batch(records, limits)?,
            })
        }
        DICTIONARY_SET => Ok(RelayFrame::DictionarySet(set_hashes(body, 1)?.pop())),
        RELAY_EVENT => Err(Error::UnknownMessage),
        _ => decode_relay(frame, limits),
    }
}

/// Decodes a relay → client frame of version 1. Never panics.
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

    fn batch_of(records: &[&[u8]]) -> Vec<u8> {
        let mut b = BatchBuilder::new("s", BATCH_TARGET_BYTES);
        for r in records {
            assert!(b.fits(r.len()));
            b.push(r);
        }
        b.finish()
    }

    #[test]
    fn version_pick_takes_the_highest_offered() {
        assert_eq!(
            Version::pick(["nostrwire.v1, nostrwire.v2"], Version::V2),
            Some(Version::V2)
        );
        assert_eq!(
            Version::pick(["foo", " nostrwire.v2 ,nostrwire.v1"], Version::V1),
            Some(Version::V1)
        );
        assert_eq!(Version::pick(["nostrwire.v2"], Version::V1), None);
        assert_eq!(Version::pick(["nostrwire.v3, foo"], Version::V2), None);
        assert_eq!(Version::pick([], Version::V2), None);
    }

    #[test]
    fn batches_round_trip() {
        let limits = Limits::default();
        let record = record();
        // A compressed record's header as stored: 0x81, D = 0, R, payload.
        let compressed = [&[0x81, 0x00][..], &[5], &[1, 2, 3]].concat();
        let frame = batch_of(&[&record, &compressed, &record]);
        match decode_relay_v2(&frame, &limits).unwrap() {
            RelayFrame::Batch {
                subscription_id,
                records,
            } => {
                assert_eq!(subscription_id, "s");
                assert_eq!(records.len(), 3);
                let got: Vec<&[u8]> = records.records().collect();
                assert_eq!(got, vec![&record[..], &compressed[..], &record[..]]);
            }
            other => panic!("{other:?}"),
        }
        // 200 records: a two-byte count.
        let many: Vec<&[u8]> = (0..200).map(|_| &compressed[..]).collect();
        let frame = batch_of(&many);
        match decode_relay_v2(&frame, &limits).unwrap() {
            RelayFrame::Batch { records, .. } => assert_eq!(records.records().count(), 200),
            other => panic!("{other:?}"),
        }
        // v1 decoders know no batch; v2 relays send no single EVENT.
        assert_eq!(decode_relay(&frame, &limits), Err(Error::UnknownMessage));
        let mut single = Vec::new();
        write_relay_event(&mut single, "s", &record);
        assert_eq!(
            decode_relay_v2(&single, &limits),
            Err(Error::UnknownMessage)
        );
    }

    #[test]
    fn batch_builder_keeps_to_its_target() {
        let record = record();
        let mut b = BatchBuilder::new("s", 1000);
        let mut n = 0;
        while b.fits(record.len()) {
            b.push(&record);
            n += 1;
        }
        let frame = b.finish();
        assert!(
            n > 1 && frame.len() <= 1000 + 4,
            "{n} records, {} bytes",
            frame.len()
        );
        // A record larger than the target goes alone.
        let mut b = BatchBuilder::new("s", 10);
        assert!(b.fits(record.len()));
        b.push(&record);
        assert!(!b.fits(1));
    }

    #[test]
    fn dictionary_frames_round_trip() {
        let limits = Limits::default();
        let hash = [0xab; 32];
        let mut f = Vec::new();
        write_dictionary_set(&mut f, Some(&hash));
        assert_eq!(
            decode_relay_v2(&f, &limits),
            Ok(RelayFrame::DictionarySet(Some(hash)))
        );
        f.clear();
        write_dictionary_set(&mut f, None);
        assert_eq!(
            decode_relay_v2(&f, &limits),
            Ok(RelayFrame::DictionarySet(None))
        );
        f.clear();
        write_hold(&mut f, &[hash, [1; 32]]);
        assert_eq!(
            decode_client_v2(&f, &limits),
            Ok(ClientFrame::Hold(vec![hash, [1; 32]]))
        );
        assert_eq!(decode_client(&f, &limits), Err(Error::UnknownMessage));
        assert_eq!(record_dictionary(&[0x81, 0x07, 0x05, 0]), Some(7));
        assert_eq!(record_dictionary(&record()), None);
    }

    #[test]
    fn hostile_v2_frames_are_errors() {
        let limits = Limits::default();
        let record = record();
        let sub = |rest: &[u8]| [&[BATCH, 1, b's'][..], rest].concat();
        let mut huge_count = vec![BATCH, 1, b's'];
        varint::push(&mut huge_count, u64::MAX >> 1);
        let mut record_len_claim = sub(&[1]);
        varint::push(&mut record_len_claim, 1 << 40);
        record_len_claim.extend_from_slice(&[0; 8]);
        let mut bomb = vec![0x81, 0x00];
        varint::push(&mut bomb, 1 << 40);
        bomb.push(0);
        let mut big = vec![0u8; 3 << 20];
        big[0] = BATCH;
        let mut bomb_frame = sub(&[1, bomb.len() as u8]);
        bomb_frame.extend_from_slice(&bomb);
        let cases: Vec<(Vec<u8>, Error)> = vec![
            (vec![BATCH], Error::Truncated),
            (vec![BATCH, 0, 0], Error::BadSubscriptionId),
            (sub(&[]), Error::Truncated),
            (sub(&[0]), Error::Truncated),
            (huge_count, Error::TooManyRecords),
            // Claims 4 records in 10 bytes.
            (
                sub(&[4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
                Error::TooManyRecords,
            ),
            (record_len_claim, Error::RecordTooLarge),
            (bomb_frame, Error::RecordTooLarge),
            (sub(&[1, 5, 0x02, 0, 0, 0, 0]), Error::BadVersion),
            (sub(&[1, 5, 0x81, 0, 4, 0, 0, 9]), Error::TrailingBytes),
            (sub(&[1, 3, 0x81, 0, 4, 0, 0]), Error::Truncated),
            (sub(&[1, 6, 0x81, 0, 4, 0, 0]), Error::Truncated),
            (big, Error::BatchTooLarge),
            (vec![DICTIONARY_SET, 1], Error::BadDictionaryHash),
            (
                [&[DICTIONARY_SET][..], &[0; 64]].concat(),
                Error::BadDictionaryHash,
            ),
            (vec![HOLD], Error::UnknownMessage),
        ];
        for (frame, want) in cases {
            assert_eq!(
                decode_relay_v2(&frame, &limits).unwrap_err(),
                want,
                "{:?}",
                &frame[..frame.len().min(16)]
            );
        }
        let client_cases: Vec<(Vec<u8>, Error)> = vec![
            (vec![HOLD, 1], Error::BadDictionaryHash),
            (
                [&[HOLD][..], &[0; 32 * 9]].concat(),
                Error::BadDictionaryHash,
            ),
            (sub(&[1]), Error::UnknownMessage),
            (vec![DICTIONARY_SET], Error::UnknownMessage),
        ];
        for (frame, want) in client_cases {
            assert_eq!(
                decode_client_v2(&frame, &limits).unwrap_err(),
                want,
                "{frame:?}"
            );
        }
        // A bad record inside a batch is the record's error.
        let mut bad = record.clone();
        bad[1..3].copy_from_slice(&[0, 0]);
        let last = bad.len() - 1;
        bad[last] = 0xff;
        let frame = batch_of(&[&record, &bad]);
        assert!(decode_relay_v2(&frame, &limits).is_err());
        // Every prefix of a valid batch is an error, never a panic.
        let frame = batch_of(&[&record, &[0x81, 0, 3, 9][..], &record]);
        assert!(decode_relay_v2(&frame, &limits).is_ok());
        for n in 0..frame.len() {
            assert!(decode_relay_v2(&frame[..n], &limits).is_err(), "prefix {n}");
        }
    }
}
