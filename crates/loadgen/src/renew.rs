//! Fresh contents for generated events.
//!
//! A generated event starts from the tags and content of a corpus event.
//! Copied verbatim, 500,000 events would repeat about a thousand contents,
//! and a store that trains compression dictionaries would memorise them:
//! its disk figure would measure the corpus, not the store. [`Renewal`]
//! redraws what real traffic does not repeat, keeping sizes and alphabets:
//!
//! - an encrypted payload (NIP-04 `base64?iv=base64`, NIP-44 base64: long,
//!   no whitespace, no `://`) gets random characters in the places of its
//!   letters and digits, so it stays as incompressible as real ciphertext;
//! - prose gets new text of about the same length from a word-bigram model
//!   of all corpus prose, so common words and phrases recur as they do in
//!   real notes, whole notes do not;
//! - an `e` tag's event id is replaced by a random one.
//!
//! JSON contents (profiles, reposts), contents under [`MIN_RENEWED_BYTES`]
//! (reactions, counters) and every other tag (`p` keys, hashtags, relay
//! URLs, which real traffic does repeat) are kept.

use std::collections::HashMap;

use nostrwire_event::Tag;

use crate::rng::{random_hex32, Rng};

/// Contents shorter than this are kept as they are.
pub const MIN_RENEWED_BYTES: usize = 16;

/// Shortest content treated as an encrypted payload.
const MIN_PAYLOAD_BYTES: usize = 64;

/// What a content is, for renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentClass {
    /// Kept: short, or JSON.
    Kept,
    /// An encrypted payload: base64 characters, no whitespace.
    Payload,
    /// Text.
    Prose,
}

impl ContentClass {
    /// Classifies `content`.
    pub fn of(content: &str) -> ContentClass {
        let trimmed = content.trim_start();
        if content.len() < MIN_RENEWED_BYTES || trimmed.starts_with(['{', '[']) {
            ContentClass::Kept
        } else if content.len() >= MIN_PAYLOAD_BYTES
            && !content.contains("://")
            && content
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=?:_-".contains(&b))
        {
            ContentClass::Payload
        } else {
            ContentClass::Prose
        }
    }
}

/// A word-bigram model of prose: each word (with the whitespace after it)
/// and the words seen after it, as often as they were seen.
#[derive(Clone, Debug, Default)]
pub struct Prose {
    words: Vec<Box<str>>,
    next: Vec<Vec<u32>>,
    starts: Vec<u32>,
}

impl Prose {
    /// Learns from `texts`, in order (the model, and so the output for a
    /// seed, depends only on the texts).
    pub fn learn<'a>(texts: impl IntoIterator<Item = &'a str>) -> Prose {
        let mut prose = Prose::default();
        let mut index: HashMap<&'a str, u32> = HashMap::new();
        for text in texts {
            let mut prev: Option<u32> = None;
            for word in text.split_inclusive(char::is_whitespace) {
                let id = *index.entry(word).or_insert_with(|| {
                    prose.words.push(word.into());
                    prose.next.push(Vec::new());
                    (prose.words.len() - 1) as u32
                });
                match prev {
                    None => prose.starts.push(id),
                    Some(p) => prose.next[p as usize].push(id),
                }
                prev = Some(id);
            }
        }
        prose
    }

    /// Distinct words learnt.
    pub fn vocabulary(&self) -> usize {
        self.words.len()
    }

    /// New text of at least `len` bytes (it ends at a word's end), or an
    /// empty string when nothing was learnt.
    pub fn write(&self, len: usize, rng: &mut Rng) -> String {
        let mut out = String::with_capacity(len + 32);
        if self.starts.is_empty() {
            return out;
        }
        let mut word = self.starts[rng.below(self.starts.len() as u64) as usize];
        while out.len() < len {
            out.push_str(&self.words[word as usize]);
            let next = &self.next[word as usize];
            word = if next.is_empty() {
                // A text's last word: the next text starts on a new line.
                if !out.ends_with(char::is_whitespace) {
                    out.push('\n');
                }
                self.starts[rng.below(self.starts.len() as u64) as usize]
            } else {
                next[rng.below(next.len() as u64) as usize]
            };
        }
        out
    }
}

/// Redraws the parts of a corpus event that real traffic does not repeat.
#[derive(Clone, Debug)]
pub struct Renewal {
    prose: Prose,
}

impl Renewal {
    /// Learns the prose of `contents` (the corpus contents, in order).
    pub fn learn<'a>(contents: impl IntoIterator<Item = &'a str>) -> Renewal {
        let prose = Prose::learn(
            contents
                .into_iter()
                .filter(|c| ContentClass::of(c) == ContentClass::Prose),
        );
        Renewal { prose }
    }

    /// The prose model.
    pub fn prose(&self) -> &Prose {
        &self.prose
    }

    /// A new content in the place of `content`.
    pub fn content(&self, content: &str, rng: &mut Rng) -> String {
        match ContentClass::of(content) {
            ContentClass::Kept => content.to_string(),
            ContentClass::Payload => redraw_payload(content, rng),
            ContentClass::Prose => self.prose.write(content.len(), rng),
        }
    }

    /// `tags` with new ids in `e` tags.
    pub fn tags(&self, tags: &[Tag], rng: &mut Rng) -> Vec<Tag> {
        tags.iter()
            .map(|t| {
                let is_id = t.name() == "e"
                    && t.first_value().is_some_and(|v| {
                        nostrwire_event::hex::decode_array::<32>(v.as_bytes()).is_ok()
                    });
                if !is_id {
                    return t.clone();
                }
                let mut fields = t.clone().into_vec();
                fields[1] = random_hex32(rng);
                Tag::new(fields).unwrap_or_else(|| t.clone())
            })
            .collect()
    }
}

const ALPHANUMERIC: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Random letters and digits in the places of a payload's letters and
/// digits. A version prefix (`v2:`) and the NIP-04 `?iv=` marker are kept.
fn redraw_payload(content: &str, rng: &mut Rng) -> String {
    let bytes = content.as_bytes();
    let prefix = bytes[..bytes.len().min(4)]
        .iter()
        .position(|b| *b == b':')
        .map_or(0, |p| p + 1);
    let marker = content.find("?iv=");
    let mut out = Vec::with_capacity(bytes.len());
    for (i, b) in bytes.iter().enumerate() {
        let in_marker = marker.is_some_and(|m| (m..m + 4).contains(&i));
        if i < prefix || in_marker || !b.is_ascii_alphanumeric() {
            out.push(*b);
        } else {
            out.push(ALPHANUMERIC[rng.below(ALPHANUMERIC.len() as u64) as usize]);
        }
    }
    // Only ASCII bytes were replaced, by ASCII bytes.
    String::from_utf8(out).unwrap_or_else(|_| content.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_are_classified() {
        assert_eq!(ContentClass::of("+"), ContentClass::Kept);
        assert_eq!(
            ContentClass::of(r#"{"name":"alice","about":"hi"}"#),
            ContentClass::Kept
        );
        let nip04 = format!("{}?iv={}", "QUJD".repeat(20), "MTIzNDU2Nzg5MGFiY2RlZg==");
        assert_eq!(ContentClass::of(&nip04), ContentClass::Payload);
        let url = format!("https://example.com/{}", "a".repeat(80));
        assert_eq!(ContentClass::of(&url), ContentClass::Prose);
        assert_eq!(
            ContentClass::of("good morning, nostr friends"),
            ContentClass::Prose
        );
    }

    #[test]
    fn payloads_keep_length_markers_and_alphabet() {
        let nip04 = format!("{}?iv={}", "QUJD+/".repeat(20), "MTIzNDU2Nzg5MGFiY2RlZg==");
        let renewal = Renewal::learn([]);
        let mut rng = Rng::new(1);
        let a = renewal.content(&nip04, &mut rng);
        let b = renewal.content(&nip04, &mut rng);
        assert_ne!(a, b);
        assert_ne!(a, nip04);
        for new in [&a, &b] {
            assert_eq!(new.len(), nip04.len());
            assert_eq!(new.find("?iv="), nip04.find("?iv="));
            assert!(new.ends_with("=="));
            assert_eq!(new.matches('+').count(), 20);
        }
        let nip44 = format!("v2:{}", "A".repeat(100));
        let c = renewal.content(&nip44, &mut rng);
        assert!(c.starts_with("v2:") && c.len() == nip44.len() && c != nip44);
    }

    #[test]
    fn prose_is_new_text_from_the_corpus_words() {
        let corpus = [
            "the quick brown fox jumps over the lazy dog",
            "a quick note about the brown bear\nand the fox",
        ];
        let renewal = Renewal::learn(corpus);
        // "fox" ends a text and "fox " does not: two words.
        assert_eq!(renewal.prose().vocabulary(), 14);
        let words: std::collections::HashSet<&str> =
            corpus.iter().flat_map(|t| t.split_whitespace()).collect();
        let mut rng = Rng::new(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let text = renewal.content(corpus[0], &mut rng);
            assert!(text.len() >= corpus[0].len(), "{text:?}");
            assert!(
                text.split_whitespace().all(|w| words.contains(w)),
                "{text:?}"
            );
            seen.insert(text);
        }
        assert!(seen.len() > 25, "texts repeat: {}", seen.len());
        assert_eq!(Prose::default().write(10, &mut rng), "");
    }

    #[test]
    fn e_tags_get_new_ids_and_other_tags_stay() {
        let id = "ab".repeat(32);
        let tags = vec![
            Tag::from_strs(&["e", &id, "wss://relay.example", "reply"]),
            Tag::from_strs(&["p", &id]),
            Tag::from_strs(&["e", "not-an-id"]),
            Tag::from_strs(&["t", "nostr"]),
        ];
        let renewal = Renewal::learn([]);
        let mut rng = Rng::new(3);
        let new = renewal.tags(&tags, &mut rng);
        assert_eq!(new.len(), 4);
        let e = new[0].as_slice();
        assert_eq!(e[0], "e");
        assert_ne!(e[1], id);
        assert!(e[1].len() == 64 && nostrwire_event::hex::is_lower_hex(e[1].as_bytes()));
        assert_eq!(&e[2..], ["wss://relay.example", "reply"]);
        assert_eq!(new[1..], tags[1..]);
    }
}
