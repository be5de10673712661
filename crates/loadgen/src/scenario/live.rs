//! Live delivery and connection scenarios: fan-out to many subscribers,
//! large events, connection churn.

use super::*;

/// Publishes at a steady rate to M live subscribers and times each delivery.
pub(super) async fn fanout(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let marker = match run.events.first().and_then(|p| {
        p.event
            .tags
            .iter()
            .rev()
            .find(|t| t.name() == "t")
            .and_then(|t| t.first_value().map(str::to_string))
    }) {
        Some(m) => m,
        None => {
            out.status = Status::Unsupported("fanout events carry no marker tag".into());
            return out;
        }
    };
    let filter = Filter {
        tags: vec![TagCondition {
            letter: b't',
            values: vec![marker],
        }],
        ..Filter::new()
    };
    let mut subs = open_conns(run, run.params.subscribers, &mut out, "delivery").await;
    let mut pubs = open_conns(run, 1, &mut out, "publish").await;
    let Some(mut publisher) = pubs.pop() else {
        return out;
    };
    // Subscribe everyone and wait for every EOSE before publishing.
    let mut ready = Vec::new();
    for mut c in subs.drain(..) {
        let sub = c.new_sub_id("f");
        let mut msg = Vec::new();
        nostrwire_event::message::write::req(&mut msg, &sub, std::slice::from_ref(&filter));
        let t_req = Instant::now();
        if c.writer.send_text(&msg).await.is_err() {
            out.op("subscribe").fail(Failure::ConnectionLost);
            continue;
        }
        ready.push((c, sub, t_req));
    }
    let sent: Arc<Mutex<HashMap<EventId, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let (done_tx, done_rx) = watch::channel(None::<Arc<HashSet<EventId>>>);
    let timeout = run.target.timeout;
    let (eose_tx, mut eose_rx) = tokio::sync::mpsc::channel::<bool>(ready.len().max(1));
    let n_subs = ready.len();
    let mut handles = Vec::new();
    for (mut conn, sub, t_req) in ready {
        let sent = sent.clone();
        let mut done_rx = done_rx.clone();
        let filter = filter.clone();
        let eose_tx = eose_tx.clone();
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            let mut got: HashSet<EventId> = HashSet::new();
            let mut eose_seen = false;
            let sub_deadline = tokio::time::Instant::now() + timeout;
            let mut final_deadline: Option<tokio::time::Instant> = None;
            loop {
                if let Some(expected) = done_rx.borrow().clone() {
                    if final_deadline.is_none() {
                        final_deadline = Some(tokio::time::Instant::now() + timeout);
                    }
                    if expected.iter().all(|id| got.contains(id)) {
                        break;
                    }
                }
                let wake = final_deadline.unwrap_or_else(|| {
                    if eose_seen {
                        tokio::time::Instant::now() + Duration::from_secs(3600)
                    } else {
                        sub_deadline
                    }
                });
                tokio::select! {
                    r = timeout_at(wake, conn.reader.next()) => match r {
                        Err(_) if !eose_seen => {
                            part.op("subscribe").fail(Failure::Timeout);
                            let _ = eose_tx.send(false).await;
                            return (part, got, false);
                        }
                        Err(_) => break,
                        Ok(Err(_)) | Ok(Ok(Admitted::Close(_))) => {
                            if !eose_seen { let _ = eose_tx.send(false).await; }
                            break;
                        }
                        Ok(Ok(Admitted::Text(t))) => {
                            let now = Instant::now();
                            match RelayMessage::parse(t) {
                                Ok(RelayMessage::Event { subscription_id, event }) if subscription_id == sub => {
                                    if !filter.matches(&event) {
                                        part.op("delivery").fail(Failure::WrongResult);
                                    } else if got.insert(*event.id()) {
                                        let t0 = sent.lock().expect("sent lock").get(event.id()).copied();
                                        match t0 {
                                            Some(t0) => { part.op("delivery").success(now.duration_since(t0)); run.tick(); }
                                            None => conn.anomalies.add("unexpected_delivery"),
                                        }
                                    }
                                }
                                Ok(RelayMessage::Eose(s)) if s == sub => {
                                    eose_seen = true;
                                    part.op("subscribe").success(t_req.elapsed());
                                    let _ = eose_tx.send(true).await;
                                }
                                Ok(RelayMessage::Closed { subscription_id, message }) if subscription_id == sub => {
                                    let f = Failure::Closed(message_prefix(&message));
                                    conn.anomalies.sample(f.key(), &message);
                                    part.op("subscribe").fail(f);
                                    if !eose_seen { let _ = eose_tx.send(false).await; }
                                    return (part, got, false);
                                }
                                Ok(other) => conn.anomalies.unsolicited(&other),
                                Err(_) => conn.anomalies.add("unparseable_message"),
                            }
                        }
                        Ok(Ok(Admitted::Ping(p))) => {
                            conn.writer.queue_control(opcode::PONG, p);
                            let _ = conn.writer.flush().await;
                        }
                        Ok(Ok(_)) => {}
                    },
                    _ = done_rx.changed() => {}
                }
            }
            part.anomalies.merge(&conn.close().await);
            (part, got, true)
        }));
    }
    drop(eose_tx);
    let mut subscribed = 0;
    for _ in 0..n_subs {
        match eose_rx.recv().await {
            Some(ok) => subscribed += usize::from(ok),
            None => break,
        }
    }
    out.metrics.insert("subscribers".into(), subscribed as f64);
    let rate = run.params.rate.max(1.0);
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let mut accepted = HashSet::new();
    let mut part = Part::default();
    for (i, p) in run.events.iter().enumerate() {
        let intended = start + Duration::from_secs_f64(i as f64 / rate);
        if intended >= deadline {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        sent.lock()
            .expect("sent lock")
            .insert(p.event.id, Instant::now());
        match publisher.publish(p, timeout).await {
            Ok(l) => {
                part.op("publish").success(l);
                accepted.insert(p.event.id);
            }
            Err(f) => part.op("publish").fail(f),
        }
        run.tick();
    }
    part.anomalies.merge(&publisher.close().await);
    out.absorb(part);
    let accepted = Arc::new(accepted);
    let _ = done_tx.send(Some(accepted.clone()));
    for h in handles {
        if let Ok((p, got, subscribed)) = h.await {
            out.absorb(p);
            if subscribed {
                let missed = accepted.iter().filter(|id| !got.contains(id)).count();
                for _ in 0..missed {
                    out.op("delivery").fail(Failure::MissedDelivery);
                }
            }
        }
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.notes.push(format!(
        "{subscribed} of {n_subs} subscribers live; one publisher at {rate}/s; delivery latency from the EVENT write to receipt"
    ));
    out
}

pub(super) async fn large(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let conns = open_conns(run, run.params.connections, &mut out, "publish").await;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let (part, accepted) =
        publish_closed(run, conns, run.events.clone(), "publish", deadline).await;
    out.absorb(part);
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    // Read back the newest accepted follow list of each author.
    let accepted: HashSet<EventId> = accepted.into_iter().collect();
    let mut newest: HashMap<PublicKey, &Prepared> = HashMap::new();
    for p in run.events.iter().filter(|p| accepted.contains(&p.event.id)) {
        let e = newest.entry(p.event.pubkey).or_insert(p);
        if p.event.created_at >= e.event.created_at {
            *e = p;
        }
    }
    let queries: Arc<Vec<Query>> = Arc::new(
        newest
            .values()
            .map(|p| Query {
                label: "read-back",
                filter: Filter {
                    authors: Some(vec![p.event.pubkey]),
                    kinds: Some(vec![Kind(3)]),
                    ..Filter::new()
                },
                must_include: vec![p.event.id],
            })
            .collect(),
    );
    let n = queries.len();
    let conns = open_conns(
        run,
        run.params.connections.min(n.max(1)),
        &mut out,
        "read-back",
    )
    .await;
    let q = queries.clone();
    let make: Arc<dyn Fn(usize) -> Query + Send + Sync> = Arc::new(move |i| q[i].clone());
    let read_start = Instant::now();
    let read_deadline = read_start + run.params.duration;
    let part = run_queries(run, conns, make, n, read_deadline, None).await;
    out.absorb(part);
    out.metrics
        .insert("read_back_s".into(), read_start.elapsed().as_secs_f64());
    out.notes
        .push("throughput is over the publish phase; read-back latencies are per query".into());
    let bytes: usize = run.events.iter().map(|p| p.message.len()).sum();
    let tags: usize = run.events.iter().map(|p| p.event.tags.len()).sum();
    if !run.events.is_empty() {
        out.metrics.insert(
            "mean_event_bytes".into(),
            bytes as f64 / run.events.len() as f64,
        );
        out.metrics
            .insert("mean_tags".into(), tags as f64 / run.events.len() as f64);
    }
    out
}

/// Finds the process listening on `port` (Linux, same user) and its resident memory in KiB.
pub fn relay_rss_kib(port: u16) -> Option<u64> {
    let pid = crate::host::listening_pid(port)?;
    crate::host::rss_kib(pid)
}

pub(super) async fn connections(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    crate::host::raise_fd_limit();
    let port = run.target.url.port;
    let before = relay_rss_kib(port);
    let n = run.params.idle_connections;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let sem = Arc::new(Semaphore::new(64));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let sem = sem.clone();
        let target = run.target.clone();
        let seed = run.params.seed ^ i as u64;
        let progress = run.progress.clone();
        handles.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore never closed");
            if Instant::now() >= deadline {
                return None;
            }
            let t0 = Instant::now();
            let r = Conn::open(&target, seed).await;
            progress.fetch_add(1, Ordering::Relaxed);
            Some(r.map(|c| (c, t0.elapsed())))
        }));
    }
    let mut conns = Vec::new();
    for h in handles {
        match h.await {
            Ok(Some(Ok((c, lat)))) => {
                out.op("connect").success(lat);
                conns.push(c);
            }
            Ok(Some(Err(e))) => out.op("connect").fail(match e {
                Error::Handshake(ref m) if m == "timed out" => Failure::Timeout,
                _ => Failure::ConnectFailed,
            }),
            _ => {}
        }
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    // Let the relay settle, then read its memory with every connection open.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = relay_rss_kib(port);
    let open = conns.len();
    for c in conns {
        out.anomalies.merge(&c.close().await);
    }
    out.metrics.insert("open_connections".into(), open as f64);
    match (before, during) {
        (Some(b), Some(d)) => {
            out.metrics.insert("relay_rss_before_kib".into(), b as f64);
            out.metrics.insert("relay_rss_open_kib".into(), d as f64);
            if open > 0 {
                out.metrics.insert(
                    "relay_kib_per_connection".into(),
                    (d as f64 - b as f64) / open as f64,
                );
            }
        }
        _ => out.notes.push(
            "relay memory not read: no process of this user listens on the relay's port".into(),
        ),
    }
    out
}
