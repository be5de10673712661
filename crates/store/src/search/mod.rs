//! NIP-50 text search: the tokenizer, which parts of an event are indexed,
//! query parsing and relevance. The store keeps the inverted index
//! (`docs/design-store.md`, "Search index"); fan-out uses [`EventTerms`] to
//! test live events against a search filter with exactly the same rules.

pub(crate) mod build;
pub(crate) mod fresh;
pub(crate) mod index;
mod indexer;
pub(crate) mod scan;

use std::collections::HashMap;

use nostrwire_event::{Kind, PreimageFields};
use nostrwire_wire::EventView;

pub use indexer::SearchIndexer;

/// Shortest indexed term, in characters.
pub const MIN_TERM_CHARS: usize = 2;
/// Longest indexed term, in bytes (UTF-8); longer words are not indexed.
pub const MAX_TERM_BYTES: usize = 40;
/// Most distinct terms indexed per event; later new words are ignored.
pub const MAX_TERMS_PER_EVENT: usize = 500;
/// Tag names whose first value is indexed with the content.
const TEXT_TAGS: [&str; 5] = ["title", "summary", "name", "subject", "t"];
/// Kind 0 content fields indexed (the rest of the profile JSON is not).
const PROFILE_FIELDS: [&str; 4] = ["name", "display_name", "about", "nip05"];
/// BM25 parameters.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Calls `f` with each term of `text`: maximal runs of alphanumeric
/// characters, lowercased, of at least [`MIN_TERM_CHARS`] characters and at
/// most [`MAX_TERM_BYTES`] bytes.
pub fn tokenize(text: &str, mut f: impl FnMut(&str)) {
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let lower;
        let term = if word.chars().any(char::is_uppercase) {
            lower = word.to_lowercase();
            lower.as_str()
        } else {
            word
        };
        if term.len() <= MAX_TERM_BYTES && term.chars().nth(MIN_TERM_CHARS - 1).is_some() {
            f(term);
        }
    }
}

/// Is an event of this kind indexed? Contact lists, DMs, gift wraps, AUTH
/// and ephemeral events are not.
pub fn indexed_kind(kind: Kind) -> bool {
    !matches!(kind.as_u16(), 3 | 4 | 1059 | 22242) && !kind.is_ephemeral()
}

/// Shortest content [`is_ciphertext`] takes for an encrypted payload.
const MIN_CIPHERTEXT_BYTES: usize = 64;

/// Does `content` look like an encrypted payload (NIP-04
/// `base64?iv=base64`, NIP-44 base64, or a versioned form such as `v2:…`)?
/// At least 64 bytes, no whitespace, no `://`, and nothing
/// but base64 and base64url characters, `?` and `:`. Such contents are not
/// indexed: besides the kinds left out altogether, private lists (10000,
/// 30000), app data (30078) and job requests (5000–5999) carry them, and
/// tokenized they are runs of random fragments that no search looks for,
/// each a term of its own in the index.
pub fn is_ciphertext(content: &str) -> bool {
    content.len() >= MIN_CIPHERTEXT_BYTES
        && !content.contains("://")
        && content
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=_-?:".contains(&b))
}

/// Hasher of the maps keyed by terms: seeded per process (terms come from
/// anyone who publishes), and several times faster than std's SipHash on
/// short strings, which matters because the indexer hashes every term of
/// every event twice.
pub type TermHasher = foldhash::fast::RandomState;

/// The indexed terms of one event, with their frequencies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventTerms {
    /// Distinct terms (at most [`MAX_TERMS_PER_EVENT`]) and their counts.
    pub terms: HashMap<String, u16, TermHasher>,
    /// Tokens in the indexed text (the document length of BM25), saturating.
    pub len: u16,
}

impl EventTerms {
    /// Terms of `view`; `None` when its kind is not indexed or it has no terms.
    pub fn of(view: &EventView<'_>) -> Option<EventTerms> {
        if !indexed_kind(view.kind()) {
            return None;
        }
        let mut out = EventTerms::default();
        if view.kind() == Kind::METADATA {
            match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(view.content())
            {
                Ok(profile) => {
                    for field in PROFILE_FIELDS {
                        if let Some(text) = profile.get(field).and_then(|v| v.as_str()) {
                            out.add(text);
                        }
                    }
                }
                Err(_) => out.add(view.content()),
            }
        } else if !is_ciphertext(view.content()) {
            out.add(view.content());
        }
        for tag in view.tags() {
            if let Some(value) = tag.first_value() {
                let name = tag.name();
                if TEXT_TAGS.iter().any(|t| name.eq_str(t)) {
                    out.add(&value.to_str());
                }
            }
        }
        (!out.terms.is_empty()).then_some(out)
    }

    fn add(&mut self, text: &str) {
        tokenize(text, |term| {
            self.len = self.len.saturating_add(1);
            if let Some(n) = self.terms.get_mut(term) {
                *n = n.saturating_add(1);
            } else if self.terms.len() < MAX_TERMS_PER_EVENT {
                self.terms.insert(term.to_owned(), 1);
            }
        });
    }

    /// Does the event hold every term of `query`? (An empty query matches nothing.)
    pub fn contains_all(&self, query: &Query) -> bool {
        !query.terms.is_empty() && query.terms.iter().all(|t| self.terms.contains_key(t))
    }
}

/// A parsed NIP-50 search string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    /// Distinct terms, all of which a result must contain.
    pub terms: Vec<String>,
}

impl Query {
    /// Splits on whitespace, drops `key:value` extensions (`include:spam`,
    /// `language:en`, `domain:…`), and tokenizes the rest like indexed text.
    pub fn parse(search: &str) -> Query {
        Query::parse_at_most(search, usize::MAX).expect("no term limit")
    }

    /// [`Query::parse`], or `None` as soon as the search has more than
    /// `max_terms` distinct terms. Linear in the length of `search`.
    pub fn parse_at_most(search: &str, max_terms: usize) -> Option<Query> {
        let mut terms: Vec<String> = Vec::new();
        let mut seen: std::collections::HashSet<String, TermHasher> = Default::default();
        let mut over = false;
        for word in search.split_whitespace() {
            if over {
                break;
            }
            if is_extension(word) {
                continue;
            }
            tokenize(word, |t| {
                if over || seen.contains(t) {
                    return;
                }
                if terms.len() == max_terms {
                    over = true;
                    return;
                }
                seen.insert(t.to_owned());
                terms.push(t.to_owned());
            });
        }
        (!over).then_some(Query { terms })
    }

    /// Heap bytes it holds (for connection budgets).
    pub fn footprint(&self) -> usize {
        std::mem::size_of::<Query>()
            + self
                .terms
                .iter()
                .map(|t| std::mem::size_of::<String>() + t.len())
                .sum::<usize>()
    }
}

/// `key:value` with a key of ASCII letters, digits, `_` or `-`.
fn is_extension(word: &str) -> bool {
    word.split_once(':').is_some_and(|(key, _)| {
        !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// Okapi BM25 inverse document frequency of a term in `df` of `docs` events.
pub fn idf(docs: u64, df: u64) -> f64 {
    let (n, df) = (docs.max(df) as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// One term's BM25 contribution: `idf · tf·(k1+1) / (tf + k1·(1 − b + b·len/avg_len))`.
pub fn term_score(idf: f64, tf: u16, len: u16, avg_len: f64) -> f64 {
    let tf = f64::from(tf);
    let norm = 1.0 - B + B * f64::from(len) / avg_len.max(1.0);
    idf * tf * (K1 + 1.0) / (tf + K1 * norm)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        tokenize(text, |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn tokenizer_lowercases_unicode_and_skips_short_and_long_words() {
        assert_eq!(terms("Café CAFÉ café"), ["café", "café", "café"]);
        assert_eq!(
            terms("Straße, ΣΟΦΙΑ! 東京 a b I'm #nostr"),
            ["straße", "σοφια", "東京", "nostr"]
        );
        assert_eq!(terms(&"x".repeat(41)), Vec::<String>::new());
        assert_eq!(terms(&"x".repeat(40)).len(), 1);
        // Two characters, whatever their byte length.
        assert_eq!(terms("é ét"), ["ét"]);
    }

    #[test]
    fn encrypted_payloads_are_ciphertext_and_text_is_not() {
        let b64 = "aGVsbG8gd29ybGQgdGhpcyBpcyBhIHRlc3Qgb2YgdGhlIGNpcGhlcnRleHQgcnVsZQ==";
        assert!(is_ciphertext(b64));
        assert!(is_ciphertext(&format!("{b64}?iv=MTIzNDU2Nzg5MDEyMzQ1Ng==")));
        assert!(is_ciphertext(&format!("v2:{}", b64.replace('+', "-"))));
        // Too short, or words, or a link: text.
        assert!(!is_ciphertext(&b64[..63]));
        assert!(!is_ciphertext(&format!("{} {}", &b64[..40], &b64[40..])));
        assert!(!is_ciphertext(
            "https://example.com/aGVsbG8gd29ybGQgdGhpcyBpcyBhIHRlc3Qgb2YgdGhlIGNpcGhlcnRleHQ"
        ));
        assert!(!is_ciphertext(&"añb".repeat(30)));
    }

    #[test]
    fn query_drops_extensions_and_duplicates() {
        let q = Query::parse("Café include:spam language:en  café NOSTR domain:x.com a");
        assert_eq!(q.terms, ["café", "nostr"]);
        assert!(Query::parse("include:spam").terms.is_empty());
    }

    #[test]
    fn a_query_over_the_term_limit_is_refused_and_repeats_do_not_count() {
        assert_eq!(
            Query::parse_at_most("one two two THREE", 3).unwrap().terms,
            ["one", "two", "three"]
        );
        assert!(Query::parse_at_most("one two three four", 3).is_none());
        // Many words, few distinct terms.
        let repeated = "nostr ".repeat(100_000);
        assert_eq!(Query::parse_at_most(&repeated, 1).unwrap().terms, ["nostr"]);
        let many: String = (0..40_000).map(|i| format!("w{i} ")).collect();
        assert!(Query::parse_at_most(&many, 32).is_none());
        assert_eq!(Query::parse(&many).terms.len(), 40_000);
    }

    #[test]
    fn more_occurrences_in_a_shorter_text_score_higher() {
        let idf = idf(10, 2);
        assert!(term_score(idf, 3, 5, 20.0) > term_score(idf, 1, 60, 20.0));
        assert!(idf > super::idf(10, 8));
    }
}
