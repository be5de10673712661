//! `nostrwire bench codec`: the stages of JSON event handling, ours against
//! rust-nostr's `nostr` crate and a serde_json + sha2 baseline (binostr's
//! method), plus bare libsecp256k1 verification of the same triples.
//!
//! Stages, each a full pass over the corpus:
//! - `parse`: strict parse into the implementation's event type;
//! - `parse_id`: parse, then recompute and compare the id;
//! - `parse_id_sig`: parse, id, then the BIP-340 signature (full validation);
//! - `serialize`: owned event → canonical compact JSON;
//! - `bare_verify`: x-only key parse + Schnorr verify of pre-extracted
//!   (id, sig, pubkey) triples, the floor for full validation of events by
//!   distinct authors (ours keeps recent authors' keys parsed, so on a
//!   corpus where authors repeat it can go below it).

use std::hint::black_box;

use anyhow::{bail, Context};
use nostrwire_event::{EventRef, PreimageFields, SignedFields};
use secp256k1::{schnorr, XOnlyPublicKey, SECP256K1};
use sha2::{Digest, Sha256};

use crate::host::{Fingerprint, Host};
use crate::stats::{time_pass, Summary};

/// Options of a run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Timed samples per measurement (each sample is one pass over the corpus).
    pub samples: usize,
}

/// One measured cell.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Cell {
    /// Stage name.
    pub stage: &'static str,
    /// Implementation name.
    pub implementation: &'static str,
    /// Timing summary, ns/event.
    pub summary: Summary,
}

/// Everything a run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// Machine and toolchain.
    pub host: Host,
    /// The corpus file.
    pub corpus: Fingerprint,
    /// Events in the corpus.
    pub events: usize,
    /// Mean JSON bytes per event.
    pub mean_event_bytes: f64,
    /// All cells.
    pub cells: Vec<Cell>,
}

/// The implementations compared.
pub const OURS: &str = "nostrwire";
/// rust-nostr.
pub const NOSTR: &str = "nostr";
/// serde_json + sha2 baseline.
pub const BASELINE: &str = "serde_json+sha2";
/// libsecp256k1 alone.
pub const SECP: &str = "libsecp256k1";

/// Stage names in report order.
pub const STAGES: [&str; 6] = [
    "parse",
    "parse_id",
    "parse_id_sig",
    "serialize",
    "bare_verify",
    "batch_verify",
];

#[derive(serde::Deserialize, serde::Serialize)]
struct BaselineEvent {
    id: String,
    pubkey: String,
    created_at: u64,
    kind: u16,
    tags: Vec<Vec<String>>,
    content: String,
    sig: String,
}

fn baseline_id(e: &BaselineEvent) -> [u8; 32] {
    // binostr's method: build the preimage with serde_json, then hash it.
    let preimage = serde_json::to_vec(&(0u8, &e.pubkey, e.created_at, e.kind, &e.tags, &e.content))
        .expect("serializable");
    Sha256::digest(&preimage).into()
}

fn baseline_id_ok(e: &BaselineEvent) -> bool {
    let mut claimed = [0u8; 32];
    let mut bytes = Vec::with_capacity(32);
    nostrwire_event::hex::decode_into(e.id.as_bytes(), &mut bytes).is_ok() && bytes.len() == 32 && {
        claimed.copy_from_slice(&bytes);
        claimed == baseline_id(e)
    }
}

fn baseline_sig_ok(e: &BaselineEvent) -> bool {
    let mut buf = Vec::with_capacity(64);
    let Ok(()) = nostrwire_event::hex::decode_into(e.pubkey.as_bytes(), &mut buf) else {
        return false;
    };
    let Ok(pk) = XOnlyPublicKey::from_slice(&buf) else {
        return false;
    };
    let Ok(()) = nostrwire_event::hex::decode_into(e.sig.as_bytes(), &mut buf) else {
        return false;
    };
    let Ok(sig) = schnorr::Signature::from_slice(&buf) else {
        return false;
    };
    let Ok(()) = nostrwire_event::hex::decode_into(e.id.as_bytes(), &mut buf) else {
        return false;
    };
    SECP256K1.verify_schnorr(&sig, &buf, &pk).is_ok()
}

type Pass<'a> = Box<dyn Fn() + 'a>;

/// Runs the benchmark on a JSON Lines corpus.
pub fn run(
    corpus: &[u8],
    options: &Options,
    mut progress: impl FnMut(usize, usize),
) -> anyhow::Result<Report> {
    let text = std::str::from_utf8(corpus).context("corpus is not UTF-8")?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        bail!("corpus has no events");
    }
    // Every implementation must accept every event before anything is timed.
    let mut owned_ours = Vec::with_capacity(lines.len());
    let mut owned_nostr = Vec::with_capacity(lines.len());
    let mut owned_base = Vec::with_capacity(lines.len());
    let mut triples = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let ours = EventRef::parse(line.as_bytes())
            .with_context(|| format!("event {}: nostrwire", i + 1))?;
        ours.verify()
            .with_context(|| format!("event {}: nostrwire verify", i + 1))?;
        let theirs = nostr::event::Event::from_json(line)
            .with_context(|| format!("event {}: nostr", i + 1))?;
        theirs
            .verify()
            .with_context(|| format!("event {}: nostr verify", i + 1))?;
        let base: BaselineEvent =
            serde_json::from_str(line).with_context(|| format!("event {}: serde_json", i + 1))?;
        if !baseline_id_ok(&base) || !baseline_sig_ok(&base) {
            bail!("event {}: the serde_json+sha2 baseline rejects it", i + 1);
        }
        triples.push((*ours.id(), *ours.pubkey(), *ours.sig()));
        owned_ours.push(ours.to_event());
        owned_nostr.push(theirs);
        owned_base.push(base);
    }
    let n = lines.len();
    let lines = &lines;
    // The same triples, checked 64 at a time as the relay's ingest does
    // when events wait; the key cache starts empty for each pass.
    let batch_triples: Vec<([u8; 32], [u8; 32], [u8; 64])> = triples
        .iter()
        .map(|(id, pk, sig)| (*pk.as_bytes(), *id.as_bytes(), *sig.as_bytes()))
        .collect();
    let batch_triples = &batch_triples;
    let batch = &std::cell::RefCell::new(nostrwire_schnorr::Batch::new());
    let mut passes: Vec<(&'static str, &'static str, Pass<'_>)> = vec![
        (
            "parse",
            OURS,
            Box::new(move || {
                for l in lines {
                    black_box(EventRef::parse(black_box(l.as_bytes())).expect("valid"));
                }
            }),
        ),
        (
            "parse",
            NOSTR,
            Box::new(move || {
                for l in lines {
                    black_box(nostr::event::Event::from_json(black_box(l)).expect("valid"));
                }
            }),
        ),
        (
            "parse",
            BASELINE,
            Box::new(move || {
                for l in lines {
                    black_box(serde_json::from_str::<BaselineEvent>(black_box(l)).expect("valid"));
                }
            }),
        ),
        (
            "parse_id",
            OURS,
            Box::new(move || {
                for l in lines {
                    let e = EventRef::parse(black_box(l.as_bytes())).expect("valid");
                    assert!(e.verify_id().is_ok());
                }
            }),
        ),
        (
            "parse_id",
            NOSTR,
            Box::new(move || {
                for l in lines {
                    let e = nostr::event::Event::from_json(black_box(l)).expect("valid");
                    assert!(e.verify_id());
                }
            }),
        ),
        (
            "parse_id",
            BASELINE,
            Box::new(move || {
                for l in lines {
                    let e: BaselineEvent = serde_json::from_str(black_box(l)).expect("valid");
                    assert!(baseline_id_ok(&e));
                }
            }),
        ),
        (
            "parse_id_sig",
            OURS,
            Box::new(move || {
                for l in lines {
                    let e = EventRef::parse(black_box(l.as_bytes())).expect("valid");
                    assert!(e.verify().is_ok());
                }
            }),
        ),
        (
            "parse_id_sig",
            NOSTR,
            Box::new(move || {
                for l in lines {
                    let e = nostr::event::Event::from_json(black_box(l)).expect("valid");
                    assert!(e.verify().is_ok());
                }
            }),
        ),
        (
            "parse_id_sig",
            BASELINE,
            Box::new(move || {
                for l in lines {
                    let e: BaselineEvent = serde_json::from_str(black_box(l)).expect("valid");
                    assert!(baseline_id_ok(&e) && baseline_sig_ok(&e));
                }
            }),
        ),
        (
            "serialize",
            OURS,
            Box::new(|| {
                for e in &owned_ours {
                    black_box(black_box(e).to_json());
                }
            }),
        ),
        (
            "serialize",
            NOSTR,
            Box::new(|| {
                for e in &owned_nostr {
                    black_box(black_box(e).as_json());
                }
            }),
        ),
        (
            "serialize",
            BASELINE,
            Box::new(|| {
                for e in &owned_base {
                    black_box(serde_json::to_string(black_box(e)).expect("serializable"));
                }
            }),
        ),
        (
            "bare_verify",
            SECP,
            Box::new(|| {
                for (id, pk, sig) in &triples {
                    let key = XOnlyPublicKey::from_byte_array(black_box(pk.as_bytes()))
                        .expect("valid key");
                    let sig = schnorr::Signature::from_byte_array(*black_box(sig.as_bytes()));
                    assert!(SECP256K1.verify_schnorr(&sig, id.as_bytes(), &key).is_ok());
                }
            }),
        ),
        (
            "batch_verify",
            OURS,
            Box::new(move || {
                for group in batch_triples.chunks(nostrwire_schnorr::BATCH_MAX) {
                    let mut batch = batch.borrow_mut();
                    for (key, id, sig) in group {
                        assert!(batch.push(key, id, sig));
                    }
                    assert!(batch.verify());
                }
            }),
        ),
    ];
    // One untimed warm-up pass each, then interleaved samples.
    for (_, _, pass) in &passes {
        pass();
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(options.samples); passes.len()];
    let total = options.samples * passes.len();
    for s in 0..options.samples {
        for (i, (_, _, pass)) in passes.iter().enumerate() {
            samples[i].push(time_pass(n, pass));
            progress(s * passes.len() + i + 1, total);
        }
    }
    let cells = passes
        .drain(..)
        .zip(samples)
        .map(|((stage, implementation, _), s)| Cell {
            stage,
            implementation,
            summary: Summary::from_samples(&s),
        })
        .collect();
    // Consistency check on the results of the owned models.
    for (ours, theirs) in owned_ours.iter().zip(&owned_nostr) {
        if ours.compute_id().as_bytes() != theirs.id.as_bytes() {
            bail!("nostrwire and nostr disagree on an id");
        }
    }
    Ok(Report {
        host: Host::detect(),
        corpus: Fingerprint::of(corpus),
        events: n,
        mean_event_bytes: lines.iter().map(|l| l.len()).sum::<usize>() as f64 / n as f64,
        cells,
    })
}

impl Report {
    /// The cell for a stage and implementation.
    pub fn cell(&self, stage: &str, implementation: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.stage == stage && c.implementation == implementation)
    }

    fn mean(&self, stage: &str, implementation: &str) -> f64 {
        self.cell(stage, implementation)
            .map_or(f64::NAN, |c| c.summary.mean_ns)
    }

    /// Headline ratios: how many times faster we are (>1 is better for us),
    /// and full validation relative to bare signature verification.
    pub fn ratios(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for stage in ["parse", "parse_id", "parse_id_sig", "serialize"] {
            for other in [NOSTR, BASELINE] {
                out.push((
                    format!("{stage}: {other} / {OURS}"),
                    self.mean(stage, other) / self.mean(stage, OURS),
                ));
            }
        }
        out.push((
            format!("bare_verify: {SECP} / batch_verify {OURS}"),
            self.mean("bare_verify", SECP) / self.mean("batch_verify", OURS),
        ));
        out.push((
            format!("parse_id_sig {OURS} / bare_verify"),
            self.mean("parse_id_sig", OURS) / self.mean("bare_verify", SECP),
        ));
        out
    }

    /// A human-readable table.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("host: {}\n", self.host.summary_line()));
        s.push_str(&format!(
            "corpus: {} events, {} bytes, mean {:.0} B/event, sha256 {}\n\n",
            self.events, self.corpus.bytes, self.mean_event_bytes, self.corpus.sha256
        ));
        s.push_str(&format!(
            "{:<14} {:>22} {:>22} {:>22}\n",
            "ns/event", OURS, NOSTR, BASELINE
        ));
        for stage in ["parse", "parse_id", "parse_id_sig", "serialize"] {
            s.push_str(&format!("{stage:<14}"));
            for imp in [OURS, NOSTR, BASELINE] {
                let c = self.cell(stage, imp).expect("measured");
                s.push_str(&format!(
                    " {:>13.0} ± {:<6.0}",
                    c.summary.mean_ns, c.summary.ci95_ns
                ));
            }
            s.push('\n');
        }
        let bare = self.cell("bare_verify", SECP).expect("measured");
        s.push_str(&format!(
            "{:<14} {:>13.0} ± {:<6.0} (libsecp256k1: x-only key parse + Schnorr verify)\n",
            "bare_verify", bare.summary.mean_ns, bare.summary.ci95_ns
        ));
        if let Some(batch) = self.cell("batch_verify", OURS) {
            s.push_str(&format!(
                "{:<14} {:>13.0} ± {:<6.0} (nostrwire: BIP-340 batches of 64, keys cached)\n\n",
                "batch_verify", batch.summary.mean_ns, batch.summary.ci95_ns
            ));
        }
        for (name, r) in self.ratios() {
            s.push_str(&format!("{name:<40} {r:>6.2}x\n"));
        }
        s
    }
}
