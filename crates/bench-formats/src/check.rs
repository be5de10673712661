//! Correctness before speed: every format must decode every corpus event
//! and round-trip it to the same id, or the run fails.

use nostrwire_event::{Event, PreimageFields};

use crate::formats::Format;

/// Encodes every event with `format` and checks that decoding gives back an
/// event with the same claimed id and the same recomputed id, through every
/// decode path the format offers (owned, id, selective, batch). Returns the
/// records.
pub fn round_trip(format: &dyn Format, events: &[Event]) -> anyhow::Result<Vec<Vec<u8>>> {
    let name = format.name();
    let mut records = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let fail = |what: &str| anyhow::anyhow!("{name}: event {} ({}): {what}", i + 1, e.id);
        let mut bytes = Vec::new();
        format.encode(e, &mut bytes);
        let doc = format
            .decode(&bytes)
            .map_err(|err| fail(&format!("decode failed: {err:#}")))?;
        if doc.id != e.id {
            return Err(fail("decoded claimed id differs"));
        }
        if doc.compute_id() != e.id {
            return Err(fail("recomputed id differs"));
        }
        let id = format
            .decode_id(&bytes)
            .map_err(|err| fail(&format!("decode + id failed: {err:#}")))?;
        if id != e.id {
            return Err(fail("decode + id gives another id"));
        }
        for (path, s) in format.selective().iter().enumerate() {
            let (kind, pubkey) = format
                .select(path, &bytes)
                .map_err(|err| fail(&format!("selective {} failed: {err:#}", s.path)))?;
            if kind != e.kind || pubkey != e.pubkey {
                return Err(fail(&format!("selective {} reads other values", s.path)));
            }
        }
        records.push(bytes);
    }
    let mut batch = Vec::new();
    format.encode_batch(events, &mut batch);
    let docs = format
        .decode_batch(&batch)
        .map_err(|err| anyhow::anyhow!("{name}: batch decode failed: {err:#}"))?;
    anyhow::ensure!(
        docs.len() == events.len(),
        "{name}: batch holds {} events, expected {}",
        docs.len(),
        events.len()
    );
    for (i, (d, e)) in docs.iter().zip(events).enumerate() {
        anyhow::ensure!(
            d.id == e.id && d.compute_id() == e.id,
            "{name}: batch event {} ({}) round-trips to another id",
            i + 1,
            e.id
        );
    }
    Ok(records)
}

/// Checks the full validation path (id and signature) of every record.
pub fn validate_all(format: &dyn Format, records: &[Vec<u8>]) -> anyhow::Result<()> {
    for (i, r) in records.iter().enumerate() {
        format.validate(r).map_err(|err| {
            anyhow::anyhow!(
                "{}: event {}: validation failed: {err:#}",
                format.name(),
                i + 1
            )
        })?;
    }
    Ok(())
}
