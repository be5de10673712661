//! Events: the borrowed view [`EventRef`] for hot paths, the owned [`Event`],
//! and [`UnsignedEvent`] for signing.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::canonical::{PreimageFields, SignedFields};
use crate::error::{Error, ErrorKind};
use crate::json::{scan_string, write_quoted, JsonStr, Sink};
use crate::keys::Keys;
use crate::limits::Limits;
use crate::reader::Reader;
use crate::types::{EventId, Kind, PublicKey, Signature, Tag, Timestamp};

/// The tags array of a parsed event, kept as validated source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawTags<'a> {
    raw: &'a str,
    canonical: bool,
    len: usize,
}

impl<'a> RawTags<'a> {
    /// Number of tags.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if there are no tags.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The source text of the array, brackets included.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// True if the source text is byte-identical to the canonical JSON.
    pub fn is_canonical(&self) -> bool {
        self.canonical
    }

    /// Iterates over the tags.
    pub fn iter(&self) -> TagIter<'a> {
        TagIter {
            cursor: Cursor::new(self.raw, 1),
        }
    }
}

/// A cursor over text the parser has already validated.
#[derive(Clone, Debug)]
struct Cursor<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(src: &'a str, pos: usize) -> Self {
        Cursor { src, pos }
    }

    /// Skips whitespace and commas; returns the next byte.
    fn next_token(&mut self) -> Option<u8> {
        let bytes = self.src.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t' | b',') {
                self.pos += 1;
            } else {
                return Some(b);
            }
        }
        None
    }
}

/// Iterator over the tags of a [`RawTags`].
#[derive(Clone, Debug)]
pub struct TagIter<'a> {
    cursor: Cursor<'a>,
}

impl<'a> Iterator for TagIter<'a> {
    type Item = TagRef<'a>;

    fn next(&mut self) -> Option<TagRef<'a>> {
        if self.cursor.next_token()? != b'[' {
            return None;
        }
        let start = self.cursor.pos;
        // Walk the elements to find the closing bracket.
        let mut elements = TagRef {
            cursor: Cursor::new(self.cursor.src, start + 1),
        }
        .iter();
        for _ in elements.by_ref() {}
        let end = elements.cursor.pos + 1;
        self.cursor.pos = end;
        Some(TagRef {
            cursor: Cursor::new(&self.cursor.src[..end], start + 1),
        })
    }
}

/// One tag of a parsed event.
#[derive(Clone, Debug)]
pub struct TagRef<'a> {
    cursor: Cursor<'a>,
}

impl<'a> TagRef<'a> {
    /// Iterates over the elements, name first.
    pub fn iter(&self) -> TagElements<'a> {
        TagElements {
            cursor: self.cursor.clone(),
        }
    }

    /// The tag name.
    pub fn name(&self) -> JsonStr<'a> {
        self.iter().next().expect("tags are never empty")
    }

    /// The first value (second element).
    pub fn first_value(&self) -> Option<JsonStr<'a>> {
        self.iter().nth(1)
    }

    /// The elements as an owned [`Tag`].
    pub fn to_tag(&self) -> Tag {
        Tag::new(self.iter().map(|s| s.value().into_owned()).collect())
            .expect("tags are never empty")
    }
}

/// Iterator over the elements of a [`TagRef`].
#[derive(Clone, Debug)]
pub struct TagElements<'a> {
    cursor: Cursor<'a>,
}

impl<'a> Iterator for TagElements<'a> {
    type Item = JsonStr<'a>;

    fn next(&mut self) -> Option<JsonStr<'a>> {
        if self.cursor.next_token()? != b'"' {
            return None;
        }
        let scanned = scan_string(self.cursor.src.as_bytes(), self.cursor.pos, usize::MAX)
            .expect("validated");
        self.cursor.pos = scanned.end;
        Some(scanned.value)
    }
}

/// A parsed, structurally valid event borrowing its strings from the input.
///
/// Parsing checks structure, types, hex and ranges; it does **not** check the
/// id or the signature: call [`SignedFields::verify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef<'a> {
    id: EventId,
    pubkey: PublicKey,
    sig: Signature,
    created_at: Timestamp,
    kind: Kind,
    tags: RawTags<'a>,
    content: JsonStr<'a>,
}

impl<'a> EventRef<'a> {
    /// Parses one event object with the default [`Limits`].
    pub fn parse(input: &'a [u8]) -> Result<EventRef<'a>, Error> {
        Self::parse_with(input, &Limits::DEFAULT)
    }

    /// Parses one event object; nothing but whitespace may follow it.
    pub fn parse_with(input: &'a [u8], limits: &Limits) -> Result<EventRef<'a>, Error> {
        let mut reader = Reader::new(input, limits.max_event_bytes, limits)?;
        let event = read_event(&mut reader)?;
        reader.finish()?;
        Ok(event)
    }

    /// The tags.
    pub fn tags(&self) -> RawTags<'a> {
        self.tags
    }

    /// The content string.
    pub fn content(&self) -> JsonStr<'a> {
        self.content
    }

    /// Converts to an owned [`Event`].
    pub fn to_event(&self) -> Event {
        Event {
            id: self.id,
            pubkey: self.pubkey,
            created_at: self.created_at,
            kind: self.kind,
            tags: self.tags.iter().map(|t| t.to_tag()).collect(),
            content: self.content.value().into_owned(),
            sig: self.sig,
        }
    }
}

impl PreimageFields for EventRef<'_> {
    fn pubkey(&self) -> &PublicKey {
        &self.pubkey
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn kind(&self) -> Kind {
        self.kind
    }
    fn write_tags_json<S: Sink + ?Sized>(&self, out: &mut S) {
        if self.tags.canonical {
            out.put(self.tags.raw.as_bytes());
            return;
        }
        out.put(b"[");
        for (i, tag) in self.tags.iter().enumerate() {
            out.put(if i == 0 { b"[" } else { b",[" });
            for (j, element) in tag.iter().enumerate() {
                out.put(if j == 0 { b"\"" } else { b",\"" });
                element.write_canonical(out);
                out.put(b"\"");
            }
            out.put(b"]");
        }
        out.put(b"]");
    }
    fn write_content_json<S: Sink + ?Sized>(&self, out: &mut S) {
        self.content.write_canonical(out);
    }
    fn any_tag(&self, visit: &mut dyn FnMut(&str, Option<&str>) -> bool) -> bool {
        self.tags.iter().any(|tag| {
            let mut elements = tag.iter();
            let name = elements.next().expect("tags are never empty").value();
            let value = elements.next().map(|v| v.value());
            visit(&name, value.as_deref())
        })
    }
    fn json_size_hint(&self) -> usize {
        self.tags.raw.len() + self.content.raw().len() + 300
    }
}

impl SignedFields for EventRef<'_> {
    fn id(&self) -> &EventId {
        &self.id
    }
    fn sig(&self) -> &Signature {
        &self.sig
    }
}

const FIELD_NAMES: [&str; 7] = [
    "id",
    "pubkey",
    "created_at",
    "kind",
    "tags",
    "content",
    "sig",
];

fn field_index(key: &str) -> Option<usize> {
    FIELD_NAMES.iter().position(|n| *n == key)
}

fn read_hex<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], Error> {
    let at = r.peek().map(|_| r.pos()).unwrap_or(0);
    let text = r.string()?;
    let result = if text.is_escaped() {
        crate::hex::decode_array(text.value().as_bytes())
    } else {
        crate::hex::decode_array(text.raw().as_bytes())
    };
    result.map_err(|kind| Error::at(kind, at))
}

/// Reads an event object at the reader's position (used for bare events and inside messages).
///
/// Linear in the input: each key is decoded once, and unknown keys (kept only
/// for the duplicate check) go into a hash set with std's randomly keyed
/// hasher, so no choice of keys makes the check slower than its inserts.
pub(crate) fn read_event<'a>(r: &mut Reader<'a>) -> Result<EventRef<'a>, Error> {
    let start = r.peek().map(|_| r.pos()).unwrap_or(0);
    let mut seen = 0u8;
    let mut unknown: HashSet<Cow<'a, str>> = HashSet::new();
    let mut id = [0u8; 32];
    let mut pubkey = [0u8; 32];
    let mut sig = [0u8; 64];
    let mut created_at = Timestamp::default();
    let mut kind = Kind::default();
    let mut tags = None;
    let mut content = None;
    r.object(|r, key| {
        let key = key.value();
        let Some(index) = field_index(&key) else {
            if !unknown.insert(key) {
                return Err(Error::at(ErrorKind::DuplicateKey, r.pos()));
            }
            return r.skip_value(1);
        };
        let name = FIELD_NAMES[index];
        if seen & (1 << index) != 0 {
            return Err(Error::at(ErrorKind::DuplicateKey, r.pos()).with_field(name));
        }
        seen |= 1 << index;
        let result = match index {
            0 => read_hex(r).map(|v| id = v),
            1 => read_hex(r).map(|v| pubkey = v),
            2 => {
                let at = r.peek().map(|_| r.pos()).unwrap_or(0);
                r.integer(ErrorKind::TimestampOutOfRange).and_then(|v| {
                    created_at = Timestamp::new(v).map_err(|k| Error::at(k, at))?;
                    Ok(())
                })
            }
            3 => {
                let at = r.peek().map(|_| r.pos()).unwrap_or(0);
                r.integer(ErrorKind::KindOutOfRange).and_then(|v| {
                    let v =
                        u16::try_from(v).map_err(|_| Error::at(ErrorKind::KindOutOfRange, at))?;
                    kind = Kind(v);
                    Ok(())
                })
            }
            4 => read_tags(r).map(|t| tags = Some(t)),
            5 => r.string().map(|c| content = Some(c)),
            _ => read_hex(r).map(|v| sig = v),
        };
        result.map_err(|e| e.with_field(name))
    })?;
    if seen != 0x7f {
        let missing = (0..7)
            .find(|i| seen & (1 << i) == 0)
            .expect("a bit is clear");
        return Err(Error::at(ErrorKind::MissingField, r.pos()).with_field(FIELD_NAMES[missing]));
    }
    // Inside a message the message limit applied; the event must also fit
    // its own, which the binary record limits are derived from.
    if r.pos() - start > r.limits.max_event_bytes {
        return Err(Error::at(
            ErrorKind::TooLarge,
            start + r.limits.max_event_bytes,
        ));
    }
    Ok(EventRef {
        id: EventId::from_bytes(id),
        pubkey: PublicKey::from_bytes(pubkey),
        sig: Signature::from_bytes(sig),
        created_at,
        kind,
        tags: tags.expect("seen"),
        content: content.expect("seen"),
    })
}

/// Reads the tags array, recording whether its text is already canonical.
fn read_tags<'a>(r: &mut Reader<'a>) -> Result<RawTags<'a>, Error> {
    if r.peek() != Some(b'[') {
        return Err(r.type_error());
    }
    let start = r.pos();
    r.bump();
    r.saw_ws = false;
    let mut canonical = true;
    let mut len = 0usize;
    if !r.eat(b']') {
        loop {
            match r.peek() {
                Some(b'[') => r.bump(),
                Some(b'n') => return Err(Error::at(ErrorKind::Null, r.pos())),
                Some(b'"' | b'{' | b't' | b'f' | b'-' | b'0'..=b'9') => {
                    return Err(Error::at(ErrorKind::WrongType, r.pos()))
                }
                _ => return Err(r.syntax()),
            }
            len += 1;
            if len > r.limits.max_tags {
                return Err(Error::at(ErrorKind::TooManyTags, r.pos()));
            }
            if r.peek() == Some(b']') {
                return Err(Error::at(ErrorKind::EmptyTag, r.pos()));
            }
            let mut elements = 0usize;
            loop {
                match r.peek() {
                    Some(b'"') => {
                        let s = r.string()?;
                        canonical &= s.is_canonical();
                    }
                    Some(b'n') => return Err(Error::at(ErrorKind::Null, r.pos())),
                    Some(b'[' | b'{' | b't' | b'f' | b'-' | b'0'..=b'9') => {
                        return Err(Error::at(ErrorKind::NonStringTagElement, r.pos()))
                    }
                    _ => return Err(r.syntax()),
                }
                elements += 1;
                if elements > r.limits.max_tag_elements {
                    return Err(Error::at(ErrorKind::TooManyTagElements, r.pos()));
                }
                if !r.comma_or(b']')? {
                    break;
                }
            }
            if !r.comma_or(b']')? {
                break;
            }
        }
    }
    canonical &= !r.saw_ws;
    Ok(RawTags {
        raw: r.accepted_str(start, r.pos()),
        canonical,
        len,
    })
}

/// An owned event.
///
/// Construction does not verify anything; [`Event::from_json`] checks structure
/// and [`SignedFields::verify`] checks the id and signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// Claimed id.
    pub id: EventId,
    /// Author.
    pub pubkey: PublicKey,
    /// Creation time.
    pub created_at: Timestamp,
    /// Kind.
    pub kind: Kind,
    /// Tags, each with one or more elements.
    pub tags: Vec<Tag>,
    /// Content (unescaped).
    pub content: String,
    /// Claimed signature.
    pub sig: Signature,
}

impl Event {
    /// Parses an event with the default [`Limits`] (structure only).
    pub fn from_json(input: impl AsRef<[u8]>) -> Result<Event, Error> {
        EventRef::parse(input.as_ref()).map(|e| e.to_event())
    }

    /// Parses an event with the given limits (structure only).
    pub fn from_json_with(input: impl AsRef<[u8]>, limits: &Limits) -> Result<Event, Error> {
        EventRef::parse_with(input.as_ref(), limits).map(|e| e.to_event())
    }
}

fn write_owned_tags<S: Sink + ?Sized>(tags: &[Tag], out: &mut S) {
    out.put(b"[");
    for (i, tag) in tags.iter().enumerate() {
        out.put(if i == 0 { b"[" } else { b",[" });
        for (j, element) in tag.as_slice().iter().enumerate() {
            if j > 0 {
                out.put(b",");
            }
            write_quoted(out, element);
        }
        out.put(b"]");
    }
    out.put(b"]");
}

fn owned_any_tag(tags: &[Tag], visit: &mut dyn FnMut(&str, Option<&str>) -> bool) -> bool {
    tags.iter().any(|t| visit(t.name(), t.first_value()))
}

fn owned_size_hint(tags: &[Tag], content: &str) -> usize {
    let tag_bytes: usize = tags
        .iter()
        .map(|t| t.as_slice().iter().map(|e| e.len() + 3).sum::<usize>() + 3)
        .sum();
    tag_bytes + content.len() + 300
}

impl PreimageFields for Event {
    fn pubkey(&self) -> &PublicKey {
        &self.pubkey
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn kind(&self) -> Kind {
        self.kind
    }
    fn write_tags_json<S: Sink + ?Sized>(&self, out: &mut S) {
        write_owned_tags(&self.tags, out);
    }
    fn write_content_json<S: Sink + ?Sized>(&self, out: &mut S) {
        crate::json::write_escaped(out, &self.content);
    }
    fn any_tag(&self, visit: &mut dyn FnMut(&str, Option<&str>) -> bool) -> bool {
        owned_any_tag(&self.tags, visit)
    }
    fn json_size_hint(&self) -> usize {
        owned_size_hint(&self.tags, &self.content)
    }
}

impl SignedFields for Event {
    fn id(&self) -> &EventId {
        &self.id
    }
    fn sig(&self) -> &Signature {
        &self.sig
    }
}

/// An event before signing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsignedEvent {
    /// Author (replaced by the signer's key in [`UnsignedEvent::sign`]).
    pub pubkey: PublicKey,
    /// Creation time.
    pub created_at: Timestamp,
    /// Kind.
    pub kind: Kind,
    /// Tags.
    pub tags: Vec<Tag>,
    /// Content.
    pub content: String,
}

impl UnsignedEvent {
    /// A new unsigned event by `keys`.
    pub fn new(
        keys: &Keys,
        created_at: Timestamp,
        kind: Kind,
        tags: Vec<Tag>,
        content: impl Into<String>,
    ) -> UnsignedEvent {
        UnsignedEvent {
            pubkey: keys.public_key(),
            created_at,
            kind,
            tags,
            content: content.into(),
        }
    }

    /// Computes the id and signs it.
    pub fn sign(mut self, keys: &Keys) -> Event {
        self.pubkey = keys.public_key();
        let id = self.compute_id();
        let sig = keys.sign_id(&id);
        Event {
            id,
            pubkey: self.pubkey,
            created_at: self.created_at,
            kind: self.kind,
            tags: self.tags,
            content: self.content,
            sig,
        }
    }
}

impl PreimageFields for UnsignedEvent {
    fn pubkey(&self) -> &PublicKey {
        &self.pubkey
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn kind(&self) -> Kind {
        self.kind
    }
    fn write_tags_json<S: Sink + ?Sized>(&self, out: &mut S) {
        write_owned_tags(&self.tags, out);
    }
    fn write_content_json<S: Sink + ?Sized>(&self, out: &mut S) {
        crate::json::write_escaped(out, &self.content);
    }
    fn any_tag(&self, visit: &mut dyn FnMut(&str, Option<&str>) -> bool) -> bool {
        owned_any_tag(&self.tags, visit)
    }
    fn json_size_hint(&self) -> usize {
        owned_size_hint(&self.tags, &self.content)
    }
}
