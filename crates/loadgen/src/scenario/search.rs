//! The NIP-50 search scenario.

use super::*;

pub(super) async fn search(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let seeded = seed(run, &mut out).await;
    if seeded.regular_ids.is_empty() {
        out.status = Status::Unsupported("no search seed event was accepted".into());
        return out;
    }
    let mut conns = open_conns(run, run.params.connections, &mut out, "search").await;
    let Some(probe_conn) = conns.first_mut() else {
        return out;
    };
    let make_query = |i: usize| {
        let term = SEARCH_TERMS[i % SEARCH_TERMS.len()];
        Query {
            label: "search",
            filter: Filter {
                kinds: Some(vec![Kind(1)]),
                search: Some(term.to_string()),
                limit: Some(50),
                ..Filter::new()
            },
            must_include: vec![],
        }
    };
    // Probe: a relay without NIP-50 refuses the key (CLOSED/NOTICE, no EOSE)
    // or ignores it and answers the rest of the filter.
    let probe = make_query(0);
    let term = probe.filter.search.clone().unwrap_or_default();
    let sub = probe_conn.new_sub_id("s");
    let mut msg = Vec::new();
    nostrwire_event::message::write::req(&mut msg, &sub, std::slice::from_ref(&probe.filter));
    let verdict = probe_search(probe_conn, &msg, &sub, &term, run.target.timeout).await;
    if let Err(reason) = verdict {
        out.status = Status::Unsupported(reason);
        for c in conns {
            out.anomalies.merge(&c.close().await);
        }
        return out;
    }
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let make: Arc<dyn Fn(usize) -> Query + Send + Sync> = Arc::new(make_query);
    let part = run_queries(
        run,
        conns,
        make,
        run.params.queries,
        start + run.params.duration,
        None,
    )
    .await;
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.absorb(part);
    out.notes
        .push("every returned event must match the kind filter and contain the search term".into());
    out
}

/// Sends one search REQ; `Err(reason)` when the relay does not do NIP-50.
pub(super) async fn probe_search(
    conn: &mut Conn,
    req: &[u8],
    sub: &str,
    term: &str,
    timeout: Duration,
) -> Result<(), String> {
    conn.writer
        .send_text(req)
        .await
        .map_err(|e| format!("connection failed: {e}"))?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut events = 0;
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err("no EOSE for a search query within the timeout".into()),
            Err(e) => return Err(format!("connection failed: {e}")),
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Event {
                subscription_id,
                event,
            }) if subscription_id == sub => {
                events += 1;
                let content = event.content().value().to_lowercase();
                if !content.contains(term) {
                    return Err(
                        "relay ignores `search`: it returned events without the term".into(),
                    );
                }
            }
            Ok(RelayMessage::Eose(s)) if s == sub => break,
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => {
                return Err(format!("relay refused: CLOSED \"{message}\""))
            }
            Ok(RelayMessage::Notice(m)) => return Err(format!("relay refused: NOTICE \"{m}\"")),
            _ => {}
        }
    }
    let mut close = Vec::new();
    nostrwire_event::message::write::close(&mut close, sub);
    let _ = conn.writer.send_text(&close).await;
    if events == 0 {
        return Err("search for a seeded term returned nothing".into());
    }
    Ok(())
}
