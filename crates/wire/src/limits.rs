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
    /// The defaults (see the type docs): those of the JSON parser,
    /// [`nostrwire_event::Limits::DEFAULT`], through [`Limits::from_json`].
    pub const DEFAULT: Limits = Limits::from_json(&nostrwire_event::Limits::DEFAULT);

    /// The decoder limits that admit the record of every event the JSON
    /// parser accepts under `json`, and refuse what it would refuse for
    /// the same counts and lengths.
    ///
    /// A record is never larger than the compact JSON of its event, nor a
    /// stored string longer than its JSON spelling, so the JSON limits carry
    /// over one for one: [`encode_json_event`](crate::encode_json_event)
    /// output for an event parsed under `json` always decodes under
    /// `Limits::from_json(json)`.
    pub const fn from_json(json: &nostrwire_event::Limits) -> Limits {
        Limits {
            max_record_bytes: json.max_event_bytes,
            max_tags: json.max_tags,
            max_tag_elements: json.max_tag_elements,
            max_string_bytes: json.max_string_bytes,
        }
    }
}

impl Limits {
    /// Limits that no well-formed record of `len` bytes can exceed: for
    /// decoding again a record that was admitted earlier, under whatever
    /// policy limits applied then (a store's own records, a relay's
    /// admitted events), without refusing what was admitted and without
    /// knowing those limits.
    ///
    /// This is as safe as any other limits because every count and length
    /// in a record is bounded by its size: each tag takes at least two
    /// bytes, each element at least one, each byte of text one byte, and a
    /// hex element's text is twice its bytes (hence `2 * len` for
    /// strings). The decoder allocates nothing by these counts, so its work
    /// stays bounded by `len`. Bytes from the network are decoded under the
    /// receiver's policy limits instead: their size alone does not bound
    /// what the receiver admits.
    pub const fn within(len: usize) -> Limits {
        Limits {
            max_record_bytes: len,
            max_tags: len,
            max_tag_elements: len,
            max_string_bytes: len.saturating_mul(2),
        }
    }
}

impl From<&nostrwire_event::Limits> for Limits {
    fn from(json: &nostrwire_event::Limits) -> Limits {
        Limits::from_json(json)
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}
