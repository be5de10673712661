//! What an operator does to a running relay or its database: find the
//! stored events a filter matches on the query planner REQs use
//! ([`matching`]) and remove them through the one writer ([`remove`]);
//! `nostrwire scan` and `delete` run them on the data directory, the
//! relay's NIP-86 endpoint ([`nip86`], authorized by [`nip98`]) on its own
//! writer, beside the operators' lists it keeps ([`moderation`]).

pub mod moderation;
pub mod nip86;
pub mod nip98;

use crossbeam_channel::Sender;
use nostrwire_event::{EventId, Filter};

use crate::store::{EventStore, Found, QueryCursor, ScanStatus, StoreResult, Task, Write};

/// Index entries one slice of [`matching`] examines.
const SCAN_BUDGET: usize = 10_000;
/// Most events one removal transaction takes out.
pub const REMOVE_CHUNK: usize = 10_000;

/// The stored events `filter` matches as a REQ would find them (its
/// `limit` honoured; none: every match), newest first, each kept by
/// serial, id and time ([`Found::is_deferred`]): render them with
/// [`EventStore::render`]. No read restriction applies: this is the
/// operator's view.
pub fn matching(store: &dyn EventStore, filter: &Filter, now: u64) -> StoreResult<Vec<Found>> {
    let limit = filter
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let mut cursor = QueryCursor::ids(limit);
    while store.scan(filter, &mut cursor, SCAN_BUDGET, now)? == ScanStatus::More {}
    Ok(cursor.into_results())
}

/// Removes the stored events with `ids` through the writer whose inbox is
/// `writer` (the relay's, or one a command started), [`REMOVE_CHUNK`] per
/// transaction between its commits; `progress` hears the running total
/// after each. Returns how many were stored and are gone.
pub fn remove<T>(
    writer: &Sender<Write<T>>,
    ids: &[EventId],
    progress: &mut dyn FnMut(usize),
) -> anyhow::Result<usize> {
    let mut removed = 0;
    for chunk in ids.chunks(REMOVE_CHUNK) {
        let (tell, told) = crossbeam_channel::bounded(1);
        let chunk = chunk.to_vec();
        let task = Task::new(move |store: &dyn EventStore| {
            let _ = tell.send(store.remove_ids(&chunk).map_err(|e| e.to_string()));
        });
        writer
            .send(Write::Task(task))
            .map_err(|_| anyhow::anyhow!("the writer has stopped"))?;
        let n = told
            .recv()
            .map_err(|_| anyhow::anyhow!("the writer stopped before the removal"))?
            .map_err(|e| anyhow::anyhow!("removing events failed: {e}"))?;
        removed += n;
        progress(removed);
    }
    Ok(removed)
}
