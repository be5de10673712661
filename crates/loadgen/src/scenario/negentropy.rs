//! The NIP-77 sync scenario.

use super::*;

/// NIP-77 against re-downloading: the relay holds the seed events; the client
/// holds all but every tenth of them plus events of its own. Each iteration
/// runs a negentropy sync (then fetches the missing events by id) and a full
/// REQ re-download of the same window, on one connection, and checks that
/// both find exactly the known differences.
pub(super) async fn sync(run: &Run) -> Outcome {
    use crate::sync::{fetch, fetch_ids, reconcile, SyncError};
    let mut out = Outcome::new();
    seed(run, &mut out).await;
    let window = run.seed_events.iter().chain(run.events.iter());
    let (Some(since), Some(until)) = (
        window.clone().map(|p| p.event.created_at).min(),
        window.map(|p| p.event.created_at).max(),
    ) else {
        out.status = Status::Unsupported("no seed events to sync".into());
        return out;
    };
    let sync_filter = Filter {
        since: Some(since),
        until: Some(until),
        ..Filter::new()
    };
    let download_filter = Filter {
        limit: Some((run.seed_events.len() + run.events.len()) as u64),
        ..sync_filter.clone()
    };
    let mut conns = open_conns(run, 1, &mut out, "sync:negentropy").await;
    let Some(conn) = conns.first_mut() else {
        return out;
    };
    let timeout = run.target.timeout;
    // What the relay holds in the window (replaceable seeds may have been
    // superseded), read once, untimed.
    let stored = match fetch(conn, &download_filter, timeout).await {
        Ok(f) => f.items,
        Err(e) => {
            out.op("sync:download").fail(match e {
                SyncError::Failed(f) => f,
                SyncError::Unsupported(_) => Failure::Protocol,
            });
            return out;
        }
    };
    let lacking: HashSet<EventId> = stored
        .iter()
        .step_by(SYNC_DIFF_EVERY)
        .map(|(_, id)| *id)
        .collect();
    let own: HashSet<EventId> = run.events.iter().map(|p| p.event.id).collect();
    let mut local: Vec<(u64, EventId)> = stored
        .iter()
        .filter(|(_, id)| !lacking.contains(id))
        .copied()
        .collect();
    local.extend(
        run.events
            .iter()
            .map(|p| (p.event.created_at.as_u64(), p.event.id)),
    );
    let local_ids: HashSet<EventId> = local.iter().map(|(_, id)| *id).collect();
    let (mut neg_bytes, mut dl_bytes, mut rounds) = (0u64, 0u64, 0u64);
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    for i in 0..run.params.queries.max(1) {
        if Instant::now() >= deadline {
            break;
        }
        match reconcile(conn, &sync_filter, &local, timeout).await {
            Err(SyncError::Unsupported(reason)) if i == 0 => {
                out.status = Status::Unsupported(reason);
                break;
            }
            Err(SyncError::Unsupported(_)) => out.op("sync:negentropy").fail(Failure::Protocol),
            Err(SyncError::Failed(f)) => out.op("sync:negentropy").fail(f),
            Ok(r) if r.have != own || r.need != lacking => {
                out.anomalies.sample(
                    Failure::WrongResult.key(),
                    &format!(
                        "negentropy found {} to send and {} to fetch; expected {} and {}",
                        r.have.len(),
                        r.need.len(),
                        own.len(),
                        lacking.len()
                    ),
                );
                out.op("sync:negentropy").fail(Failure::WrongResult);
            }
            Ok(r) => {
                let need: Vec<EventId> = r.need.iter().copied().collect();
                match fetch_ids(conn, &need, timeout).await {
                    Ok(f) if f.items.len() == need.len() => {
                        let op = out.op("sync:negentropy");
                        op.success(r.latency + f.latency);
                        op.events_received += f.items.len() as u64;
                        neg_bytes += r.traffic.sent
                            + r.traffic.received
                            + f.traffic.sent
                            + f.traffic.received;
                        rounds += u64::from(r.rounds);
                    }
                    Ok(_) => out.op("sync:negentropy").fail(Failure::MissingResult),
                    Err(SyncError::Failed(f)) => out.op("sync:negentropy").fail(f),
                    Err(SyncError::Unsupported(_)) => {
                        out.op("sync:negentropy").fail(Failure::Protocol)
                    }
                }
            }
        }
        match fetch(conn, &download_filter, timeout).await {
            Ok(f) => {
                let missing: HashSet<EventId> = f
                    .items
                    .iter()
                    .map(|(_, id)| *id)
                    .filter(|id| !local_ids.contains(id))
                    .collect();
                if missing == lacking {
                    let op = out.op("sync:download");
                    op.success(f.latency);
                    op.events_received += f.items.len() as u64;
                    dl_bytes += f.traffic.sent + f.traffic.received;
                } else {
                    out.op("sync:download").fail(Failure::WrongResult);
                }
            }
            Err(SyncError::Failed(f)) => out.op("sync:download").fail(f),
            Err(SyncError::Unsupported(_)) => out.op("sync:download").fail(Failure::Protocol),
        }
        run.tick();
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    for c in conns {
        out.anomalies.merge(&c.close().await);
    }
    let per = |bytes: u64, label: &str, out: &Outcome| {
        let n = out.ops.get(label).map_or(0, |s| s.successes);
        (n > 0).then(|| bytes as f64 / n as f64)
    };
    if let Some(b) = per(neg_bytes, "sync:negentropy", &out) {
        out.metrics.insert("negentropy_bytes_per_sync".into(), b);
        out.metrics.insert(
            "negentropy_rounds_per_sync".into(),
            rounds as f64 / out.ops["sync:negentropy"].successes as f64,
        );
    }
    if let Some(b) = per(dl_bytes, "sync:download", &out) {
        out.metrics.insert("download_bytes_per_sync".into(), b);
    }
    out.metrics
        .insert("relay_events".into(), stored.len() as f64);
    out.metrics
        .insert("client_lacks".into(), lacking.len() as f64);
    out.metrics.insert("client_only".into(), own.len() as f64);
    out.notes.push(format!(
        "client lacks 1 in {SYNC_DIFF_EVERY} relay events and holds as many of its own; \
         negentropy latency includes fetching the missing events by id; \
         download = one REQ for the whole window"
    ));
    out
}
