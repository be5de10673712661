//! NIP-01 filters: strict parsing, matching and serialization.
//!
//! Semantics:
//! - OR within a list, AND across fields, OR across filters (see [`matches_any`]).
//! - `since <= created_at <= until`, both inclusive.
//! - `#x` matches when some tag named `x` has its **first value** in the list.
//! - An empty list matches nothing (as in strfry, nostr-tools and go-nostr).
//! - `limit` absent and `limit: 0` are different (`Some(0)` asks for no
//!   stored events, only live ones).
//! - `ids`, `authors`, `#e` and `#p` take exact 64-character lowercase hex;
//!   prefixes are rejected (NIP-01 dropped prefix matching in 2023).
//! - `search` (NIP-50) is kept as a field; matching it is the relay's job,
//!   so [`Filter::matches`] ignores it.
//! - Unknown keys, including multi-letter `#xx`, are rejected with
//!   [`ErrorKind::UnknownFilterField`] rather than silently matching.

use crate::canonical::{put_u64, SignedFields};
use crate::error::{Error, ErrorKind};
use crate::json::{write_quoted, Sink};
use crate::limits::Limits;
use crate::reader::Reader;
use crate::types::{EventId, Kind, PublicKey, Timestamp};

/// A NIP-01 filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Event ids (sorted, deduplicated).
    pub ids: Option<Vec<EventId>>,
    /// Authors (sorted, deduplicated).
    pub authors: Option<Vec<PublicKey>>,
    /// Kinds (sorted, deduplicated).
    pub kinds: Option<Vec<Kind>>,
    /// Tag conditions `#x`, sorted by letter, one entry per letter.
    pub tags: Vec<TagCondition>,
    /// Inclusive lower bound on `created_at`.
    pub since: Option<Timestamp>,
    /// Inclusive upper bound on `created_at`.
    pub until: Option<Timestamp>,
    /// Most events wanted from storage.
    pub limit: Option<u64>,
    /// NIP-50 search query.
    pub search: Option<String>,
}

/// A `#x` condition: the first value of some tag named `letter` is in `values`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagCondition {
    /// The single-letter tag name (`a`–`z`, `A`–`Z`).
    pub letter: u8,
    /// Accepted first values (sorted, deduplicated).
    pub values: Vec<String>,
}

impl Filter {
    /// A filter that matches every event.
    pub fn new() -> Filter {
        Filter::default()
    }

    /// Parses one filter object with the default limits.
    pub fn from_json(input: &[u8]) -> Result<Filter, Error> {
        let limits = Limits::DEFAULT;
        let mut r = Reader::new(input, limits.max_message_bytes, &limits)?;
        let filter = read_filter(&mut r)?;
        r.finish()?;
        Ok(filter)
    }

    /// The values of the `#letter` condition, if present.
    pub fn tag_values(&self, letter: u8) -> Option<&[String]> {
        self.tags
            .iter()
            .find(|c| c.letter == letter)
            .map(|c| c.values.as_slice())
    }

    /// Adds or replaces a `#letter` condition (values are sorted and deduplicated).
    pub fn with_tag(mut self, letter: u8, mut values: Vec<String>) -> Filter {
        values.sort_unstable();
        values.dedup();
        self.tags.retain(|c| c.letter != letter);
        self.tags.push(TagCondition { letter, values });
        self.tags.sort_by_key(|c| c.letter);
        self
    }

    /// True if the filter can match nothing because some list is empty.
    pub fn is_empty_match(&self) -> bool {
        self.ids.as_ref().is_some_and(Vec::is_empty)
            || self.authors.as_ref().is_some_and(Vec::is_empty)
            || self.kinds.as_ref().is_some_and(Vec::is_empty)
            || self.tags.iter().any(|c| c.values.is_empty())
            || matches!((self.since, self.until), (Some(s), Some(u)) if s > u)
    }

    /// Does `event` match (ignoring `limit` and `search`)?
    pub fn matches<E: SignedFields + ?Sized>(&self, event: &E) -> bool {
        if let Some(ids) = &self.ids {
            if ids.binary_search(event.id()).is_err() {
                return false;
            }
        }
        if let Some(authors) = &self.authors {
            if authors.binary_search(event.pubkey()).is_err() {
                return false;
            }
        }
        if let Some(kinds) = &self.kinds {
            if kinds.binary_search(&event.kind()).is_err() {
                return false;
            }
        }
        let created_at = event.created_at();
        if self.since.is_some_and(|s| created_at < s) || self.until.is_some_and(|u| created_at > u)
        {
            return false;
        }
        self.tags.iter().all(|cond| {
            event.any_tag(&mut |name, value| {
                name.len() == 1
                    && name.as_bytes()[0] == cond.letter
                    && value.is_some_and(|v| {
                        cond.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok()
                    })
            })
        })
    }

    /// Writes the filter as compact JSON.
    pub fn write_json<S: Sink + ?Sized>(&self, out: &mut S) {
        let mut first = true;
        let mut key = |out: &mut S, name: &str| {
            out.put(if first { b"{\"" } else { b",\"" });
            first = false;
            out.put(name.as_bytes());
            out.put(b"\":");
        };
        fn hex_list<S: Sink + ?Sized, const N: usize>(
            out: &mut S,
            items: impl Iterator<Item = [u8; N]>,
        ) {
            out.put(b"[");
            for (i, hex) in items.enumerate() {
                out.put(if i == 0 { b"\"" } else { b",\"" });
                out.put(&hex);
                out.put(b"\"");
            }
            out.put(b"]");
        }
        if let Some(ids) = &self.ids {
            key(out, "ids");
            hex_list(out, ids.iter().map(EventId::to_hex_bytes));
        }
        if let Some(authors) = &self.authors {
            key(out, "authors");
            hex_list(out, authors.iter().map(PublicKey::to_hex_bytes));
        }
        if let Some(kinds) = &self.kinds {
            key(out, "kinds");
            out.put(b"[");
            for (i, k) in kinds.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                put_u64(out, k.as_u16() as u64);
            }
            out.put(b"]");
        }
        for cond in &self.tags {
            let name = [b'#', cond.letter];
            key(out, core::str::from_utf8(&name).expect("ASCII letter"));
            out.put(b"[");
            for (i, v) in cond.values.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_quoted(out, v);
            }
            out.put(b"]");
        }
        for (name, value) in [("since", self.since), ("until", self.until)] {
            if let Some(t) = value {
                key(out, name);
                put_u64(out, t.as_u64());
            }
        }
        if let Some(limit) = self.limit {
            key(out, "limit");
            put_u64(out, limit);
        }
        if let Some(search) = &self.search {
            key(out, "search");
            write_quoted(out, search);
        }
        if first {
            out.put(b"{");
        }
        out.put(b"}");
    }

    /// The filter as compact JSON.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        self.write_json(&mut out);
        String::from_utf8(out).expect("JSON is UTF-8")
    }
}

/// Does `event` match any of `filters`? (OR across filters.)
pub fn matches_any<E: SignedFields + ?Sized>(filters: &[Filter], event: &E) -> bool {
    filters.iter().any(|f| f.matches(event))
}

fn list<'a, T>(
    r: &mut Reader<'a>,
    mut item: impl FnMut(&mut Reader<'a>) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    if r.peek() != Some(b'[') {
        return Err(r.type_error());
    }
    r.bump();
    let mut out = Vec::new();
    if r.eat(b']') {
        return Ok(out);
    }
    loop {
        if out.len() >= r.limits.max_filter_values {
            return Err(Error::at(ErrorKind::TooManyFilterValues, r.pos()));
        }
        out.push(item(r)?);
        if !r.comma_or(b']')? {
            return Ok(out);
        }
    }
}

fn hex_item<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], Error> {
    let at = r.peek().map(|_| r.pos()).unwrap_or(0);
    let s = r.string()?;
    crate::hex::decode_array(s.value().as_bytes()).map_err(|k| Error::at(k, at))
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort_unstable();
    v.dedup();
    v
}

const KEYS: [&str; 7] = [
    "ids", "authors", "kinds", "since", "until", "limit", "search",
];

/// Every `#x` key, so an error can name its key as a `&'static str`.
const TAG_KEYS: &str = "#a#b#c#d#e#f#g#h#i#j#k#l#m#n#o#p#q#r#s#t#u#v#w#x#y#z\
                        #A#B#C#D#E#F#G#H#I#J#K#L#M#N#O#P#Q#R#S#T#U#V#W#X#Y#Z";

/// The key `#letter`, for an ASCII letter.
fn tag_key(letter: u8) -> &'static str {
    let i = if letter.is_ascii_lowercase() {
        letter - b'a'
    } else {
        26 + letter - b'A'
    } as usize;
    &TAG_KEYS[2 * i..2 * i + 2]
}

/// Reads one filter object.
pub(crate) fn read_filter(r: &mut Reader<'_>) -> Result<Filter, Error> {
    let mut filter = Filter::default();
    let mut seen = 0u8;
    let mut seen_letters = [false; 128];
    r.object(|r, key| {
        let key = key.value();
        if let Some(index) = KEYS.iter().position(|k| *k == key) {
            let name = KEYS[index];
            if seen & (1 << index) != 0 {
                return Err(Error::at(ErrorKind::DuplicateKey, r.pos()).with_field(name));
            }
            seen |= 1 << index;
            let result = match index {
                0 => list(r, hex_item::<32>).map(|v| {
                    filter.ids = Some(sorted(v.into_iter().map(EventId::from_bytes).collect()))
                }),
                1 => list(r, hex_item::<32>).map(|v| {
                    filter.authors =
                        Some(sorted(v.into_iter().map(PublicKey::from_bytes).collect()))
                }),
                2 => list(r, |r| {
                    let at = r.peek().map(|_| r.pos()).unwrap_or(0);
                    let v = r.integer(ErrorKind::KindOutOfRange)?;
                    u16::try_from(v)
                        .map(Kind)
                        .map_err(|_| Error::at(ErrorKind::KindOutOfRange, at))
                })
                .map(|v| filter.kinds = Some(sorted(v))),
                3 | 4 => {
                    let at = r.peek().map(|_| r.pos()).unwrap_or(0);
                    r.integer(ErrorKind::TimestampOutOfRange).and_then(|v| {
                        let t = Timestamp::new(v).map_err(|k| Error::at(k, at))?;
                        if index == 3 {
                            filter.since = Some(t);
                        } else {
                            filter.until = Some(t);
                        }
                        Ok(())
                    })
                }
                5 => r
                    .integer(ErrorKind::InvalidNumber)
                    .map(|v| filter.limit = Some(v)),
                _ => r
                    .string()
                    .map(|s| filter.search = Some(s.value().into_owned())),
            };
            return result.map_err(|e| e.with_field(name));
        }
        let bytes = key.as_bytes();
        if bytes.len() == 2 && bytes[0] == b'#' && bytes[1].is_ascii_alphabetic() {
            let letter = bytes[1];
            let name = tag_key(letter);
            if seen_letters[letter as usize] {
                return Err(Error::at(ErrorKind::DuplicateKey, r.pos()).with_field(name));
            }
            seen_letters[letter as usize] = true;
            let values = if matches!(letter, b'e' | b'p') {
                list(r, hex_item::<32>)
                    .map_err(|e| e.with_field(name))?
                    .iter()
                    .map(|b| crate::hex::encode(b))
                    .collect()
            } else {
                list(r, |r| r.string().map(|s| s.value().into_owned()))
                    .map_err(|e| e.with_field(name))?
            };
            filter.tags.push(TagCondition {
                letter,
                values: sorted(values),
            });
            return Ok(());
        }
        Err(Error::at(ErrorKind::UnknownFilterField, r.pos()))
    })?;
    filter.tags.sort_by_key(|c| c.letter);
    Ok(filter)
}
