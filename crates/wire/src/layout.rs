//! Fixed offsets of the event record and the selective reads they allow
//! ([spec §3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record)).

use nostrwire_event::{hex, EventId, Kind, PublicKey, Signature, Timestamp};

use crate::error::{Error, Result};

/// Form byte of an event record, format version 1.
pub const EVENT_V1: u8 = 0x01;
/// Form byte of a compressed record, envelope version 1
/// ([spec §11](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#11-compressed-records)).
pub const COMPRESSED_V1: u8 = 0x81;

// Filter fields first (kind, created_at, pubkey, id share the first 75
// bytes, usually one or two cache lines); the signature, needed only to
// verify, last.

/// Offset of `kind`, u16 little-endian.
pub const OFF_KIND: usize = 1;
/// Offset of `created_at`, u64 little-endian.
pub const OFF_CREATED_AT: usize = 3;
/// Offset of the 32-byte public key.
pub const OFF_PUBKEY: usize = 11;
/// Offset of the 32-byte id.
pub const OFF_ID: usize = 43;
/// Offset of the 64-byte signature.
pub const OFF_SIG: usize = 75;
/// Length of the fixed prefix; the tag-block length follows.
pub const PREFIX_LEN: usize = 139;

/// True if the encoder stores `value` as hex bytes: non-empty, even length,
/// only `0-9a-f` ([spec §6](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#6-tag-elements-and-hex-compaction)).
#[inline]
pub fn is_hex_compactable(value: &[u8]) -> bool {
    !value.is_empty() && hex::is_lower_hex(value)
}

/// The fixed prefix, after checking the form byte and the length.
#[inline]
fn prefix(record: &[u8]) -> Result<&[u8; PREFIX_LEN]> {
    match record.first() {
        None => Err(Error::Truncated),
        Some(&EVENT_V1) => record
            .get(..PREFIX_LEN)
            .and_then(|p| p.try_into().ok())
            .ok_or(Error::Truncated),
        Some(_) => Err(Error::BadVersion),
    }
}

/// Reads the id of an undecoded record (checks only the form byte and the prefix length).
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record).
#[inline]
pub fn peek_id(record: &[u8]) -> Result<EventId> {
    let p = prefix(record)?;
    Ok(EventId::from_bytes(
        p[OFF_ID..OFF_ID + 32].try_into().expect("32 bytes"),
    ))
}

/// Reads the public key of an undecoded record.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record).
#[inline]
pub fn peek_pubkey(record: &[u8]) -> Result<&[u8; 32]> {
    let p = prefix(record)?;
    Ok(p[OFF_PUBKEY..OFF_PUBKEY + 32].try_into().expect("32 bytes"))
}

/// Reads the signature of an undecoded record.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record).
#[inline]
pub fn peek_sig(record: &[u8]) -> Result<Signature> {
    let p = prefix(record)?;
    Ok(Signature::from_bytes(
        p[OFF_SIG..OFF_SIG + 64].try_into().expect("64 bytes"),
    ))
}

/// Reads `created_at` of an undecoded record (range-checked).
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record).
#[inline]
pub fn peek_created_at(record: &[u8]) -> Result<Timestamp> {
    let p = prefix(record)?;
    read_created_at(p)
}

/// Reads the kind of an undecoded record.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record).
#[inline]
pub fn peek_kind(record: &[u8]) -> Result<Kind> {
    let p = prefix(record)?;
    Ok(read_kind(p))
}

/// Reads kind and public key of an undecoded record: the relay prefilter.
///
/// Spec: [§3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record).
#[inline]
pub fn peek_kind_and_pubkey(record: &[u8]) -> Result<(Kind, PublicKey)> {
    let p = prefix(record)?;
    Ok((
        read_kind(p),
        PublicKey::from_bytes(p[OFF_PUBKEY..OFF_PUBKEY + 32].try_into().expect("32 bytes")),
    ))
}

#[inline]
pub(crate) fn read_kind(p: &[u8; PREFIX_LEN]) -> Kind {
    Kind(u16::from_le_bytes([p[OFF_KIND], p[OFF_KIND + 1]]))
}

#[inline]
pub(crate) fn read_created_at(p: &[u8; PREFIX_LEN]) -> Result<Timestamp> {
    let raw = u64::from_le_bytes(
        p[OFF_CREATED_AT..OFF_CREATED_AT + 8]
            .try_into()
            .expect("8 bytes"),
    );
    Timestamp::new(raw).map_err(|_| Error::TimestampOutOfRange)
}
