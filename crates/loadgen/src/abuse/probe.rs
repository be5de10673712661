//! The probe beside an attack: a live subscriber timing deliveries, a
//! connection timed once a second, the read-back of acknowledged events,
//! and the drain that counts what attack connections receive.

use super::*;

/// Subscribes on `conn` to a tag nothing else carries, publishes one event
/// with it on another connection and waits for it to arrive live. An event
/// the relay refuses proves nothing either way and counts as delivered.
pub(super) async fn delivers_live(target: &Target, conn: &mut Conn) -> bool {
    let mut rng = run_rng(0xa11e);
    let tag = format!("nostrwire-alive-{:016x}", rng.next_u64());
    let filter = Filter {
        tags: vec![TagCondition {
            letter: b't',
            values: vec![tag.clone()],
        }],
        ..Filter::new()
    };
    let Ok((sub, _)) = subscribe(conn, &filter, target.timeout).await else {
        return false;
    };
    let keys = fresh_keys(&mut rng);
    let ev = UnsignedEvent::new(
        &keys,
        Timestamp::now(),
        Kind(1),
        vec![Tag::from_strs(&["t", &tag])],
        "still delivering?",
    )
    .sign(&keys);
    let Ok(mut publisher) = Conn::open(target, rng.next_u64()).await else {
        return false;
    };
    let ok = publish_one(&mut publisher, &ev, target.timeout).await;
    publisher.close().await;
    match ok {
        Ok((true, _)) => {}
        Ok((false, _)) => return true,
        Err(_) => return false,
    }
    let deadline = tokio::time::Instant::now() + target.timeout;
    loop {
        let Ok(Some(t)) = conn.reader.next_text_before(deadline).await else {
            return false;
        };
        if let Ok(RelayMessage::Event {
            subscription_id,
            event,
        }) = RelayMessage::parse(t)
        {
            if subscription_id == sub && *event.id() == ev.id {
                return true;
            }
        }
    }
}

/// Reads back the acknowledged ids on a new connection; how many are missing.
pub(super) async fn read_back(target: &Target, ids: &[EventId]) -> Result<usize, String> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut conn = Conn::open(target, 0x4eadbac)
        .await
        .map_err(|e| e.to_string())?;
    let mut missing = 0;
    for chunk in ids.chunks(READ_BACK_CHUNK) {
        let filter = Filter {
            ids: Some(chunk.to_vec()),
            ..Filter::new()
        };
        let got = fetch_ids(&mut conn, &filter, target.timeout).await?;
        missing += chunk.iter().filter(|id| !got.contains(id)).count();
    }
    conn.close().await;
    Ok(missing)
}

/// Sends one REQ and collects the ids returned before EOSE, then CLOSEs.
pub(super) async fn fetch_ids(
    conn: &mut Conn,
    filter: &Filter,
    timeout: Duration,
) -> Result<HashSet<EventId>, String> {
    let sub = conn.new_sub_id("rb");
    let mut msg = Vec::new();
    write::req(&mut msg, &sub, std::slice::from_ref(filter));
    conn.writer
        .send_text(&msg)
        .await
        .map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut got = HashSet::new();
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err("no EOSE within the timeout".into()),
            Err(e) => return Err(e.to_string()),
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Event {
                subscription_id,
                event,
            }) if subscription_id == sub => {
                got.insert(*event.id());
            }
            Ok(RelayMessage::Eose(s)) if s == sub => break,
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => return Err(format!("CLOSED \"{message}\"")),
            _ => {}
        }
    }
    msg.clear();
    write::close(&mut msg, &sub);
    let _ = conn.writer.send_text(&msg).await;
    Ok(got)
}

/// Subscribes to the probe's marker and waits for EOSE.
pub(super) async fn subscribe(
    conn: &mut Conn,
    filter: &Filter,
    timeout: Duration,
) -> Result<(String, Duration), Failure> {
    let sub = conn.new_sub_id("live");
    let mut msg = Vec::new();
    write::req(&mut msg, &sub, std::slice::from_ref(filter));
    let t0 = Instant::now();
    conn.writer
        .send_text(&msg)
        .await
        .map_err(|_| Failure::ConnectionLost)?;
    let deadline = tokio::time::Instant::from_std(t0 + timeout);
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err(Failure::Timeout),
            Err(e) => return Err(e.as_failure()),
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Eose(s)) if s == sub => return Ok((sub, t0.elapsed())),
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => return Err(Failure::Closed(message_prefix(&message))),
            Ok(other) => conn.anomalies.unsolicited(&other),
            Err(_) => conn.anomalies.add("unparseable_message"),
        }
    }
}

/// The live subscriber: times each probe event from its EVENT write to its
/// arrival; after the attack, every acknowledged event it has not received
/// within the timeout is a missed delivery.
pub(super) async fn live_subscriber(
    mut conn: Conn,
    sub: String,
    filter: Filter,
    sent: Arc<Mutex<HashMap<EventId, Instant>>>,
    mut done: watch::Receiver<Option<Arc<HashSet<EventId>>>>,
    timeout: Duration,
) -> (OpStats, Anomalies) {
    let mut stats = OpStats::new();
    let mut got: HashSet<EventId> = HashSet::new();
    let mut final_deadline: Option<tokio::time::Instant> = None;
    let mut open = true;
    while open {
        if let Some(expected) = done.borrow().clone() {
            if final_deadline.is_none() {
                final_deadline = Some(tokio::time::Instant::now() + timeout);
            }
            if expected.iter().all(|id| got.contains(id)) {
                break;
            }
        }
        let wake = final_deadline
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            r = timeout_at(wake, conn.reader.next()) => match r {
                Err(_) => break,
                Ok(Err(_)) | Ok(Ok(Admitted::Close(_))) => open = false,
                Ok(Ok(Admitted::Text(t))) => {
                    let now = Instant::now();
                    match RelayMessage::parse(t) {
                        Ok(RelayMessage::Event { subscription_id, event }) if subscription_id == sub => {
                            if !filter.matches(&event) {
                                stats.fail(Failure::WrongResult);
                            } else if got.insert(*event.id()) {
                                let t0 = sent.lock().expect("sent lock").get(event.id()).copied();
                                match t0 {
                                    Some(t0) => stats.success(now.duration_since(t0)),
                                    None => conn.anomalies.add("unexpected_delivery"),
                                }
                            }
                        }
                        Ok(RelayMessage::Closed { subscription_id, message }) if subscription_id == sub => {
                            conn.anomalies.sample(Failure::Closed(message_prefix(&message)).key(), &message);
                            open = false;
                        }
                        Ok(other) => conn.anomalies.unsolicited(&other),
                        Err(_) => conn.anomalies.add("unparseable_message"),
                    }
                }
                Ok(Ok(_)) => {}
            },
            r = done.changed() => if r.is_err() { break },
        }
    }
    let expected = match done.wait_for(|d| d.is_some()).await {
        Ok(d) => d.clone(),
        Err(_) => None,
    };
    if let Some(expected) = expected {
        for _ in expected.iter().filter(|id| !got.contains(id)) {
            stats.fail(Failure::MissedDelivery);
        }
    }
    let anomalies = if open {
        conn.close().await
    } else {
        conn.anomalies
    };
    (stats, anomalies)
}

/// Opens and times a new connection every second until the attack ends.
pub(super) async fn connect_probe(target: Target, mut stop: watch::Receiver<bool>) -> OpStats {
    let mut stats = OpStats::new();
    let mut i = 0u64;
    tokio::select! {
        _ = tokio::time::sleep(CONNECT_EVERY / 2) => {}
        _ = stop.wait_for(|s| *s) => return stats,
    }
    loop {
        let t0 = Instant::now();
        match Conn::open(&target, 0xc0 + i).await {
            Ok(c) => {
                stats.success(t0.elapsed());
                c.close().await;
            }
            Err(Error::Handshake(m)) if m == "timed out" => stats.fail(Failure::Timeout),
            Err(_) => stats.fail(Failure::ConnectFailed),
        }
        i += 1;
        tokio::select! {
            _ = tokio::time::sleep(CONNECT_EVERY.saturating_sub(t0.elapsed())) => {}
            _ = stop.wait_for(|s| *s) => return stats,
        }
    }
}

/// Waits for the attack's reading connections (`drains`) and records what
/// the relay answered `what` with, and how long EOSE took.
pub(super) async fn answered(
    f: &mut Found,
    what: &str,
    drains: Vec<tokio::task::JoinHandle<Tally>>,
) {
    let mut tally = Tally::default();
    for d in drains {
        if let Ok(t) = d.await {
            tally.merge(t);
        }
    }
    f.op("attack:eose").merge(&tally.eose);
    f.notes
        .push(format!("relay answered {what} with: {}", tally.describe()));
}

/// What the relay answered on an attacking connection that reads.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) counts: BTreeMap<String, u64>,
    pub(super) samples: BTreeMap<String, String>,
    /// REQ → EOSE latency of the attacking subscriptions.
    pub(super) eose: OpStats,
    /// The relay closed the connection.
    pub(super) dropped: bool,
}

impl Tally {
    pub(super) fn add(&mut self, key: String, sample: Option<&str>) {
        if let Some(s) = sample {
            self.samples
                .entry(key.clone())
                .or_insert_with(|| s.chars().take(120).collect());
        }
        *self.counts.entry(key).or_default() += 1;
    }

    pub(super) fn merge(&mut self, other: Tally) {
        for (k, v) in other.counts {
            *self.counts.entry(k).or_default() += v;
        }
        for (k, v) in other.samples {
            self.samples.entry(k).or_insert(v);
        }
        self.eose.merge(&other.eose);
        self.dropped |= other.dropped;
    }

    pub(super) fn describe(&self) -> String {
        if self.counts.is_empty() {
            return "nothing".into();
        }
        self.counts
            .iter()
            .map(|(k, v)| match self.samples.get(k) {
                Some(s) => format!("{k} {v} (\"{s}\")"),
                None => format!("{k} {v}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Sent subscription ids and when, for EOSE latencies.
pub(super) type SentSubs = Arc<Mutex<HashMap<String, Instant>>>;

/// Reads and counts the relay's answers until the attack ends or the relay
/// closes the connection.
pub(super) async fn drain(
    mut reader: WsReader,
    sent: SentSubs,
    mut stop: watch::Receiver<bool>,
) -> Tally {
    let mut t = Tally::default();
    loop {
        if *stop.borrow() {
            break;
        }
        let incoming = tokio::select! {
            r = reader.next() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        let text = match incoming {
            Err(_) | Ok(Admitted::Close(_)) => {
                t.dropped = true;
                break;
            }
            Ok(Admitted::Text(x)) => x,
            Ok(_) => continue,
        };
        match RelayMessage::parse(text) {
            Ok(RelayMessage::Eose(s)) => {
                if let Some(t0) = sent.lock().expect("sent lock").get(s.as_ref()) {
                    t.eose.success(t0.elapsed());
                }
                t.add("eose".into(), None);
            }
            Ok(RelayMessage::Closed { message, .. }) => t.add(
                format!("closed:{}", message_prefix(&message)),
                Some(&message),
            ),
            Ok(RelayMessage::Notice(m)) => t.add("notice".into(), Some(&m)),
            Ok(RelayMessage::Ok {
                accepted, message, ..
            }) => {
                if accepted {
                    t.add("ok_true".into(), None);
                } else {
                    t.add(
                        format!("ok_false:{}", message_prefix(&message)),
                        Some(&message),
                    );
                }
            }
            Ok(RelayMessage::Auth(_)) => t.add("auth_challenge".into(), None),
            Ok(RelayMessage::Event { .. }) => t.add("event".into(), None),
            Ok(_) => t.add("other".into(), None),
            Err(_) => t.add("unparseable".into(), None),
        }
    }
    t
}
