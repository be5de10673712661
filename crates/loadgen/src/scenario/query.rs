//! Query scenarios: the seeded events, the six query classes, full dumps,
//! mixed and concurrent reading and writing.

use super::*;

/// What the seed phase stored, for building checked queries.
#[derive(Debug, Default)]
pub(super) struct Seeded {
    /// Accepted regular (non-replaceable) events: id lookups must find them.
    pub(super) regular_ids: Vec<EventId>,
    authors: Vec<PublicKey>,
    p_tags: Vec<String>,
}

/// Stores the run's seed events (closed loop, timed as `seed`).
pub(crate) async fn seed_events(run: &Run, out: &mut Outcome) {
    seed(run, out).await;
}

pub(super) async fn seed(run: &Run, out: &mut Outcome) -> Seeded {
    let conns = open_conns(run, run.params.connections, out, "seed").await;
    let deadline = Instant::now() + run.params.duration;
    let (part, accepted) =
        publish_closed(run, conns, run.seed_events.clone(), "seed", deadline).await;
    out.absorb(part);
    let accepted: HashSet<EventId> = accepted.into_iter().collect();
    let mut s = Seeded::default();
    let mut authors = HashSet::new();
    for p in run
        .seed_events
        .iter()
        .filter(|p| accepted.contains(&p.event.id))
    {
        // Relays that implement NIP-42 serve direct messages (4) and gift
        // wraps (1059) only to authenticated participants, and the tester
        // does not authenticate: id lookups that must find their event
        // target other kinds.
        if p.event.kind.class() == KindClass::Regular
            && !PRIVATE_KINDS.contains(&p.event.kind.as_u16())
        {
            s.regular_ids.push(p.event.id);
        }
        if authors.insert(p.event.pubkey) {
            s.authors.push(p.event.pubkey);
        }
        if s.p_tags.len() < MAX_P_TAG_QUERIES {
            s.p_tags.extend(first_p_tag(&p.event));
        }
    }
    s
}

/// The first `p` tag's key of an event, if it is one. `#p` queries take one
/// per seeded event, so they ask for pubkeys as often as events mention
/// them; taking every `p` tag in order let the first follow lists, with
/// hundreds each, supply all of them.
pub(super) fn first_p_tag(event: &nostrwire_event::Event) -> Option<String> {
    event
        .tags
        .iter()
        .filter(|t| t.name() == "p")
        .filter_map(|t| t.first_value())
        .find(|v| nostrwire_event::hex::decode_array::<32>(v.as_bytes()).is_ok())
        .map(str::to_string)
}

/// The query mix: the three nostr-bench filters, then author, tag and id lookups.
pub(super) fn query_for(i: usize, seeded: &Seeded) -> Query {
    let pick = |n: usize| i / 6 % n.max(1);
    let kinds = |k: &[u16]| Some(k.iter().map(|k| Kind(*k)).collect());
    match i % 6 {
        0 => Query {
            label: "query:kind1-limit100",
            filter: Filter {
                kinds: kinds(&[1]),
                limit: Some(100),
                ..Filter::new()
            },
            must_include: vec![],
        },
        1 => Query {
            label: "query:kind1,6-limit50",
            filter: Filter {
                kinds: kinds(&[1, 6]),
                limit: Some(50),
                ..Filter::new()
            },
            must_include: vec![],
        },
        2 => Query {
            label: "query:limit10",
            filter: Filter {
                limit: Some(10),
                ..Filter::new()
            },
            must_include: vec![],
        },
        3 if !seeded.authors.is_empty() => Query {
            label: "query:author",
            filter: Filter {
                authors: Some(vec![seeded.authors[pick(seeded.authors.len())]]),
                limit: Some(50),
                ..Filter::new()
            },
            must_include: vec![],
        },
        4 if !seeded.p_tags.is_empty() => Query {
            label: "query:p-tag",
            filter: Filter {
                tags: vec![TagCondition {
                    letter: b'p',
                    values: vec![seeded.p_tags[pick(seeded.p_tags.len())].clone()],
                }],
                limit: Some(20),
                ..Filter::new()
            },
            must_include: vec![],
        },
        5 if !seeded.regular_ids.is_empty() => {
            let id = seeded.regular_ids[pick(seeded.regular_ids.len())];
            Query {
                label: "query:id",
                filter: Filter {
                    ids: Some(vec![id]),
                    ..Filter::new()
                },
                must_include: vec![id],
            }
        }
        _ => Query {
            label: "query:limit10",
            filter: Filter {
                limit: Some(10),
                ..Filter::new()
            },
            must_include: vec![],
        },
    }
}

pub(super) async fn run_queries(
    run: &Run,
    conns: Vec<Conn>,
    make: Arc<dyn Fn(usize) -> Query + Send + Sync>,
    total: usize,
    deadline: Instant,
    stop: Option<watch::Receiver<bool>>,
) -> Part {
    let k = conns.len();
    let mut handles = Vec::new();
    for (w, mut conn) in conns.into_iter().enumerate() {
        let run = run.clone();
        let make = make.clone();
        let stop = stop.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            for i in share(total, k, w) {
                if Instant::now() >= deadline || stop.as_ref().is_some_and(|s| *s.borrow()) {
                    break;
                }
                let q = make(i);
                match conn.query(&q, run.target.timeout).await {
                    QueryOutcome::Ok { latency, received } => {
                        let op = part.op(q.label);
                        op.success(latency);
                        op.events_received += received.events;
                        op.bytes_received += received.bytes;
                        op.bytes_unescaped += received.unescaped;
                    }
                    QueryOutcome::Failed(f, received) => {
                        let lost = f == Failure::ConnectionLost;
                        let op = part.op(q.label);
                        op.fail(f);
                        op.events_received += received.events;
                        op.bytes_received += received.bytes;
                        op.bytes_unescaped += received.unescaped;
                        if lost {
                            break;
                        }
                    }
                }
                run.tick();
            }
            part.anomalies.merge(&conn.close().await);
            part
        }));
    }
    let mut total_part = Part::default();
    for h in handles {
        if let Ok(p) = h.await {
            total_part.merge(p);
        }
    }
    total_part
}

/// Seeds the relay, then runs `run.params.queries` queries built by `make`
/// (given the seeded set) on fresh connections, timed from the first query.
pub(super) async fn seeded_queries(
    run: &Run,
    conns_label: &str,
    make: impl Fn(Arc<Seeded>) -> Arc<dyn Fn(usize) -> Query + Send + Sync>,
) -> Outcome {
    let mut out = Outcome::new();
    let seeded = Arc::new(seed(run, &mut out).await);
    let conns = open_conns(run, run.params.connections, &mut out, conns_label).await;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let part = run_queries(
        run,
        conns,
        make(seeded.clone()),
        run.params.queries,
        start + run.params.duration,
        None,
    )
    .await;
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.absorb(part);
    out.metrics.insert(
        "seeded_regular_events".into(),
        seeded.regular_ids.len() as f64,
    );
    out
}

pub(super) async fn query(run: &Run) -> Outcome {
    let mut out = seeded_queries(run, "query", |seeded| {
        Arc::new(move |i| query_for(i, &seeded))
    })
    .await;
    out.notes.push(format!(
        "seed events stored first (not timed into the query figures); one returned event in {} is checked against its filter (all for id lookups), one checked event in {} also for id and signature",
        crate::client::CHECK_EVERY,
        crate::client::VERIFY_EVERY
    ));
    out
}

pub(super) async fn dump(run: &Run) -> Outcome {
    let mut out = seeded_queries(run, "dump", |_| {
        Arc::new(|_| Query {
            label: "query:limit1000",
            filter: Filter {
                limit: Some(DUMP_LIMIT),
                ..Filter::new()
            },
            must_include: vec![],
        })
    })
    .await;
    out.notes.push(format!(
        "seed events stored first (not timed); every REQ asks for the newest {DUMP_LIMIT} stored events of any kind"
    ));
    out
}

pub(super) async fn mixed(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let conns = open_conns(run, run.params.connections, &mut out, "publish").await;
    let shares = share_events(&run.events, conns.len());
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let mut handles = Vec::new();
    for (mut conn, mine) in conns.into_iter().zip(shares) {
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            let q = Query {
                label: "query",
                filter: Filter {
                    kinds: Some(vec![Kind(1)]),
                    limit: Some(10),
                    ..Filter::new()
                },
                must_include: vec![],
            };
            for (n, i) in mine.into_iter().enumerate() {
                if Instant::now() >= deadline {
                    break;
                }
                if n % 3 == 2 {
                    match conn.query(&q, run.target.timeout).await {
                        QueryOutcome::Ok { latency, received } => {
                            let op = part.op("query");
                            op.success(latency);
                            op.events_received += received.events;
                            op.bytes_received += received.bytes;
                            op.bytes_unescaped += received.unescaped;
                        }
                        QueryOutcome::Failed(f, _) => part.op("query").fail(f),
                    }
                } else {
                    let p = &run.events[i];
                    match conn.publish(p, run.target.timeout).await {
                        Ok(l) => part.op("publish").success(l),
                        Err(f) => part.op("publish").fail(f),
                    }
                }
                run.tick();
            }
            part.anomalies.merge(&conn.close().await);
            part
        }));
    }
    out.finish(handles, start, relay_cpu, run).await;
    out.notes.push(
        "each connection: two EVENTs (OK by id), then a REQ {kinds:[1],limit:10} to EOSE and CLOSE"
            .into(),
    );
    out
}

pub(super) async fn concurrent(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let n = run.params.connections.max(2);
    let writers = n / 2;
    let wconns = open_conns(run, writers, &mut out, "publish").await;
    let rconns = open_conns(run, n - writers, &mut out, "query").await;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let (stop_tx, stop_rx) = watch::channel(false);
    let seeded = Arc::new(Seeded {
        authors: crate::workload::unique_authors(&run.events),
        ..Seeded::default()
    });
    let s = seeded.clone();
    let make: Arc<dyn Fn(usize) -> Query + Send + Sync> =
        Arc::new(move |i| query_for(i / 4 * 6 + i % 4, &s));
    let r = run.clone();
    let readers = tokio::spawn(async move {
        run_queries(&r, rconns, make, usize::MAX, deadline, Some(stop_rx)).await
    });
    let (wpart, _) = publish_closed(run, wconns, run.events.clone(), "publish", deadline).await;
    let _ = stop_tx.send(true);
    out.absorb(wpart);
    if let Ok(p) = readers.await {
        out.absorb(p);
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.notes.push(format!(
        "{writers} writer and {} reader connections; readers rotate the nostr-bench filters and author lookups until the writers finish",
        n - writers
    ));
    out
}
