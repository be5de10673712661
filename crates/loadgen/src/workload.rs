//! Events to send, all signed before any clock starts.
//!
//! Generated events follow the real kind mix (a `kind<TAB>percent` table) and
//! take their tags and content from a corpus event of the same kind, chosen
//! at random: sizes, tag counts and escaping are those of real traffic, while
//! the author (one of `authors` deterministic keys) and `created_at` are new,
//! so every id is new. [`mixed_events`] also redraws what real traffic does
//! not repeat (prose, encrypted payloads, `e` ids: see [`crate::renew`]). `created_at` rises with the send order, so a later
//! replaceable event always supersedes an earlier one. Replayed events
//! (`--replay`) are sent exactly as read.

use std::collections::HashMap;
use std::path::Path;

use nostrwire_event::message::write;
use nostrwire_event::{
    parse_event_line, Event, Keys, Kind, Limits, PublicKey, Tag, Timestamp, UnsignedEvent,
};

use crate::renew::Renewal;
use crate::rng::Rng;
use crate::Error;

/// An event ready to send: the owned event, its `["EVENT",…]` message and
/// its `nostrwire.v1` frame, both encoded before any clock starts.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The signed event.
    pub event: Event,
    /// The serialized client message.
    pub message: Vec<u8>,
    /// The binary-transport EVENT frame (type byte, nwb record).
    pub frame: Vec<u8>,
}

impl Prepared {
    /// Wraps a signed event with its message and frame.
    pub fn new(event: Event) -> Prepared {
        let mut message = Vec::with_capacity(512);
        write::client_event(&mut message, &event);
        let mut frame = Vec::with_capacity(message.len());
        nostrwire_wire::transport::write_event(&mut frame, &nostrwire_wire::encode_event(&event));
        Prepared {
            event,
            message,
            frame,
        }
    }
}

/// The share of each kind in real traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct KindMix {
    kinds: Vec<u16>,
    cumulative: Vec<f64>,
}

impl KindMix {
    /// Parses `kind<TAB>weight` lines (weights need not sum to 100).
    pub fn parse(text: &str) -> Result<KindMix, Error> {
        let mut kinds = Vec::new();
        let mut cumulative = Vec::new();
        let mut total = 0.0;
        for (no, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(k), Some(w)) = (parts.next(), parts.next()) else {
                return Err(Error::Input(format!(
                    "kind mix line {}: expected `kind weight`",
                    no + 1
                )));
            };
            let kind: u16 = k
                .parse()
                .map_err(|_| Error::Input(format!("kind mix line {}: bad kind `{k}`", no + 1)))?;
            let weight: f64 = w
                .parse()
                .ok()
                .filter(|w: &f64| w.is_finite() && *w >= 0.0)
                .ok_or_else(|| {
                    Error::Input(format!("kind mix line {}: bad weight `{w}`", no + 1))
                })?;
            total += weight;
            kinds.push(kind);
            cumulative.push(total);
        }
        if kinds.is_empty() || total <= 0.0 {
            return Err(Error::Input("kind mix is empty".into()));
        }
        for c in &mut cumulative {
            *c /= total;
        }
        Ok(KindMix { kinds, cumulative })
    }

    /// Reads a kind mix file.
    pub fn load(path: &Path) -> Result<KindMix, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        KindMix::parse(&text)
    }

    /// Draws a kind.
    pub fn sample(&self, rng: &mut Rng) -> u16 {
        let u = rng.unit();
        let i = self.cumulative.partition_point(|c| *c <= u);
        self.kinds[i.min(self.kinds.len() - 1)]
    }

    /// The kinds and their shares (0–1).
    pub fn shares(&self) -> Vec<(u16, f64)> {
        let mut prev = 0.0;
        self.kinds
            .iter()
            .zip(&self.cumulative)
            .map(|(k, c)| {
                let share = c - prev;
                prev = *c;
                (*k, share)
            })
            .collect()
    }
}

/// Tags and content of one corpus event.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Kind of the source event.
    pub kind: u16,
    /// Tags.
    pub tags: Vec<Tag>,
    /// Content.
    pub content: String,
}

/// Corpus shapes, indexed by kind.
#[derive(Clone, Debug)]
pub struct Shapes {
    shapes: Vec<Shape>,
    by_kind: HashMap<u16, Vec<usize>>,
    renewal: Renewal,
}

impl Shapes {
    /// Reads a JSON Lines corpus (structure only; signatures are not needed).
    pub fn load(path: &Path) -> Result<Shapes, Error> {
        let data =
            std::fs::read(path).map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        let events = parse_lines(&data, path)?;
        Shapes::from_events(events)
    }

    /// Builds the index from events.
    pub fn from_events(events: Vec<Event>) -> Result<Shapes, Error> {
        if events.is_empty() {
            return Err(Error::Input("corpus is empty".into()));
        }
        let mut by_kind: HashMap<u16, Vec<usize>> = HashMap::new();
        let shapes: Vec<Shape> = events
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                by_kind.entry(e.kind.as_u16()).or_default().push(i);
                Shape {
                    kind: e.kind.as_u16(),
                    tags: e.tags,
                    content: e.content,
                }
            })
            .collect();
        let renewal = Renewal::learn(shapes.iter().map(|s| s.content.as_str()));
        Ok(Shapes {
            shapes,
            by_kind,
            renewal,
        })
    }

    /// A shape of `kind`, or of any kind when the corpus has none of it.
    pub fn sample(&self, kind: u16, rng: &mut Rng) -> &Shape {
        match self.by_kind.get(&kind) {
            Some(list) => &self.shapes[list[rng.below(list.len() as u64) as usize]],
            None => &self.shapes[rng.below(self.shapes.len() as u64) as usize],
        }
    }

    /// Tags and content for a new event of `kind`: a sampled shape's, with
    /// prose, encrypted payloads and `e` ids drawn anew ([`Renewal`]).
    pub fn renewed(&self, kind: u16, rng: &mut Rng) -> (Vec<Tag>, String) {
        let shape = self.sample(kind, rng);
        let tags = self.renewal.tags(&shape.tags, rng);
        let content = self.renewal.content(&shape.content, rng);
        (tags, content)
    }

    /// Shapes of `kind` with at least `min_tags` tags.
    pub fn with_min_tags(&self, kind: u16, min_tags: usize) -> Vec<&Shape> {
        self.by_kind
            .get(&kind)
            .map(|l| {
                l.iter()
                    .map(|i| &self.shapes[*i])
                    .filter(|s| s.tags.len() >= min_tags)
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn parse_lines(data: &[u8], path: &Path) -> Result<Vec<Event>, Error> {
    let limits = Limits::DEFAULT;
    let mut out = Vec::new();
    for (no, line) in data.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let event = parse_event_line(line, &limits)
            .map_err(|e| Error::Input(format!("{}:{}: {e}", path.display(), no + 1)))?;
        out.push(event.to_event());
    }
    Ok(out)
}

/// Reads events to replay, in file order, at most `count`.
pub fn load_replay(path: &Path, count: usize) -> Result<Vec<Prepared>, Error> {
    let data = std::fs::read(path).map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
    let mut events = parse_lines(&data, path)?;
    events.truncate(count);
    if events.is_empty() {
        return Err(Error::Input(format!(
            "{}: no events to replay",
            path.display()
        )));
    }
    Ok(events.into_iter().map(Prepared::new).collect())
}

/// The deterministic authors of a run.
pub fn authors(seed: u64, n: usize) -> Vec<Keys> {
    (0..n.max(1) as u64)
        .map(|i| Keys::derive(seed, i))
        .collect()
}

/// What to build; everything is a pure function of these fields.
#[derive(Clone, Debug)]
pub struct GenSpec {
    /// Seed (the same seed gives the same kinds, authors and contents).
    pub seed: u64,
    /// Independent stream within the seed (one per scenario and round).
    pub stream: u64,
    /// Number of events.
    pub count: usize,
    /// `created_at` of the last event; earlier events are one second apart.
    pub newest: Timestamp,
    /// Extra tag added to every event (e.g. a run marker that subscribers filter on).
    pub extra_tag: Option<Tag>,
}

/// One event to build: everything but the signature.
struct Plan {
    author: usize,
    created_at: u64,
    kind: u16,
    tags: Vec<Tag>,
    content: String,
}

/// Builds and signs events, on all cores. `kinds` draws each kind, `shapes`
/// provides tags and content.
pub fn generate(
    spec: &GenSpec,
    keys: &[Keys],
    mut pick: impl FnMut(&mut Rng) -> (u16, Vec<Tag>, String),
) -> Vec<Prepared> {
    let mut rng = Rng::stream(spec.seed, spec.stream);
    let newest = spec.newest.as_u64();
    let plans: Vec<Plan> = (0..spec.count)
        .map(|i| {
            let (kind, mut tags, content) = pick(&mut rng);
            if let Some(t) = &spec.extra_tag {
                tags.push(t.clone());
            }
            let created_at = newest.saturating_sub((spec.count - 1 - i) as u64);
            renew_expiration(&mut tags, created_at);
            Plan {
                author: rng.below(keys.len() as u64) as usize,
                created_at,
                kind,
                tags,
                content,
            }
        })
        .collect();
    sign_all(plans, keys)
}

/// How long after its new `created_at` a resampled event with a NIP-40
/// `expiration` tag expires (the corpus value is long past).
pub const EXPIRATION_AFTER_SECS: u64 = 30 * 24 * 3600;

/// Moves NIP-40 `expiration` tags after `created_at`, so a resampled event is
/// live when sent (a relay rightly refuses an expired one).
fn renew_expiration(tags: &mut [Tag], created_at: u64) {
    for t in tags.iter_mut() {
        if t.name() == "expiration" && t.as_slice().len() >= 2 {
            let mut v = t.clone().into_vec();
            v[1] = (created_at + EXPIRATION_AFTER_SECS).to_string();
            if let Some(new) = Tag::new(v) {
                *t = new;
            }
        }
    }
}

/// The usual generator: kind from the mix, shape from the corpus, renewed.
pub fn mixed_events(
    spec: &GenSpec,
    keys: &[Keys],
    mix: &KindMix,
    shapes: &Shapes,
) -> Vec<Prepared> {
    generate(spec, keys, |rng| {
        let kind = mix.sample(rng);
        let (tags, content) = shapes.renewed(kind, rng);
        (kind, tags, content)
    })
}

fn sign_all(plans: Vec<Plan>, keys: &[Keys]) -> Vec<Prepared> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = plans.len().div_ceil(threads).max(1);
    let mut plans = plans;
    let mut chunks = Vec::new();
    while plans.len() > chunk {
        let rest = plans.split_off(chunk);
        chunks.push(std::mem::replace(&mut plans, rest));
    }
    chunks.push(plans);
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|p| {
                            let k = &keys[p.author];
                            let created_at = Timestamp::new(p.created_at).unwrap_or(Timestamp::MAX);
                            let ev =
                                UnsignedEvent::new(k, created_at, Kind(p.kind), p.tags, p.content)
                                    .sign(k);
                            Prepared::new(ev)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("signing thread panicked"))
            .collect()
    })
}

/// The distinct authors of `events`, in first-seen order.
pub fn unique_authors(events: &[Prepared]) -> Vec<PublicKey> {
    let mut seen = std::collections::HashSet::new();
    events
        .iter()
        .filter(|p| seen.insert(p.event.pubkey))
        .map(|p| p.event.pubkey)
        .collect()
}

/// The public keys of `keys`.
pub fn pubkeys(keys: &[Keys]) -> Vec<PublicKey> {
    keys.iter().map(Keys::public_key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostrwire_event::SignedFields;

    fn corpus() -> Shapes {
        Shapes::load(&crate::testdata("real-events.jsonl")).unwrap()
    }

    #[test]
    fn kind_mix_parses_and_samples_in_proportion() {
        let mix = KindMix::parse("1\t75\n7\t25\n").unwrap();
        let mut rng = Rng::new(3);
        let ones = (0..20_000).filter(|_| mix.sample(&mut rng) == 1).count();
        assert!((14_000..16_000).contains(&ones), "{ones}");
        assert!(KindMix::parse("").is_err());
        assert!(KindMix::parse("x 1").is_err());
        assert!(KindMix::parse("1 -1").is_err());
        let shares = mix.shares();
        assert!((shares[0].1 - 0.75).abs() < 1e-9 && (shares[1].1 - 0.25).abs() < 1e-9);
    }

    #[test]
    fn repo_kind_mix_loads() {
        let mix = KindMix::load(&crate::testdata("kind-mix.tsv")).unwrap();
        assert!(mix.shares().iter().any(|(k, s)| *k == 1 && *s > 0.3));
    }

    #[test]
    fn generated_events_are_valid_seeded_and_ordered() {
        let shapes = corpus();
        let mix = KindMix::load(&crate::testdata("kind-mix.tsv")).unwrap();
        let keys = authors(5, 4);
        let spec = GenSpec {
            seed: 5,
            stream: 1,
            count: 40,
            newest: Timestamp::new(1_800_000_000).unwrap(),
            extra_tag: Some(Tag::from_strs(&["t", "run"])),
        };
        let a = mixed_events(&spec, &keys, &mix, &shapes);
        let b = mixed_events(&spec, &keys, &mix, &shapes);
        assert_eq!(a.len(), 40);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.event, y.event, "same seed, same events");
            x.event.verify().unwrap();
            assert!(x.event.tags.iter().any(|t| t.as_slice() == ["t", "run"]));
            let parsed = nostrwire_event::ClientMessage::parse(&x.message).unwrap();
            assert_eq!(parsed.type_name(), "EVENT");
        }
        assert!(a
            .windows(2)
            .all(|w| w[0].event.created_at < w[1].event.created_at));
        assert_eq!(a.last().unwrap().event.created_at.as_u64(), 1_800_000_000);
        let other = GenSpec { stream: 2, ..spec };
        let c = mixed_events(&other, &keys, &mix, &shapes);
        assert!(a.iter().zip(&c).any(|(x, y)| x.event.id != y.event.id));
    }

    #[test]
    fn generated_contents_do_not_repeat_the_corpus() {
        let shapes = corpus();
        let mix = KindMix::load(&crate::testdata("kind-mix.tsv")).unwrap();
        let spec = GenSpec {
            seed: 2,
            stream: 0,
            count: 3000,
            newest: Timestamp::new(1_800_000_000).unwrap(),
            extra_tag: None,
        };
        let events = mixed_events(&spec, &authors(2, 10), &mix, &shapes);
        let corpus_contents: std::collections::HashSet<&str> =
            shapes.shapes.iter().map(|s| s.content.as_str()).collect();
        let renewable: Vec<&str> = events
            .iter()
            .map(|p| p.event.content.as_str())
            .filter(|c| crate::renew::ContentClass::of(c) != crate::renew::ContentClass::Kept)
            .collect();
        assert!(renewable.len() > 500, "{}", renewable.len());
        let copies = renewable
            .iter()
            .filter(|c| corpus_contents.contains(*c))
            .count();
        let distinct: std::collections::HashSet<&&str> = renewable.iter().collect();
        assert!(copies * 100 < renewable.len(), "{copies} copies");
        assert!(
            distinct.len() * 100 > renewable.len() * 95,
            "{} of {}",
            distinct.len(),
            renewable.len()
        );
    }

    #[test]
    fn expiration_tags_are_renewed() {
        let mut tags = vec![
            Tag::from_strs(&["expiration", "1700000000"]),
            Tag::from_strs(&["p", "x"]),
        ];
        renew_expiration(&mut tags, 1_800_000_000);
        let want = (1_800_000_000 + EXPIRATION_AFTER_SECS).to_string();
        assert_eq!(tags[0].as_slice(), ["expiration", want.as_str()]);
        assert_eq!(tags[1].as_slice(), ["p", "x"]);
    }

    #[test]
    fn shapes_fall_back_when_a_kind_is_missing() {
        let shapes = corpus();
        let mut rng = Rng::new(1);
        assert_eq!(shapes.sample(7, &mut rng).kind, 7);
        let _ = shapes.sample(4, &mut rng); // kind 4 is not in the corpus
        assert!(!shapes.with_min_tags(3, 1000).is_empty());
    }

    #[test]
    fn replay_reads_in_order_and_caps() {
        let path = crate::testdata("real-events.jsonl");
        let events = load_replay(&path, 5).unwrap();
        assert_eq!(events.len(), 5);
        let first = std::fs::read_to_string(&path).unwrap();
        let first = Event::from_json(first.lines().next().unwrap()).unwrap();
        assert_eq!(events[0].event, first);
    }
}
