//! Why a record was rejected: one stable kind per reason
//! ([spec §12](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#12-error-kinds)).
//!
//! The names returned by [`Error::as_str`] are part of the public contract:
//! they appear in `vectors/wire/invalid.json` and in CLI output. Never rename
//! one; add new ones.

use core::fmt;

/// A decoding failure. Every variant names one rule of the spec.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The input ends inside a field, a length or the fixed prefix.
    Truncated,
    /// A varint is longer than the minimal encoding of its value.
    OverlongVarint,
    /// A varint does not fit in 64 bits (more than 10 bytes, or a 10th byte above 1).
    VarintOverflow,
    /// The first byte names no record form this decoder knows.
    BadVersion,
    /// A text element or the content is not valid UTF-8.
    InvalidUtf8,
    /// A hex-flagged value the encoder would not produce (a 32-byte value in
    /// the general form), or a text value the encoder would have hex-compacted.
    NonCanonicalHex,
    /// A one-byte tag name written in the long form, or a short-form name byte above 0x7F.
    NonCanonicalName,
    /// A tag has no elements.
    EmptyTag,
    /// The tags do not end exactly at the end of the tag block.
    TagBlockMismatch,
    /// Bytes follow the content (or the frame, or the decompressed record).
    TrailingBytes,
    /// `created_at` is above 2^53 − 1.
    TimestampOutOfRange,
    /// The record (or a frame, or a decompressed record) is larger than the limit.
    RecordTooLarge,
    /// More tags than the limit.
    TooManyTags,
    /// A tag has more elements than the limit.
    TooManyTagElements,
    /// A tag element or the content is longer than the limit.
    StringTooLarge,
    /// A compressed record names a dictionary id absent from the dictionary set.
    UnknownDictionary,
    /// The compressed payload is not a valid zstd frame for its dictionary,
    /// or does not decompress to exactly the announced size.
    Decompress,
    /// A dictionary set file is malformed.
    BadDictionarySet,
    /// A transport frame is empty or starts with an unknown message type.
    UnknownMessage,
    /// A transport frame's subscription id is empty or longer than 64 bytes.
    BadSubscriptionId,
    /// A transport flag byte is neither 0 nor 1.
    NonCanonicalFlag,
    /// A batch frame claims more records than the limit, or than its bytes
    /// can hold.
    TooManyRecords,
    /// A batch frame is larger than the limit.
    BatchTooLarge,
    /// A list of dictionary set hashes is not whole 32-byte hashes, or
    /// names more sets than the limit.
    BadDictionaryHash,
}

impl Error {
    /// Every kind, in declaration order.
    pub const ALL: &'static [Error] = &[
        Error::Truncated,
        Error::OverlongVarint,
        Error::VarintOverflow,
        Error::BadVersion,
        Error::InvalidUtf8,
        Error::NonCanonicalHex,
        Error::NonCanonicalName,
        Error::EmptyTag,
        Error::TagBlockMismatch,
        Error::TrailingBytes,
        Error::TimestampOutOfRange,
        Error::RecordTooLarge,
        Error::TooManyTags,
        Error::TooManyTagElements,
        Error::StringTooLarge,
        Error::UnknownDictionary,
        Error::Decompress,
        Error::BadDictionarySet,
        Error::UnknownMessage,
        Error::BadSubscriptionId,
        Error::NonCanonicalFlag,
        Error::TooManyRecords,
        Error::BatchTooLarge,
        Error::BadDictionaryHash,
    ];

    /// The stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::OverlongVarint => "overlong_varint",
            Error::VarintOverflow => "varint_overflow",
            Error::BadVersion => "bad_version",
            Error::InvalidUtf8 => "invalid_utf8",
            Error::NonCanonicalHex => "non_canonical_hex",
            Error::NonCanonicalName => "non_canonical_name",
            Error::EmptyTag => "empty_tag",
            Error::TagBlockMismatch => "tag_block_mismatch",
            Error::TrailingBytes => "trailing_bytes",
            Error::TimestampOutOfRange => "timestamp_out_of_range",
            Error::RecordTooLarge => "record_too_large",
            Error::TooManyTags => "too_many_tags",
            Error::TooManyTagElements => "too_many_tag_elements",
            Error::StringTooLarge => "string_too_large",
            Error::UnknownDictionary => "unknown_dictionary",
            Error::Decompress => "decompress",
            Error::BadDictionarySet => "bad_dictionary_set",
            Error::UnknownMessage => "unknown_message",
            Error::BadSubscriptionId => "bad_subscription_id",
            Error::NonCanonicalFlag => "non_canonical_flag",
            Error::TooManyRecords => "too_many_records",
            Error::BatchTooLarge => "batch_too_large",
            Error::BadDictionaryHash => "bad_dictionary_hash",
        }
    }

    /// The kind with this name.
    pub fn from_name(name: &str) -> Option<Error> {
        Error::ALL.iter().copied().find(|e| e.as_str() == name)
    }

    /// A one-line description.
    pub const fn describe(self) -> &'static str {
        match self {
            Error::Truncated => "input ends inside a field",
            Error::OverlongVarint => "varint is not minimal",
            Error::VarintOverflow => "varint does not fit in 64 bits",
            Error::BadVersion => "unknown record form or version byte",
            Error::InvalidUtf8 => "text is not valid UTF-8",
            Error::NonCanonicalHex => "hex flag disagrees with the compaction rule",
            Error::NonCanonicalName => "tag name not in its canonical form",
            Error::EmptyTag => "tag has no elements",
            Error::TagBlockMismatch => "tags do not end at the end of the tag block",
            Error::TrailingBytes => "bytes follow the end of the value",
            Error::TimestampOutOfRange => "created_at above 2^53-1",
            Error::RecordTooLarge => "record larger than the limit",
            Error::TooManyTags => "more tags than the limit",
            Error::TooManyTagElements => "more tag elements than the limit",
            Error::StringTooLarge => "string longer than the limit",
            Error::UnknownDictionary => "dictionary id not in the set",
            Error::Decompress => "compressed payload is invalid",
            Error::BadDictionarySet => "malformed dictionary set",
            Error::UnknownMessage => "unknown transport message type",
            Error::BadSubscriptionId => "subscription id empty or longer than 64 bytes",
            Error::NonCanonicalFlag => "flag byte is neither 0 nor 1",
            Error::TooManyRecords => "batch claims more records than allowed or than it holds",
            Error::BatchTooLarge => "batch frame larger than the limit",
            Error::BadDictionaryHash => "dictionary set hashes malformed or too many",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.describe(), self.as_str())
    }
}

impl std::error::Error for Error {}

/// Result with a wire [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<&str> = Error::ALL.iter().map(|e| e.as_str()).collect();
        for e in Error::ALL {
            assert_eq!(Error::from_name(e.as_str()), Some(*e));
            assert!(e
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Error::ALL.len());
    }
}
