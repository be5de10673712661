//! Decoder limits, checked before any allocation they bound
//! ([spec §9](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#9-limits)).

/// Policy limits applied while decoding records.
///
/// The defaults admit every event in real traffic with headroom (450 KB
/// follow lists with 6,165 tags, 350 KB contents, 41 KB tag values) and agree
/// with the JSON parser's defaults: a record is never larger than the compact
/// JSON of its event, so any event accepted as JSON fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest record (and largest decompressed record), in bytes.
    pub max_record_bytes: usize,
    /// Most tags in one event.
    pub max_tags: usize,
    /// Most elements in one tag, name included.
    pub max_tag_elements: usize,
    /// Longest tag element or content, in bytes of text (hex values count
    /// their text length, twice their byte length).
    pub max_string_bytes: usize,
}

impl Limits {
    /// The defaults (see the type docs).
    pub const DEFAULT: Limits = Limits {
        max_record_bytes: 1 << 20,
        max_tags: 20_000,
        max_tag_elements: 1_000,
        max_string_bytes: 1 << 20,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}
