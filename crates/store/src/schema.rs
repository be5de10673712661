//! Stage 6a: table names and key encodings of the LMDB store.
//!
//! Byte diagrams and the reasoning are in `docs/design-store.md`. Every key
//! of a time-ordered index ends with `created_at (8, BE) ‖ serial (8, BE)`
//! (its block's first entry), so a reverse range scan over one prefix walks
//! newest → oldest. Big-endian is used on purpose: LMDB compares keys as
//! bytes.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use nostrwire_event::{EventId, Kind, PublicKey, Timestamp};
use sha2::{Digest, Sha256};

/// A key made of `parts` in order.
pub(crate) fn key(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.extend_from_slice(p);
    }
    out
}

/// On-disk schema version, stored in `meta`. A database of another version
/// is refused on open (`StoreError::Schema`); a later release that changes
/// the layout raises it and upgrades older databases when it opens them.
pub const SCHEMA_VERSION: u32 = 1;

/// Table names.
pub mod table {
    /// serial → stored record (header byte + nwb record), or its first
    /// part when cut to fill whole pages (the rest in [`TAILS`]).
    pub const EVENTS: &str = "events";
    /// The same as [`EVENTS`] for replaceable and addressable events: their
    /// versions come and go, and the holes they leave would stay in the
    /// leaves of `events` (LMDB merges a leaf only below a quarter full).
    pub const REPLACEABLE: &str = "replaceable";
    /// serial → the end of a stored value cut to fit whole overflow pages
    /// (its header in `events` has bit 1 set).
    pub const TAILS: &str = "tails";
    /// id prefix ([`super::ID_PREFIX`] bytes) ‖ serial → ().
    pub const IDS: &str = "ids";
    /// created_at ‖ serial → block of later entries (`encode_time_blocks`).
    pub const CREATED: &str = "created";
    /// kind ‖ created_at ‖ serial → block.
    pub const KIND: &str = "kind";
    /// pubkey ‖ created_at ‖ serial → block.
    pub const PUBKEY: &str = "pubkey";
    /// pubkey ‖ kind ‖ created_at ‖ serial → block.
    pub const PUBKEY_KIND: &str = "pubkey_kind";
    /// tag key ‖ created_at ‖ serial → block.
    pub const TAG: &str = "tag";
    /// serial → [`super::PendingRow`]: stored events whose entries in the
    /// time-ordered indexes ([`TIME_ORDERED`]) and (for rows that carry
    /// it) in `ids` are not written yet.
    pub const PENDING: &str = "pending";
    /// serial → [`super::PendingRow`]: removed events whose entries in the
    /// time-ordered indexes are not deleted yet.
    pub const REMOVED: &str = "removed";
    /// The indexes whose keys end with `created_at ‖ serial`, written in
    /// batches from `pending`.
    pub const TIME_ORDERED: [&str; 5] = [CREATED, KIND, PUBKEY, PUBKEY_KIND, TAG];
    /// replaceable / addressable address → serial of the version kept.
    pub const REPLACE: &str = "replace";
    /// deleted id ‖ pubkey of a deletion's author → (): a tombstone per
    /// author that asked, so one author's request never replaces
    /// another's (only the event's own author binds it).
    pub const DELETED_IDS: &str = "deleted_ids";
    /// address → created_at of the newest deletion of that address.
    pub const DELETED_ADDRS: &str = "deleted_addrs";
    /// expiration ‖ serial → ().
    pub const EXPIRATION: &str = "expiration";
    /// term key ‖ serial → a block of postings (`encode_postings`); and
    /// term key ‖ FF×8 → number of events holding the term (8, LE). In the
    /// search environment.
    pub const SEARCH: &str = "search";
    /// serial → stored value (the record, without the header) of a removed
    /// event whose postings the search environment may still hold.
    pub const SEARCH_REMOVED: &str = "search_removed";
    /// metadata: schema version, next serial, dictionaries, search totals.
    pub const META: &str = "meta";
}

/// `meta` key of the replicated log's position the database is applied up
/// to (a relay cluster's stream sequence, u64 LE), written in the
/// transaction of the batch that reached it.
pub const APPLIED_SEQUENCE: &[u8] = b"applied_sequence";

/// `meta` key of an operator's setting ([`crate::EventStore::setting`]):
/// `setting:` and its name; the value is the setting's own.
pub fn setting_key(name: &str) -> Vec<u8> {
    [b"setting:".as_slice(), name.as_bytes()].concat()
}

/// Length of the `created_at ‖ serial` suffix.
pub const TIME_SUFFIX: usize = 16;

/// `created_at ‖ serial`.
pub fn time_suffix(created_at: Timestamp, serial: u64) -> [u8; TIME_SUFFIX] {
    entry_suffix((created_at.as_u64(), serial))
}

/// `created_at ‖ serial` of an entry.
pub fn entry_suffix((created_at, serial): TimeEntry) -> [u8; TIME_SUFFIX] {
    let mut out = [0u8; TIME_SUFFIX];
    out[..8].copy_from_slice(&created_at.to_be_bytes());
    out[8..].copy_from_slice(&serial.to_be_bytes());
    out
}

/// An entry of a time-ordered index: `(created_at, serial)`. Entries sort
/// as their keys do.
pub type TimeEntry = (u64, u64);

/// Longest key of a time-ordered index: `pubkey ‖ kind ‖ created_at ‖
/// serial` in `pubkey_kind`.
pub const MAX_TIME_KEY: usize = 34 + TIME_SUFFIX;

/// A full key of a time-ordered index (`prefix ‖ created_at ‖ serial`),
/// held inline: a batch of index changes is thousands of them, sorted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TimeKey {
    len: u8,
    bytes: [u8; MAX_TIME_KEY],
}

impl TimeKey {
    /// `prefix ‖ suffix`; `None` when that is longer than [`MAX_TIME_KEY`].
    pub fn new(prefix: &[u8], suffix: &[u8; TIME_SUFFIX]) -> Option<TimeKey> {
        let len = prefix.len() + TIME_SUFFIX;
        let mut bytes = [0u8; MAX_TIME_KEY];
        bytes.get_mut(..prefix.len())?.copy_from_slice(prefix);
        bytes.get_mut(prefix.len()..len)?.copy_from_slice(suffix);
        Some(TimeKey {
            len: len as u8,
            bytes,
        })
    }

    /// The key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The key without its `created_at ‖ serial` suffix.
    pub fn prefix(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len) - TIME_SUFFIX]
    }

    /// `(created_at, serial)`.
    pub fn entry(&self) -> TimeEntry {
        split_time_suffix(self.as_bytes()).expect("a time key ends with its suffix")
    }
}

impl Ord for TimeKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl PartialOrd for TimeKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Debug for TimeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TimeKey({:02x?})", self.as_bytes())
    }
}

/// Reads `(created_at, serial)` from the end of an index key; `None` when
/// the key is shorter than the suffix.
pub fn split_time_suffix(key: &[u8]) -> Option<TimeEntry> {
    let (_, suffix) = key.split_last_chunk::<TIME_SUFFIX>()?;
    let (created, serial) = suffix.split_at(8);
    Some((
        u64::from_be_bytes(created.try_into().ok()?),
        u64::from_be_bytes(serial.try_into().ok()?),
    ))
}

/// The length of the prefix before `created_at ‖ serial` in the keys of a
/// time-ordered index ([`table::TIME_ORDERED`]).
pub fn time_prefix_len(table: &str) -> usize {
    match table {
        table::CREATED => 0,
        table::KIND => 2,
        table::PUBKEY => 32,
        table::PUBKEY_KIND => 34,
        _ => TAG_PREFIX,
    }
}

/// Bytes an entry takes in a block after `prev`.
fn time_entry_len(prev: TimeEntry, entry: TimeEntry) -> usize {
    nostrwire_wire::varint::len(entry.0.wrapping_sub(prev.0))
        + nostrwire_wire::varint::len(zigzag(entry.1.wrapping_sub(prev.1)))
}

/// Serial deltas are signed: an event created earlier may be stored later.
fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// Splits entries (strictly increasing) into the blocks of a time-ordered
/// index: each block is keyed by its first entry, and takes the following
/// ones while its value stays within `max_bytes`. Returns (key suffix,
/// value) per block; the value holds, for each entry after the first,
/// `varint(created_at − previous created_at) ‖ varint(zigzag(serial −
/// previous serial))`.
pub fn encode_time_blocks(
    entries: &[TimeEntry],
    max_bytes: usize,
) -> Vec<([u8; TIME_SUFFIX], Vec<u8>)> {
    let mut blocks = Vec::new();
    let mut rest = entries;
    while let Some((&first, tail)) = rest.split_first() {
        let mut value = Vec::new();
        let mut prev = first;
        let mut taken = 0;
        for &entry in tail {
            debug_assert!(entry > prev, "entries strictly increase");
            if value.len() + time_entry_len(prev, entry) > max_bytes {
                break;
            }
            nostrwire_wire::varint::push(&mut value, entry.0.wrapping_sub(prev.0));
            nostrwire_wire::varint::push(&mut value, zigzag(entry.1.wrapping_sub(prev.1)));
            prev = entry;
            taken += 1;
        }
        blocks.push((entry_suffix(first), value));
        rest = &tail[taken..];
    }
    blocks
}

/// Appends the entries of the block stored under `key` (any prefix, then
/// the first entry) to `out`, in increasing order. Rejects (never panics
/// on) short keys, truncated or overlong varints, times that overflow and
/// entries that do not strictly increase.
pub fn decode_time_block(key: &[u8], value: &[u8], out: &mut Vec<TimeEntry>) -> Result<(), String> {
    use nostrwire_wire::varint;
    let bad = |what: &str| format!("bad time-ordered index block: {what}");
    let mut prev = split_time_suffix(key).ok_or_else(|| bad("short key"))?;
    // Each entry after the key's takes at least two bytes.
    out.reserve(1 + value.len() / 2);
    out.push(prev);
    let mut pos = 0;
    while pos < value.len() {
        let dt = varint::read(value, &mut pos).map_err(|e| bad(&e.to_string()))?;
        let ds = varint::read(value, &mut pos).map_err(|e| bad(&e.to_string()))?;
        let created = prev
            .0
            .checked_add(dt)
            .ok_or_else(|| bad("created_at out of range"))?;
        let entry = (created, prev.1.wrapping_add(unzigzag(ds)));
        if entry <= prev {
            return Err(bad("entries do not increase"));
        }
        out.push(entry);
        prev = entry;
    }
    Ok(())
}

/// Serial as a key or value.
pub fn serial_bytes(serial: u64) -> [u8; 8] {
    serial.to_be_bytes()
}

/// Serial from its bytes.
pub fn serial_from(bytes: &[u8]) -> Option<u64> {
    bytes.try_into().ok().map(u64::from_be_bytes)
}

/// Kind prefix.
pub fn kind_prefix(kind: Kind) -> [u8; 2] {
    kind.as_u16().to_be_bytes()
}

/// Pubkey ‖ kind prefix.
pub fn pubkey_kind_prefix(pubkey: &PublicKey, kind: Kind) -> [u8; 34] {
    let mut out = [0u8; 34];
    out[..32].copy_from_slice(pubkey.as_bytes());
    out[32..].copy_from_slice(&kind_prefix(kind));
    out
}

/// Longest `d` value stored verbatim in an address; longer ones are hashed.
pub const MAX_INLINE_TAG_VALUE: usize = 96;

/// Length of a tag key prefix: letter (1) ‖ value key (8).
pub const TAG_PREFIX: usize = 9;

/// The index prefix for a single-letter tag with this first value:
/// `letter ‖ value key`, where the value key is the first 8 bytes of the
/// value's 32 bytes when it is 64-char lowercase hex (ids, pubkeys), else
/// the first 8 bytes of its SHA-256. Different values may share a key:
/// index hits are always re-checked against the event.
pub fn tag_prefix(letter: u8, value: &str) -> [u8; TAG_PREFIX] {
    let bytes = value.as_bytes();
    let mut out = [0u8; TAG_PREFIX];
    out[0] = letter;
    if bytes.len() == 64 && nostrwire_event::hex::is_lower_hex(bytes) {
        let raw: [u8; 8] = nostrwire_event::hex::decode_array(&bytes[..16]).expect("checked");
        out[1..].copy_from_slice(&raw);
    } else {
        out[1..].copy_from_slice(&Sha256::digest(bytes)[..8]);
    }
    out
}

/// Length of a `pending` row before its tag keys, without the id.
const PENDING_FIXED: usize = 8 + 2 + 32;

/// The value of a `pending` or `removed` row: `created_at (8, BE) ‖ kind
/// (2, BE) ‖ pubkey (32) ‖ [id (32)] ‖ tag key (9) × n`, the tag keys
/// sorted and distinct. The id is there when the event's `ids` entry waits
/// too (`pending` rows); rows of both forms tell apart by
/// length, since 32 is not a multiple of 9.
pub fn pending_value(
    created_at: Timestamp,
    kind: Kind,
    pubkey: &PublicKey,
    id: Option<&EventId>,
    tag_keys: &[[u8; TAG_PREFIX]],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(PENDING_FIXED + 32 + tag_keys.len() * TAG_PREFIX);
    out.extend_from_slice(&created_at.as_u64().to_be_bytes());
    out.extend_from_slice(&kind_prefix(kind));
    out.extend_from_slice(pubkey.as_bytes());
    if let Some(id) = id {
        out.extend_from_slice(id.as_bytes());
    }
    for key in tag_keys {
        out.extend_from_slice(key);
    }
    out
}

/// A `pending` row, read in place: what the keys of the time-ordered
/// indexes are made of.
#[derive(Clone, Copy, Debug)]
pub struct PendingRow<'a> {
    /// `created_at` of the event.
    pub created_at: u64,
    kind: &'a [u8; 2],
    pubkey: &'a [u8; 32],
    id: Option<&'a [u8; 32]>,
    tag_keys: &'a [u8],
}

impl<'a> PendingRow<'a> {
    /// Reads a row of either form; `None` when it is shorter than the fixed
    /// fields or its tag keys are not whole.
    pub fn parse(value: &'a [u8]) -> Option<PendingRow<'a>> {
        let (created, rest) = value.split_first_chunk::<8>()?;
        let (kind, rest) = rest.split_first_chunk::<2>()?;
        let (pubkey, rest) = rest.split_first_chunk::<32>()?;
        let (id, tag_keys) = if rest.len() % TAG_PREFIX == 0 {
            (None, rest)
        } else {
            let (id, tag_keys) = rest.split_first_chunk::<32>()?;
            (Some(id), tag_keys)
        };
        (tag_keys.len() % TAG_PREFIX == 0).then_some(PendingRow {
            created_at: u64::from_be_bytes(*created),
            kind,
            pubkey,
            id,
            tag_keys,
        })
    }

    /// The event's id, when its `ids` entry waits with the row.
    pub fn id(&self) -> Option<&'a [u8; 32]> {
        self.id
    }

    /// Calls `f` with each key prefix (the key without its `created_at ‖
    /// serial` suffix) the event has in `table`, one of [`table::TIME_ORDERED`].
    pub fn for_each_prefix(&self, table: &str, mut f: impl FnMut(&[u8])) {
        match table {
            table::CREATED => f(&[]),
            table::KIND => f(self.kind),
            table::PUBKEY => f(self.pubkey),
            table::PUBKEY_KIND => {
                let mut prefix = [0u8; 34];
                prefix[..32].copy_from_slice(self.pubkey);
                prefix[32..].copy_from_slice(self.kind);
                f(&prefix)
            }
            table::TAG => self.tag_keys.chunks_exact(TAG_PREFIX).for_each(f),
            _ => {}
        }
    }
}

/// [`tag_prefix`] of a value held as its 32 bytes (a 64-char lowercase
/// hex string), without re-encoding it.
pub fn tag_prefix_raw32(letter: u8, raw: &[u8; 32]) -> [u8; TAG_PREFIX] {
    let mut out = [0u8; TAG_PREFIX];
    out[0] = letter;
    out[1..].copy_from_slice(&raw[..8]);
    out
}

/// The address of a replaceable (`kind ‖ pubkey`) or addressable
/// (`kind ‖ pubkey ‖ d`) event; `d` is hashed when long.
pub fn address(kind: Kind, pubkey: &PublicKey, d: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(34 + 40);
    out.extend_from_slice(&kind_prefix(kind));
    out.extend_from_slice(pubkey.as_bytes());
    if let Some(d) = d {
        if d.len() <= MAX_INLINE_TAG_VALUE {
            out.push(0);
            out.extend_from_slice(d.as_bytes());
        } else {
            out.push(2);
            out.extend_from_slice(&Sha256::digest(d.as_bytes()));
        }
    }
    out
}

/// Key of the expiration index.
pub fn expiration_key(expires: u64, serial: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&expires.to_be_bytes());
    out[8..].copy_from_slice(&serial.to_be_bytes());
    out
}

/// A search term's key prefix: `len (1) ‖ UTF-8 bytes`. The length byte keeps
/// `ab` from being a prefix of `abc`.
pub fn term_prefix(term: &str) -> Vec<u8> {
    debug_assert!(term.len() <= crate::search::MAX_TERM_BYTES);
    let mut out = Vec::with_capacity(1 + term.len() + 8);
    out.push(term.len() as u8);
    out.extend_from_slice(term.as_bytes());
    out
}

/// Key of a term's document frequency in the search index: `term prefix ‖
/// FF×8`. It sorts right after the term's newest posting (serials never reach
/// `u64::MAX`), so adding a posting and bumping the count touch one page.
pub fn df_key(prefix: &[u8]) -> Vec<u8> {
    search_key(prefix, u64::MAX)
}

/// What the search index keeps about a term beside its postings, under
/// [`df_key`]: the number of events holding it (its document frequency)
/// and the serial of its last posting, so that appending to the term does
/// not decode its last block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TermCounts {
    /// Events holding the term.
    pub df: u64,
    /// Serial of the term's last posting; `None` when not recorded (an
    /// index written before the field existed, or after a removal that
    /// may have taken that posting out).
    pub last: Option<u64>,
}

/// `df (u64 LE) ‖ [varint(last)]`: a value of 8 bytes is a count alone.
pub fn encode_term_counts(counts: TermCounts) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 10);
    out.extend_from_slice(&counts.df.to_le_bytes());
    if let Some(last) = counts.last {
        nostrwire_wire::varint::push(&mut out, last);
    }
    out
}

/// Reads [`encode_term_counts`]'s bytes; rejects (never panics on) short
/// values, trailing bytes and overlong varints.
pub fn decode_term_counts(value: &[u8]) -> Result<TermCounts, String> {
    let bad = |what: &str| format!("bad search term counts: {what}");
    let (df, rest) = value
        .split_first_chunk::<8>()
        .ok_or_else(|| bad("shorter than 8 bytes"))?;
    let df = u64::from_le_bytes(*df);
    if rest.is_empty() {
        return Ok(TermCounts { df, last: None });
    }
    let mut pos = 0;
    let last = nostrwire_wire::varint::read(rest, &mut pos).map_err(|e| bad(&e.to_string()))?;
    if pos != rest.len() {
        return Err(bad("trailing bytes"));
    }
    if last == u64::MAX {
        return Err(bad("serial out of range"));
    }
    Ok(TermCounts {
        df,
        last: Some(last),
    })
}

/// Key of a block of postings in the search index: `term prefix ‖ serial
/// (8, BE)`, where the serial is at most the block's first posting and
/// above every posting of the term's previous block.
pub fn search_key(prefix: &[u8], serial: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + 8);
    out.extend_from_slice(prefix);
    out.extend_from_slice(&serial.to_be_bytes());
    out
}

/// A block of a time-ordered index holds at most this many bytes. Small
/// enough that a block (and its key) stays inside a leaf page: LMDB moves
/// values over ~2 KB to overflow pages.
pub const BLOCK_BYTES: usize = 1024;

/// A block of search postings grows to about this many bytes before the
/// next posting starts a new block. The last block of a term grows with
/// each batch, in the middle of the index, and a leaf that overflows is
/// split in half: smaller blocks fill the leaves better. 500,000 events
/// published through the relay: the search index took 63.6 MB of leaves
/// with blocks of 1,024 bytes, 54.6 MB with 512 and 58.0 MB with 256.
pub const SEARCH_BLOCK_BYTES: usize = 512;

/// One event in a term's postings: the event's serial, how often the term
/// occurs in it, and its indexed length (both for BM25).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posting {
    /// Serial of the event.
    pub serial: u64,
    /// Occurrences of the term in the event (at least 1).
    pub tf: u16,
    /// Terms the event has in all, as a posting keeps it: exact below 128,
    /// otherwise rounded to its [`length_code`] bucket ([`stored_length`]).
    pub len: u16,
}

/// Version of the posting layout and of the rules for what is indexed,
/// kept in the search environment's `meta`; an index written in another
/// is rebuilt after the database opens. 1: `varint(Δserial) ‖ varint(tf)
/// ‖ varint(len)`; 2: the present layout; 3: the same layout, encrypted
/// contents no longer indexed ([`crate::search::is_ciphertext`]), since
/// removing an event takes out the postings its terms name today.
pub const POSTING_FORMAT: u32 = 3;

/// Lengths below this are kept exactly by [`length_code`].
const EXACT_LENGTHS: u16 = 128;
/// Codes [`length_code`] produces are below this.
const LENGTH_CODES: u8 = 200;

/// A length in one byte: exact below 128; above, its power of two and the
/// next three bits (an error of at most 1/16, which BM25's length
/// normalisation does not notice).
pub fn length_code(len: u16) -> u8 {
    if len < EXACT_LENGTHS {
        return len as u8;
    }
    let exponent = 15 - len.leading_zeros() as u16; // 7..=15
    let mantissa = (len >> (exponent - 3)) & 7;
    (EXACT_LENGTHS + (exponent - 7) * 8 + mantissa) as u8
}

/// The length a [`length_code`] stands for (the middle of its bucket), or
/// `None` for a byte no length encodes to.
pub fn code_length(code: u8) -> Option<u16> {
    (code < LENGTH_CODES).then(|| CODE_LENGTHS[usize::from(code)])
}

/// [`code_length`] of every code below [`LENGTH_CODES`].
const CODE_LENGTHS: [u16; LENGTH_CODES as usize] = {
    let mut table = [0u16; LENGTH_CODES as usize];
    let mut code = 0;
    while code < LENGTH_CODES as usize {
        table[code] = if code < EXACT_LENGTHS as usize {
            code as u16
        } else {
            let step = (code - EXACT_LENGTHS as usize) as u16;
            let shift = step / 8 + 4; // exponent − 3
            ((8 + step % 8) << shift) + (1 << (shift - 1))
        };
        code += 1;
    }
    table
};

/// `len` as the postings keep it.
pub fn stored_length(len: u16) -> u16 {
    code_length(length_code(len)).unwrap_or(len)
}

/// Appends `posting` to a block whose previous posting (or, for the first
/// one, whose key) has serial `prev`: `varint((serial − prev) << 1 | t)`,
/// then `varint(tf)` only if `t` (tf above 1), then the length's
/// [`length_code`]. Serials in a block strictly increase.
pub fn push_posting(block: &mut Vec<u8>, prev: u64, posting: Posting) {
    debug_assert!(posting.serial >= prev);
    let delta = posting.serial - prev;
    let counted = posting.tf > 1;
    nostrwire_wire::varint::push(block, delta << 1 | u64::from(counted));
    if counted {
        nostrwire_wire::varint::push(block, u64::from(posting.tf));
    }
    block.push(length_code(posting.len));
}

/// Encodes postings (serials strictly increasing, the first at least
/// `key_serial`) as the value of the block keyed by `key_serial`.
pub fn encode_postings(key_serial: u64, postings: &[Posting]) -> Vec<u8> {
    let mut block = Vec::with_capacity(postings.len() * 3);
    let mut prev = key_serial;
    for &posting in postings {
        push_posting(&mut block, prev, posting);
        prev = posting.serial;
    }
    block
}

/// Decodes the block keyed by `key_serial`. Rejects (never panics on)
/// truncated or overlong varints, values out of range, serials that do not
/// strictly increase and spellings the encoder never writes.
pub fn decode_postings(key_serial: u64, block: &[u8]) -> Result<Vec<Posting>, String> {
    let mut out = Vec::with_capacity(block.len() / 2);
    walk_postings(key_serial, block, |posting| out.push(posting))?;
    Ok(out)
}

/// The serial of a block's last posting, checked as [`decode_postings`]
/// checks, without collecting the postings.
pub fn last_posting_serial(key_serial: u64, block: &[u8]) -> Result<u64, String> {
    let mut last = key_serial;
    walk_postings(key_serial, block, |posting| last = posting.serial)?;
    Ok(last)
}

fn walk_postings(key_serial: u64, block: &[u8], mut f: impl FnMut(Posting)) -> Result<(), String> {
    use nostrwire_wire::varint;
    let bad = |what: &str| format!("bad search posting block: {what}");
    if block.is_empty() {
        return Err(bad("empty"));
    }
    let mut pos = 0;
    let mut prev = key_serial;
    let mut first = true;
    while pos < block.len() {
        let head = varint::read(block, &mut pos).map_err(|e| bad(&e.to_string()))?;
        let delta = head >> 1;
        if delta == 0 && !first {
            return Err(bad("serials do not increase"));
        }
        let serial = prev
            .checked_add(delta)
            .filter(|&s| s < u64::MAX)
            .ok_or_else(|| bad("serial out of range"))?;
        let tf = if head & 1 == 1 {
            let v = varint::read(block, &mut pos).map_err(|e| bad(&e.to_string()))?;
            match u16::try_from(v) {
                Ok(tf) if tf > 1 => tf,
                Ok(_) => return Err(bad("a count of 0 or 1 written out")),
                Err(_) => return Err(bad("count over 65,535")),
            }
        } else {
            1
        };
        let code = *block.get(pos).ok_or_else(|| bad("truncated"))?;
        pos += 1;
        let len = code_length(code).ok_or_else(|| bad("length code out of range"))?;
        f(Posting { serial, tf, len });
        prev = serial;
        first = false;
    }
    Ok(())
}

/// A `deleted_ids` key: the deleted id, then the pubkey of the deletion's author.
pub fn tombstone_key(id: &EventId, author: &PublicKey) -> [u8; 64] {
    let mut key = [0u8; 64];
    key[..32].copy_from_slice(id.as_bytes());
    key[32..].copy_from_slice(author.as_bytes());
    key
}

/// Bytes of an event id that an `ids` key holds.
pub const ID_PREFIX: usize = 8;

/// An `ids` key: the first [`ID_PREFIX`] bytes of the id, then the serial.
/// Ids that share those bytes (rare by chance, but anyone can make such
/// ids with about 2³² hashes) get one key each: a lookup walks the keys of
/// the prefix and checks each event's own id.
pub fn id_entry(id: &[u8; 32], serial: u64) -> [u8; ID_PREFIX + 8] {
    let mut key = [0; ID_PREFIX + 8];
    key[..ID_PREFIX].copy_from_slice(&id[..ID_PREFIX]);
    key[ID_PREFIX..].copy_from_slice(&serial_bytes(serial));
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_counts_golden_bytes_and_hostile_values() {
        let counts = TermCounts {
            df: 3,
            last: Some(300),
        };
        let bytes = encode_term_counts(counts);
        assert_eq!(bytes, [3, 0, 0, 0, 0, 0, 0, 0, 0xac, 0x02]);
        assert_eq!(decode_term_counts(&bytes), Ok(counts));
        // A count alone: what indexes written before the field hold.
        let alone = TermCounts { df: 7, last: None };
        assert_eq!(encode_term_counts(alone), 7u64.to_le_bytes());
        assert_eq!(decode_term_counts(&7u64.to_le_bytes()), Ok(alone));
        for bad in [
            &[][..],
            &[1, 0, 0, 0],
            &[1, 0, 0, 0, 0, 0, 0, 0, 0x80],
            &[1, 0, 0, 0, 0, 0, 0, 0, 0xac, 0x02, 0],
            &[1, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x00],
            &[
                1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
        ] {
            assert!(decode_term_counts(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn time_suffix_sorts_by_time_then_serial() {
        let a = time_suffix(Timestamp::new(5).unwrap(), 9);
        let b = time_suffix(Timestamp::new(6).unwrap(), 1);
        let c = time_suffix(Timestamp::new(6).unwrap(), 2);
        assert!(a < b && b < c);
        assert_eq!(split_time_suffix(&c), Some((6, 2)));
        assert_eq!(split_time_suffix(&c[1..]), None);
    }

    #[test]
    fn time_keys_hold_their_bytes_and_sort_as_them() {
        let suffix = entry_suffix((0x0102, 7));
        let k = TimeKey::new(b"ab", &suffix).unwrap();
        assert_eq!(
            k.as_bytes(),
            [b'a', b'b', 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 7]
        );
        assert_eq!(k.prefix(), b"ab");
        assert_eq!(k.entry(), (0x0102, 7));
        // Ordered by prefix, then time, then serial, like the keys.
        let later = TimeKey::new(b"ab", &entry_suffix((0x0103, 1))).unwrap();
        let other = TimeKey::new(b"ac", &entry_suffix((1, 1))).unwrap();
        assert!(k < later && later < other);
        // The longest prefix (author and kind) fits; a longer one does not.
        assert!(TimeKey::new(&[7; 34], &suffix).is_some());
        assert!(TimeKey::new(&[7; 35], &suffix).is_none());
        assert_eq!(TimeKey::new(&[], &suffix).unwrap().as_bytes(), suffix);
    }

    #[test]
    fn tag_prefix_forms() {
        let hex = format!("0102030405060708{}", "ab".repeat(24));
        assert_eq!(
            tag_prefix(b'e', &hex),
            *b"e\x01\x02\x03\x04\x05\x06\x07\x08"
        );
        let raw: [u8; 32] = nostrwire_event::hex::decode_array(hex.as_bytes()).unwrap();
        assert_eq!(tag_prefix_raw32(b'e', &raw), tag_prefix(b'e', &hex));
        // Anything else is hashed: uppercase hex, other lengths, text.
        let upper = hex.to_uppercase();
        assert_eq!(
            tag_prefix(b'e', &upper)[1..],
            Sha256::digest(upper.as_bytes())[..8]
        );
        assert_eq!(
            tag_prefix(b't', "nostr")[1..],
            Sha256::digest(b"nostr")[..8]
        );
        assert_ne!(tag_prefix(b't', "ab"), tag_prefix(b't', "abc"));
        assert_ne!(tag_prefix(b't', "ab"), tag_prefix(b'r', "ab"));
    }

    #[test]
    fn search_keys_sort_by_serial_within_a_term() {
        let p = term_prefix("nostr");
        assert_eq!(p, b"\x05nostr");
        assert!(search_key(&p, 2) < search_key(&p, 256));
        assert!(!term_prefix("nostrich").starts_with(&p));
        assert!(search_key(&p, u64::MAX - 1) < df_key(&p));
        assert!(df_key(&p) < search_key(&term_prefix("nostrz"), 0));
    }

    #[test]
    fn pending_rows_have_golden_bytes() {
        let tag_keys = [*b"e\x01\x02\x03\x04\x05\x06\x07\x08", *b"tabcdefgh"];
        let pubkey = PublicKey::from_bytes([7; 32]);
        let value = pending_value(
            Timestamp::new(0x0102).unwrap(),
            Kind(3),
            &pubkey,
            None,
            &tag_keys,
        );
        assert_eq!(&value[..10], &[0, 0, 0, 0, 0, 0, 1, 2, 0, 3]);
        assert_eq!(&value[10..42], &[7; 32]);
        assert_eq!(&value[42..], b"e\x01\x02\x03\x04\x05\x06\x07\x08tabcdefgh");
        let row = PendingRow::parse(&value).unwrap();
        assert_eq!(row.created_at, 0x0102);
        assert_eq!(row.id(), None);
        // With the id: after the pubkey, before the tag keys.
        let id = EventId::from_bytes([9; 32]);
        let with_id = pending_value(
            Timestamp::new(0x0102).unwrap(),
            Kind(3),
            &pubkey,
            Some(&id),
            &tag_keys,
        );
        assert_eq!(&with_id[..42], &value[..42]);
        assert_eq!(&with_id[42..74], &[9; 32]);
        assert_eq!(&with_id[74..], &value[42..]);
        let row_with_id = PendingRow::parse(&with_id).unwrap();
        assert_eq!(row_with_id.id(), Some(&[9; 32]));
        for table in table::TIME_ORDERED {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            row.for_each_prefix(table, |p| a.push(p.to_vec()));
            row_with_id.for_each_prefix(table, |p| b.push(p.to_vec()));
            assert_eq!(a, b, "{table}");
        }
        assert!(PendingRow::parse(&with_id[..73]).is_none());
        assert_eq!(
            PendingRow::parse(&with_id[..74]).unwrap().id(),
            Some(&[9; 32])
        );
        let prefixes = |table| {
            let mut out = Vec::new();
            row.for_each_prefix(table, |p| out.push(p.to_vec()));
            out
        };
        assert_eq!(prefixes(table::CREATED), vec![Vec::<u8>::new()]);
        assert_eq!(prefixes(table::KIND), vec![vec![0, 3]]);
        assert_eq!(prefixes(table::PUBKEY), vec![vec![7; 32]]);
        assert_eq!(
            prefixes(table::PUBKEY_KIND),
            vec![pubkey_kind_prefix(&pubkey, Kind(3)).to_vec()]
        );
        assert_eq!(
            prefixes(table::TAG),
            vec![tag_keys[0].to_vec(), tag_keys[1].to_vec()]
        );
        assert!(PendingRow::parse(&value[..value.len() - 1]).is_none());
        assert!(PendingRow::parse(&value[..41]).is_none());
        assert!(PendingRow::parse(&value[..42]).is_some());
    }

    #[test]
    fn posting_blocks_have_golden_bytes() {
        let postings = [
            Posting {
                serial: 300,
                tf: 1,
                len: 12,
            },
            Posting {
                serial: 301,
                tf: 2,
                len: stored_length(203),
            },
            Posting {
                serial: 1_000,
                tf: 1,
                len: 7,
            },
        ];
        assert_eq!(stored_length(203), 200);
        let block = encode_postings(300, &postings);
        // 300: Δ0 ‖ len 12; 301: Δ1 with a count ‖ tf 2 ‖ code 0x84 (203 is
        // in 192..208, read as 200); 1,000: Δ699 ‖ len 7.
        assert_eq!(block, [0x00, 0x0c, 0x03, 0x02, 0x84, 0xf6, 0x0a, 0x07]);
        assert_eq!(decode_postings(300, &block).unwrap(), postings);
        assert_eq!(last_posting_serial(300, &block).unwrap(), 1_000);
        // A key below the first posting (it was removed) shifts the first delta.
        let rest = encode_postings(300, &postings[1..]);
        assert_eq!(rest[0], 0x03);
        assert_eq!(decode_postings(300, &rest).unwrap(), postings[1..]);
    }

    #[test]
    fn length_codes_are_exact_below_128_and_within_a_sixteenth_above() {
        let mut last = 0;
        for len in 0..=u16::MAX {
            let code = length_code(len);
            assert!(code >= last, "not monotone at {len}");
            last = code;
            let back = code_length(code).unwrap();
            if len < 128 {
                assert_eq!(back, len);
            } else {
                let error = (f64::from(back) - f64::from(len)).abs() / f64::from(len);
                assert!(error <= 1.0 / 16.0, "{len} → {back}");
            }
            assert_eq!(stored_length(back), back, "{len}");
        }
        assert_eq!(length_code(u16::MAX), 199);
        assert!((200..=255).all(|c| code_length(c).is_none()));
    }

    #[test]
    fn hostile_posting_blocks_are_errors() {
        for block in [
            &[][..],                         // empty
            &[0x00],                         // no length code
            &[0x01, 0x05],                   // count flagged, none follows
            &[0x00, 0x01, 0x00, 0x01],       // serial repeats
            &[0x01, 0x01, 0x07],             // a count of 1 written out
            &[0x01, 0x80, 0x80, 0x04, 0x07], // count over u16
            &[0x00, 0xc8],                   // length code out of range
            &[0x80, 0x00, 0x01],             // overlong varint
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01,
            ], // overflow
        ] {
            assert!(decode_postings(5, block).is_err(), "{block:?}");
            assert!(last_posting_serial(5, block).is_err(), "{block:?}");
        }
    }

    #[test]
    fn time_blocks_have_golden_bytes() {
        // A later serial, the same second; an earlier serial, a second later.
        let entries = [(1_000, 70), (1_000, 75), (1_001, 3), (1_300, 200)];
        let blocks = encode_time_blocks(&entries, 1024);
        assert_eq!(blocks.len(), 1);
        let (key, value) = &blocks[0];
        assert_eq!(key, &time_suffix(Timestamp::new(1_000).unwrap(), 70));
        assert_eq!(
            value,
            &[0x00, 0x0a, 0x01, 0x8f, 0x01, 0xab, 0x02, 0x8a, 0x03]
        );
        let mut out = Vec::new();
        let prefixed = [&[9u8, 9][..], key].concat();
        decode_time_block(&prefixed, value, &mut out).unwrap();
        assert_eq!(out, entries);
    }

    #[test]
    fn time_blocks_split_at_the_byte_limit() {
        let entries: Vec<TimeEntry> = (0..100u64)
            .map(|i| (i / 3, 1_000 - (i / 3) * 7 + i % 3))
            .collect();
        for max in [0, 1, 2, 5, 12, 64, 1024] {
            let blocks = encode_time_blocks(&entries, max);
            let mut out = Vec::new();
            for (key, value) in &blocks {
                assert!(value.len() <= max, "{max}");
                decode_time_block(key, value, &mut out).unwrap();
            }
            assert_eq!(out, entries, "{max}");
        }
        assert_eq!(encode_time_blocks(&entries, 0).len(), 100);
        assert_eq!(encode_time_blocks(&entries, 1024).len(), 1);
        assert!(encode_time_blocks(&[], 10).is_empty());
    }

    #[test]
    fn hostile_time_blocks_are_errors() {
        let key = time_suffix(Timestamp::new(5).unwrap(), 9);
        let mut out = Vec::new();
        for value in [
            &[0x00][..],         // truncated
            &[0x00, 0x00],       // the same entry again
            &[0x00, 0x01],       // an earlier serial, the same second
            &[0x81, 0x00, 0x02], // overlong varint
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02,
            ], // created_at overflows
        ] {
            assert!(
                decode_time_block(&key, value, &mut out).is_err(),
                "{value:?}"
            );
        }
        assert!(decode_time_block(&key[..15], &[], &mut out).is_err());
    }
}
