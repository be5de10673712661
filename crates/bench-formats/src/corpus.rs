//! The corpus: JSON Lines of valid signed events, and the network kind mix.

use nostrwire_event::{Event, EventRef};

/// Parses a JSON Lines corpus (blank lines skipped); fails on any bad line.
pub fn parse(corpus: &[u8]) -> anyhow::Result<Vec<Event>> {
    let events: Vec<Event> = corpus
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .map(|(i, l)| {
            EventRef::parse(l)
                .map(|e| e.to_event())
                .map_err(|e| anyhow::anyhow!("corpus line {}: {e}", i + 1))
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(!events.is_empty(), "empty corpus");
    Ok(events)
}

/// Parses a kind mix: lines of `kind<TAB>share` (percent or any weight).
pub fn parse_kind_mix(text: &str) -> anyhow::Result<Vec<(u16, f64)>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            let mut parts = l.split_whitespace();
            let mut parse = || -> Option<(u16, f64)> {
                Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
            };
            parse().ok_or_else(|| anyhow::anyhow!("kind mix line {}: expected `kind share`", i + 1))
        })
        .collect()
}
