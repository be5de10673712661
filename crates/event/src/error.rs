//! Errors of the event layer: one stable [`ErrorKind`] per rejection reason.
//!
//! The kind names returned by [`ErrorKind::as_str`] are part of the public
//! contract: they appear in `vectors/event/*.json`, in `nostrwire verify`
//! output and in relay `OK false` messages. Never rename one; add new ones.

use core::fmt;

/// Why an event, filter or message was rejected.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The input is not well-formed JSON at this position.
    Syntax,
    /// Bytes other than whitespace follow the top-level value.
    TrailingData,
    /// The input is not valid UTF-8.
    InvalidUtf8,
    /// A string contains a raw control character (U+0000..U+001F), which JSON forbids.
    UnescapedControl,
    /// A backslash escape is not one of the JSON escapes.
    InvalidEscape,
    /// A `\u` escape names a UTF-16 surrogate that is not part of a valid pair.
    LoneSurrogate,
    /// An object has the same key twice.
    DuplicateKey,
    /// A required field is absent.
    MissingField,
    /// A field has the wrong JSON type (for example a number where a string belongs).
    WrongType,
    /// A `null` appears where the protocol requires a value.
    Null,
    /// A number has a fraction, an exponent, a leading zero or is otherwise not a plain integer.
    InvalidNumber,
    /// A number is negative where only non-negative integers are allowed.
    NegativeNumber,
    /// `kind` is above 65535.
    KindOutOfRange,
    /// `created_at` (or `since`/`until`) is above [`crate::Timestamp::MAX`].
    TimestampOutOfRange,
    /// A hex field contains a character other than `0-9a-f` (uppercase is rejected).
    InvalidHex,
    /// A hex field has the wrong number of characters.
    HexLength,
    /// A tag has no elements (`[]`); NIP-01 requires one or more strings.
    EmptyTag,
    /// A tag element is not a string.
    NonStringTagElement,
    /// The input is larger than the configured byte limit.
    TooLarge,
    /// The event has more tags than the configured limit.
    TooManyTags,
    /// A tag has more elements than the configured limit.
    TooManyTagElements,
    /// Values are nested deeper than the configured limit.
    TooDeep,
    /// The `id` is not the SHA-256 of the canonical serialization.
    IdMismatch,
    /// The `pubkey` is not a valid BIP-340 x-only public key.
    InvalidPublicKey,
    /// The `sig` does not verify against `id` and `pubkey`.
    InvalidSignature,
    /// The message type (first array element) is unknown.
    UnknownMessage,
    /// A message has the wrong number or type of elements.
    InvalidMessage,
    /// A subscription id is empty or longer than 64 characters.
    InvalidSubscriptionId,
    /// A filter has a key NIP-01 does not define (including multi-letter `#xx`).
    UnknownFilterField,
    /// A REQ or COUNT carries more filters than the configured limit.
    TooManyFilters,
    /// A filter list (ids, authors, kinds or tag values) is longer than the configured limit.
    TooManyFilterValues,
}

impl ErrorKind {
    /// Every kind, in declaration order (used by tests and docs).
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::Syntax,
        ErrorKind::TrailingData,
        ErrorKind::InvalidUtf8,
        ErrorKind::UnescapedControl,
        ErrorKind::InvalidEscape,
        ErrorKind::LoneSurrogate,
        ErrorKind::DuplicateKey,
        ErrorKind::MissingField,
        ErrorKind::WrongType,
        ErrorKind::Null,
        ErrorKind::InvalidNumber,
        ErrorKind::NegativeNumber,
        ErrorKind::KindOutOfRange,
        ErrorKind::TimestampOutOfRange,
        ErrorKind::InvalidHex,
        ErrorKind::HexLength,
        ErrorKind::EmptyTag,
        ErrorKind::NonStringTagElement,
        ErrorKind::TooLarge,
        ErrorKind::TooManyTags,
        ErrorKind::TooManyTagElements,
        ErrorKind::TooDeep,
        ErrorKind::IdMismatch,
        ErrorKind::InvalidPublicKey,
        ErrorKind::InvalidSignature,
        ErrorKind::UnknownMessage,
        ErrorKind::InvalidMessage,
        ErrorKind::InvalidSubscriptionId,
        ErrorKind::UnknownFilterField,
        ErrorKind::TooManyFilters,
        ErrorKind::TooManyFilterValues,
    ];

    /// The stable snake_case name of this kind.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Syntax => "syntax",
            ErrorKind::TrailingData => "trailing_data",
            ErrorKind::InvalidUtf8 => "invalid_utf8",
            ErrorKind::UnescapedControl => "unescaped_control",
            ErrorKind::InvalidEscape => "invalid_escape",
            ErrorKind::LoneSurrogate => "lone_surrogate",
            ErrorKind::DuplicateKey => "duplicate_key",
            ErrorKind::MissingField => "missing_field",
            ErrorKind::WrongType => "wrong_type",
            ErrorKind::Null => "null",
            ErrorKind::InvalidNumber => "invalid_number",
            ErrorKind::NegativeNumber => "negative_number",
            ErrorKind::KindOutOfRange => "kind_out_of_range",
            ErrorKind::TimestampOutOfRange => "timestamp_out_of_range",
            ErrorKind::InvalidHex => "invalid_hex",
            ErrorKind::HexLength => "hex_length",
            ErrorKind::EmptyTag => "empty_tag",
            ErrorKind::NonStringTagElement => "non_string_tag_element",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::TooManyTags => "too_many_tags",
            ErrorKind::TooManyTagElements => "too_many_tag_elements",
            ErrorKind::TooDeep => "too_deep",
            ErrorKind::IdMismatch => "id_mismatch",
            ErrorKind::InvalidPublicKey => "invalid_public_key",
            ErrorKind::InvalidSignature => "invalid_signature",
            ErrorKind::UnknownMessage => "unknown_message",
            ErrorKind::InvalidMessage => "invalid_message",
            ErrorKind::InvalidSubscriptionId => "invalid_subscription_id",
            ErrorKind::UnknownFilterField => "unknown_filter_field",
            ErrorKind::TooManyFilters => "too_many_filters",
            ErrorKind::TooManyFilterValues => "too_many_filter_values",
        }
    }

    /// Looks a kind up by its stable name.
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.iter().copied().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with its kind, the byte offset where it was found and, when known,
/// the field it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    offset: Option<usize>,
    field: Option<&'static str>,
}

impl Error {
    /// An error of `kind` with no position.
    pub const fn new(kind: ErrorKind) -> Error {
        Error {
            kind,
            offset: None,
            field: None,
        }
    }

    pub(crate) const fn at(kind: ErrorKind, offset: usize) -> Error {
        Error {
            kind,
            offset: Some(offset),
            field: None,
        }
    }

    pub(crate) const fn with_field(mut self, field: &'static str) -> Error {
        if self.field.is_none() {
            self.field = Some(field);
        }
        self
    }

    /// The stable kind of this error.
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Byte offset into the input where the problem was detected, if known.
    pub const fn offset(&self) -> Option<usize> {
        self.offset
    }

    /// The event or filter field concerned, if known.
    pub const fn field(&self) -> Option<&'static str> {
        self.field
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Error {
        Error::new(kind)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(describe(self.kind))?;
        if let Some(field) = self.field {
            write!(f, " in `{field}`")?;
        }
        if let Some(offset) = self.offset {
            write!(f, " at byte {offset}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// One human sentence per kind (kept beside the variant docs above).
const fn describe(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Syntax => "malformed JSON",
        ErrorKind::TrailingData => "unexpected data after the JSON value",
        ErrorKind::InvalidUtf8 => "invalid UTF-8",
        ErrorKind::UnescapedControl => "raw control character in string",
        ErrorKind::InvalidEscape => "invalid escape sequence",
        ErrorKind::LoneSurrogate => "lone UTF-16 surrogate in \\u escape",
        ErrorKind::DuplicateKey => "duplicate object key",
        ErrorKind::MissingField => "missing required field",
        ErrorKind::WrongType => "wrong JSON type",
        ErrorKind::Null => "null value",
        ErrorKind::InvalidNumber => "not a plain integer",
        ErrorKind::NegativeNumber => "negative number",
        ErrorKind::KindOutOfRange => "kind above 65535",
        ErrorKind::TimestampOutOfRange => "timestamp above 2^53-1",
        ErrorKind::InvalidHex => "not lowercase hex",
        ErrorKind::HexLength => "hex string of wrong length",
        ErrorKind::EmptyTag => "empty tag",
        ErrorKind::NonStringTagElement => "tag element is not a string",
        ErrorKind::TooLarge => "input exceeds the size limit",
        ErrorKind::TooManyTags => "too many tags",
        ErrorKind::TooManyTagElements => "too many elements in one tag",
        ErrorKind::TooDeep => "nesting too deep",
        ErrorKind::IdMismatch => "id does not match the event hash",
        ErrorKind::InvalidPublicKey => "pubkey is not a valid x-only public key",
        ErrorKind::InvalidSignature => "signature does not verify",
        ErrorKind::UnknownMessage => "unknown message type",
        ErrorKind::InvalidMessage => "malformed message",
        ErrorKind::InvalidSubscriptionId => "subscription id must be 1 to 64 characters",
        ErrorKind::UnknownFilterField => "unknown filter field",
        ErrorKind::TooManyFilters => "too many filters",
        ErrorKind::TooManyFilterValues => "too many values in a filter list",
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for kind in ErrorKind::ALL {
            assert!(seen.insert(kind.as_str()), "duplicate name {kind}");
            assert_eq!(ErrorKind::from_name(kind.as_str()), Some(*kind));
        }
    }
}
