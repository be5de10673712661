//! Publishing scenarios: closed-loop and open-loop publishers, batches,
//! bursts; events shared among connections so that replaceable events of
//! one address keep their order.

use super::*;

/// What must leave one connection in order: the versions of one
/// replaceable or addressable event (author, kind and, for addressable
/// events, the `d` tag). A relay rightly refuses an older version that
/// arrives second, so two connections must never race them.
pub(super) fn ordered_key(p: &Prepared) -> Option<(PublicKey, u16, &str)> {
    let e = &p.event;
    match e.kind.class() {
        KindClass::Replaceable => Some((e.pubkey, e.kind.as_u16(), "")),
        KindClass::Addressable => {
            let d = e
                .tags
                .iter()
                .find(|t| t.name() == "d")
                .and_then(|t| t.as_slice().get(1))
                .map_or("", |v| v.as_str());
            Some((e.pubkey, e.kind.as_u16(), d))
        }
        _ => None,
    }
}

/// The indices of `events` that each of `k` workers sends, in order.
///
/// Each event goes to the worker with the fewest so far, except the later
/// versions of a replaceable or addressable event, which follow the first
/// to its worker ([`ordered_key`]). So every connection gets about as many
/// events: keyed by author alone, 100 authors put all replaceable events
/// (16% of the kind mix) on at most 100 of 1,000 connections, which went
/// on alone for the last fifth of a 500,000-event run.
///
/// One pass over the events, before any clock starts: a scan per worker
/// costs `k` passes, which with 1,000 connections and 500,000 events kept
/// both cores busy for the first seconds of the measured phase.
pub(super) fn share_events(events: &[Prepared], k: usize) -> Vec<Vec<usize>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let k = k.max(1);
    let mut shares: Vec<Vec<usize>> = (0..k)
        .map(|_| Vec::with_capacity(events.len() / k + 1))
        .collect();
    // (events so far, worker), smallest first; an entry is stale when its
    // worker has taken a keyed event since, and is then put back updated.
    let mut least: BinaryHeap<Reverse<(usize, usize)>> = (0..k).map(|w| Reverse((0, w))).collect();
    let mut owners: HashMap<(PublicKey, u16, &str), usize> = HashMap::new();
    let mut least_loaded = |shares: &[Vec<usize>]| loop {
        let Reverse((n, w)) = least.pop().expect("one entry per worker");
        if n == shares[w].len() {
            least.push(Reverse((n + 1, w)));
            return w;
        }
        least.push(Reverse((shares[w].len(), w)));
    };
    for (i, p) in events.iter().enumerate() {
        let w = match ordered_key(p) {
            Some(key) => match owners.get(&key) {
                Some(&w) => w,
                None => {
                    let w = least_loaded(&shares);
                    owners.insert(key, w);
                    w
                }
            },
            None => least_loaded(&shares),
        };
        shares[w].push(i);
    }
    shares
}

/// Closed-loop publishing of `events` over `conns`; returns accepted ids.
pub(super) async fn publish_closed(
    run: &Run,
    conns: Vec<Conn>,
    events: Arc<Vec<Prepared>>,
    label: &'static str,
    deadline: Instant,
) -> (Part, Vec<EventId>) {
    let shares = share_events(&events, conns.len());
    let mut handles = Vec::new();
    for (mut conn, mine) in conns.into_iter().zip(shares) {
        let events = events.clone();
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            let mut accepted = Vec::new();
            for i in mine {
                if Instant::now() >= deadline {
                    break;
                }
                let p = &events[i];
                match conn.publish(p, run.target.timeout).await {
                    Ok(lat) => {
                        part.op(label).success(lat);
                        accepted.push(p.event.id);
                    }
                    Err(f) => {
                        let lost = f == Failure::ConnectionLost;
                        part.op(label).fail(f);
                        if lost {
                            break;
                        }
                    }
                }
                run.tick();
            }
            part.anomalies.merge(&conn.close().await);
            (part, accepted)
        }));
    }
    let mut total = Part::default();
    let mut ids = Vec::new();
    for h in handles {
        if let Ok((p, a)) = h.await {
            total.merge(p);
            ids.extend(a);
        }
    }
    (total, ids)
}

pub(super) async fn publish(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let conns = open_conns(run, run.params.connections, &mut out, "publish").await;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let (part, _) = publish_closed(
        run,
        conns,
        run.events.clone(),
        "publish",
        start + run.params.duration,
    )
    .await;
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.absorb(part);
    out
}

/// Open loop: every event has an intended send time on a fixed schedule;
/// latency runs from that time, so a slow relay cannot slow the offered load
/// down and hide its own queueing (no coordinated omission).
pub(super) async fn publish_open(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let label = "publish";
    let conns = open_conns(run, run.params.connections, &mut out, label).await;
    let shares = share_events(&run.events, conns.len());
    let rate = run.params.rate.max(1.0);
    out.metrics.insert("offered_rate".into(), rate);
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let timeout = run.target.timeout;
    let mut handles = Vec::new();
    for (conn, indices) in conns.into_iter().zip(shares) {
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let Conn {
                mut reader,
                mut writer,
                mut anomalies,
                ..
            } = conn;
            let pending: Arc<Mutex<HashMap<EventId, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
            let (done_tx, mut done_rx) = watch::channel(false);
            let events = run.events.clone();
            let writer_pending = pending.clone();
            let send_task = tokio::spawn(async move {
                let mut sent = 0u64;
                let mut next = 0;
                while next < indices.len() {
                    let intended = start + Duration::from_secs_f64(indices[next] as f64 / rate);
                    if intended >= deadline {
                        break;
                    }
                    tokio::time::sleep_until(intended.into()).await;
                    // Everything already due goes out in one write.
                    let now = Instant::now();
                    {
                        let mut guard = writer_pending.lock().expect("pending lock");
                        while next < indices.len() {
                            let i = indices[next];
                            let t = start + Duration::from_secs_f64(i as f64 / rate);
                            if t > now || t >= deadline {
                                break;
                            }
                            guard.insert(events[i].event.id, t);
                            writer.queue_text(&events[i].message);
                            next += 1;
                            sent += 1;
                        }
                    }
                    if writer.flush().await.is_err() {
                        break;
                    }
                }
                let _ = done_tx.send(true);
                (writer, sent)
            });
            let mut part = Part::default();
            let mut timed_out: HashSet<EventId> = HashSet::new();
            let mut writer_done = false;
            let mut last_sweep = Instant::now();
            let mut lost = false;
            loop {
                if writer_done && pending.lock().expect("pending lock").is_empty() {
                    break;
                }
                let wake = tokio::time::Instant::now() + Duration::from_millis(50);
                tokio::select! {
                    r = timeout_at(wake, reader.next()) => {
                        match r {
                            Err(_) => {}
                            Ok(Err(_)) => { lost = true; break; }
                            Ok(Ok(Admitted::Text(t))) => match RelayMessage::parse(t) {
                                Ok(RelayMessage::Ok { event_id, accepted, message }) => {
                                    let sent_at = pending.lock().expect("pending lock").remove(&event_id);
                                    match sent_at {
                                        Some(t0) => {
                                            if accepted {
                                                part.op(label).success(t0.elapsed());
                                            } else {
                                                let f = Failure::Rejected(message_prefix(&message));
                                                anomalies.sample(f.key(), &message);
                                                part.op(label).fail(f);
                                            }
                                            run.tick();
                                        }
                                        None if timed_out.remove(&event_id) => anomalies.add("late_ok"),
                                        None => anomalies.add("unmatched_ok"),
                                    }
                                }
                                Ok(other) => anomalies.unsolicited(&other),
                                Err(_) => anomalies.add("unparseable_message"),
                            },
                            Ok(Ok(Admitted::Close(_))) => { lost = true; break; }
                            Ok(Ok(_)) => {}
                        }
                    }
                    _ = done_rx.changed(), if !writer_done => { writer_done = *done_rx.borrow(); }
                }
                if last_sweep.elapsed() >= Duration::from_millis(50) {
                    last_sweep = Instant::now();
                    let now = Instant::now();
                    let mut guard = pending.lock().expect("pending lock");
                    let expired: Vec<EventId> = guard
                        .iter()
                        .filter(|(_, t)| now.duration_since(**t) >= timeout)
                        .map(|(id, _)| *id)
                        .collect();
                    for id in expired {
                        guard.remove(&id);
                        timed_out.insert(id);
                        part.op(label).fail(Failure::Timeout);
                        run.tick();
                    }
                }
            }
            if lost {
                send_task.abort();
                let n = pending.lock().expect("pending lock").len();
                for _ in 0..n {
                    part.op(label).fail(Failure::ConnectionLost);
                }
            } else if let Ok((mut writer, _)) = send_task.await {
                let _ = writer.close().await;
            }
            part.anomalies = anomalies;
            part
        }));
    }
    out.finish(handles, start, relay_cpu, run).await;
    out
}

/// Sends `batch` pipelined in one write, then collects every OK by id.
pub(super) async fn publish_batch(
    conn: &mut Conn,
    batch: &[&Prepared],
    timeout: Duration,
    part: &mut Part,
    label: &str,
) -> bool {
    let start = Instant::now();
    let mut waiting: HashSet<EventId> = HashSet::with_capacity(batch.len());
    for p in batch {
        conn.writer.queue_text(&p.message);
        waiting.insert(p.event.id);
    }
    if conn.writer.flush().await.is_err() {
        for _ in batch {
            part.op(label).fail(Failure::ConnectionLost);
        }
        return false;
    }
    let deadline = tokio::time::Instant::from_std(start + timeout);
    while !waiting.is_empty() {
        let incoming = match timeout_at(deadline, conn.reader.next()).await {
            Err(_) => {
                for _ in 0..waiting.len() {
                    part.op(label).fail(Failure::Timeout);
                }
                return true;
            }
            Ok(Err(_)) | Ok(Ok(Admitted::Close(_))) => {
                for _ in 0..waiting.len() {
                    part.op(label).fail(Failure::ConnectionLost);
                }
                return false;
            }
            Ok(Ok(i)) => i,
        };
        match incoming {
            Admitted::Text(t) => match RelayMessage::parse(t) {
                Ok(RelayMessage::Ok {
                    event_id,
                    accepted,
                    message,
                }) if waiting.remove(&event_id) => {
                    if accepted {
                        part.op(label).success(start.elapsed());
                    } else {
                        part.op(label)
                            .fail(Failure::Rejected(message_prefix(&message)));
                        conn.anomalies
                            .sample(Failure::Rejected(message_prefix(&message)).key(), &message);
                    }
                }
                Ok(other) => conn.anomalies.unsolicited(&other),
                Err(_) => conn.anomalies.add("unparseable_message"),
            },
            Admitted::Ping(p) => {
                conn.writer.queue_control(opcode::PONG, p);
                let _ = conn.writer.flush().await;
            }
            _ => {}
        }
    }
    true
}

pub(super) async fn burst(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let label = "publish";
    let conns = open_conns(run, run.params.connections, &mut out, label).await;
    let shares = share_events(&run.events, conns.len());
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let mut handles = Vec::new();
    for (mut conn, mine) in conns.into_iter().zip(shares) {
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            for chunk in mine.chunks(run.params.burst_size.max(1)) {
                if Instant::now() >= deadline {
                    break;
                }
                let batch: Vec<&Prepared> = chunk.iter().map(|i| &run.events[*i]).collect();
                let alive =
                    publish_batch(&mut conn, &batch, run.target.timeout, &mut part, label).await;
                run.progress
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                if !alive {
                    break;
                }
                tokio::time::sleep(run.params.burst_gap).await;
            }
            part.anomalies.merge(&conn.close().await);
            part
        }));
    }
    out.finish(handles, start, relay_cpu, run).await;
    out.notes.push(format!(
        "bursts of {} events per connection, {} ms apart; latency from the burst's write to each OK",
        run.params.burst_size,
        run.params.burst_gap.as_millis()
    ));
    out
}
