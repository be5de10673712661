//! The small value types of an event: ids, keys, signatures, kinds, timestamps, tags.

use core::fmt;
use core::str::FromStr;

use crate::error::{Error, ErrorKind};
use crate::hex;

macro_rules! byte_array_type {
    ($(#[$doc:meta])* $name:ident, $len:literal, $hex_len:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; $len]);

        impl $name {
            /// Length in bytes.
            pub const LEN: usize = $len;

            /// Wraps raw bytes.
            pub const fn from_bytes(bytes: [u8; $len]) -> Self {
                Self(bytes)
            }

            /// Wraps a slice of exactly the right length.
            pub fn from_slice(bytes: &[u8]) -> Option<Self> {
                bytes.try_into().ok().map(Self)
            }

            /// The raw bytes.
            pub const fn as_bytes(&self) -> &[u8; $len] {
                &self.0
            }

            /// Parses strict lowercase hex.
            pub fn from_hex(text: &str) -> Result<Self, Error> {
                hex::decode_array(text.as_bytes()).map(Self).map_err(Error::new)
            }

            /// Lowercase hex, on the stack.
            pub fn to_hex_bytes(&self) -> [u8; $hex_len] {
                hex::encode_array(&self.0)
            }

            /// Lowercase hex.
            pub fn to_hex(&self) -> String {
                hex::encode(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                Self::from_hex(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let hex = self.to_hex_bytes();
                f.write_str(core::str::from_utf8(&hex).expect("hex is ASCII"))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }
    };
}

byte_array_type!(
    /// A 32-byte event id: the SHA-256 of the canonical serialization.
    EventId, 32, 64
);
byte_array_type!(
    /// A 32-byte BIP-340 x-only public key.
    ///
    /// Holding one does not mean the bytes are a point on the curve; that is
    /// checked when a signature is verified.
    PublicKey, 32, 64
);
byte_array_type!(
    /// A 64-byte BIP-340 Schnorr signature.
    Signature, 64, 128
);

/// An event kind, 0..=65535.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Kind(pub u16);

/// How a relay treats events of a kind (NIP-01).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum KindClass {
    /// Stored; every event is kept.
    Regular,
    /// Only the latest event per (pubkey, kind) is kept: 0, 3, 10000–19999.
    Replaceable,
    /// Not stored; only delivered to live subscribers: 20000–29999.
    Ephemeral,
    /// Only the latest event per (kind, pubkey, `d` tag) is kept: 30000–39999.
    Addressable,
}

impl Kind {
    /// NIP-01 metadata.
    pub const METADATA: Kind = Kind(0);
    /// NIP-01 text note.
    pub const TEXT_NOTE: Kind = Kind(1);
    /// NIP-02 follow list.
    pub const FOLLOW_LIST: Kind = Kind(3);
    /// NIP-09 deletion request.
    pub const DELETION: Kind = Kind(5);
    /// NIP-42 client authentication.
    pub const AUTH: Kind = Kind(22242);

    /// The kind's class.
    ///
    /// The rule follows the NIP-01 text exactly: kind 41 is **regular** (as in
    /// nostr-tools and go-nostr; strfry and rust-nostr treat it as replaceable),
    /// and the unclassified ranges 45–999 and 40000–65535 are **regular**.
    pub const fn class(self) -> KindClass {
        match self.0 {
            0 | 3 | 10000..=19999 => KindClass::Replaceable,
            20000..=29999 => KindClass::Ephemeral,
            30000..=39999 => KindClass::Addressable,
            _ => KindClass::Regular,
        }
    }

    /// True for replaceable kinds.
    pub const fn is_replaceable(self) -> bool {
        matches!(self.class(), KindClass::Replaceable)
    }

    /// True for ephemeral kinds.
    pub const fn is_ephemeral(self) -> bool {
        matches!(self.class(), KindClass::Ephemeral)
    }

    /// True for addressable kinds.
    pub const fn is_addressable(self) -> bool {
        matches!(self.class(), KindClass::Addressable)
    }

    /// The numeric value.
    pub const fn as_u16(self) -> u16 {
        self.0
    }
}

impl From<u16> for Kind {
    fn from(value: u16) -> Kind {
        Kind(value)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Seconds since the Unix epoch, in `0..=Timestamp::MAX`.
///
/// The upper bound is 2^53 − 1 so that every value survives a round trip
/// through a JavaScript number; larger values are rejected as
/// [`ErrorKind::TimestampOutOfRange`]. Negative values are rejected as
/// [`ErrorKind::NegativeNumber`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The largest accepted value, 2^53 − 1.
    pub const MAX: Timestamp = Timestamp((1 << 53) - 1);

    /// A timestamp, if within range.
    pub const fn new(secs: u64) -> Result<Timestamp, ErrorKind> {
        if secs > Self::MAX.0 {
            Err(ErrorKind::TimestampOutOfRange)
        } else {
            Ok(Timestamp(secs))
        }
    }

    /// The current time (clamped to the valid range).
    pub fn now() -> Timestamp {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Timestamp(secs.min(Self::MAX.0))
    }

    /// Seconds since the epoch.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A tag: one or more strings, the first being its name.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Tag(Vec<String>);

impl Tag {
    /// A tag from its elements; `None` if there are none (NIP-01 requires at least one).
    pub fn new(elements: Vec<String>) -> Option<Tag> {
        if elements.is_empty() {
            None
        } else {
            Some(Tag(elements))
        }
    }

    /// A tag from string slices; panics if `elements` is empty (for literals in code).
    pub fn from_strs(elements: &[&str]) -> Tag {
        Tag::new(elements.iter().map(|s| s.to_string()).collect()).expect("a tag needs a name")
    }

    /// The tag name (first element).
    pub fn name(&self) -> &str {
        &self.0[0]
    }

    /// The first value (second element), the one NIP-01 indexes.
    pub fn first_value(&self) -> Option<&str> {
        self.0.get(1).map(String::as_str)
    }

    /// All elements, name included.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// The elements, name included.
    pub fn into_vec(self) -> Vec<String> {
        self.0
    }
}
