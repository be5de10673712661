//! Attacks on the protocol's rules: AUTH floods and relayed AUTH
//! (NIP-42), and undoing a deletion (NIP-09).

use super::*;

/// Gets the relay's AUTH challenge (NIP-42) on a new connection. A relay
/// may send it on connect or only together with its first `auth-required:`
/// answer, so a REQ for the kinds NIP-42 relays withhold from anonymous
/// readers (4, 1059) is sent at once to draw it out; that subscription is
/// closed again (unless the relay closed it) before the challenge is used.
pub(super) async fn challenge(conn: &mut Conn, wait: Duration) -> Option<String> {
    let sub = conn.new_sub_id("auth-probe");
    let mut msg = Vec::new();
    let filter = Filter {
        kinds: Some(vec![Kind(4), Kind(1059)]),
        limit: Some(1),
        ..Filter::new()
    };
    write::req(&mut msg, &sub, &[filter]);
    conn.send_message(&msg).await.ok()?;
    let deadline = tokio::time::Instant::now() + wait;
    let mut found = None;
    // `Some(true)`: the relay closed the probe itself; `Some(false)`: EOSE.
    let mut answered: Option<bool> = None;
    while found.is_none() || answered.is_none() {
        let Ok(Some(t)) = conn.reader.next_text_before(deadline).await else {
            break;
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Auth(c)) => found = Some(c.into_owned()),
            Ok(RelayMessage::Eose(s)) if s == sub => answered = Some(false),
            Ok(RelayMessage::Closed {
                subscription_id, ..
            }) if subscription_id == sub => answered = Some(true),
            _ => {}
        }
    }
    if answered != Some(true) {
        msg.clear();
        write::close(&mut msg, &sub);
        let _ = conn.send_message(&msg).await;
    }
    found
}

/// Fresh keys for attackers and victims, different on every run.
pub(super) fn fresh_keys(rng: &mut Rng) -> Keys {
    loop {
        let mut secret = [0u8; 32];
        for chunk in secret.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        if let Some(k) = Keys::from_secret_bytes(secret) {
            return k;
        }
    }
}

/// A random generator that differs between runs (new keys and events each time).
pub(super) fn run_rng(seed: u64) -> Rng {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    Rng::new(seed ^ nanos)
}

pub(super) fn auth_event(keys: &Keys, challenge: &str, relay: &str) -> nostrwire_event::Event {
    UnsignedEvent::new(
        keys,
        Timestamp::now(),
        Kind(22242),
        vec![
            Tag::from_strs(&["relay", relay]),
            Tag::from_strs(&["challenge", challenge]),
        ],
        "",
    )
    .sign(keys)
}

/// The URL an AUTH event should name for this relay.
pub(super) fn own_url(url: &WsUrl) -> String {
    format!("ws://{}:{}{}", url.host, url.port, url.path)
}

/// `auths` AUTH events with fresh keys on one connection, then as many
/// small REQs for restricted kinds; returns a note.
pub(super) async fn auth_flood(
    ctx: &Ctx,
    p: &AbuseParams,
    rng: &mut Rng,
    sent: &SentSubs,
) -> String {
    let Ok(mut conn) = ctx.open(99).await else {
        return "AUTH part: connection failed".into();
    };
    let wait = ctx.target().timeout.min(Duration::from_secs(2));
    let Some(ch) = challenge(&mut conn, wait).await else {
        conn.close().await;
        return "AUTH part n/a: no AUTH challenge".into();
    };
    let url = own_url(&ctx.target().url);
    let mut rng = Rng::new(rng.next_u64() ^ run_rng(0).next_u64());
    let mut msg = Vec::new();
    for _ in 0..p.auths {
        let keys = fresh_keys(&mut rng);
        msg.clear();
        write::client_auth(&mut msg, &auth_event(&keys, &ch, &url));
        conn.writer.queue_text(&msg);
    }
    for r in 0..p.auths {
        msg.clear();
        let sub = format!("small{r}");
        let filter = Filter {
            kinds: Some(vec![Kind(4), Kind(1059)]),
            limit: Some(1),
            ..Filter::new()
        };
        write::req(&mut msg, &sub, &[filter]);
        sent.lock().expect("sent lock").insert(sub, Instant::now());
        conn.writer.queue_text(&msg);
    }
    let queued = conn.writer.queued();
    let _ = conn.writer.flush().await;
    let Conn {
        reader, mut writer, ..
    } = conn;
    let t = drain(reader, sent.clone(), ctx.stop.clone()).await;
    let _ = writer.close().await;
    format!(
        "{} AUTHs with fresh keys then {} small REQs for kinds 4/1059 ({} KiB) on one connection; answers: {}",
        p.auths,
        p.auths,
        queued >> 10,
        t.describe()
    )
}

/// Publishes one event and waits for its `OK`: `(accepted, message)`.
pub(super) async fn publish_one(
    conn: &mut Conn,
    event: &nostrwire_event::Event,
    timeout: Duration,
) -> Result<(bool, String), String> {
    let mut msg = Vec::new();
    write::client_event(&mut msg, event);
    conn.writer
        .send_text(&msg)
        .await
        .map_err(|e| e.to_string())?;
    wait_ok(conn, event.id(), timeout).await
}

pub(super) async fn wait_ok(
    conn: &mut Conn,
    id: &EventId,
    timeout: Duration,
) -> Result<(bool, String), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err("no OK within the timeout".into()),
            Err(e) => return Err(e.to_string()),
        };
        if let Ok(RelayMessage::Ok {
            event_id,
            accepted,
            message,
        }) = RelayMessage::parse(t)
        {
            if event_id == *id {
                return Ok((accepted, message.into_owned()));
            }
        }
    }
}

/// Whether a lookup by id returns the event.
pub(super) async fn served(target: &Target, id: EventId) -> Result<bool, String> {
    let mut conn = Conn::open(target, 0x5e4fed)
        .await
        .map_err(|e| e.to_string())?;
    let filter = Filter {
        ids: Some(vec![id]),
        ..Filter::new()
    };
    let got = fetch_ids(&mut conn, &filter, target.timeout).await?;
    conn.close().await;
    Ok(got.contains(&id))
}

pub(super) fn fmt_ok(r: &(bool, String)) -> String {
    format!("OK {} \"{}\"", r.0, r.1)
}

/// Victim publishes E and deletes it; an attacker publishes its own
/// deletion of E (and of the victim's deletion); then E is sent again.
/// E must not be served again.
pub(super) async fn deletion_undo(ctx: Ctx) -> Found {
    let mut f = Found::default();
    let target = ctx.target().clone();
    let timeout = target.timeout;
    let mut rng = run_rng(ctx.seed);
    let victim = fresh_keys(&mut rng);
    let attacker = fresh_keys(&mut rng);
    let now = Timestamp::now().as_u64();
    let at = |s: u64| Timestamp::new(now - s).unwrap_or_else(|_| Timestamp::now());
    let e = UnsignedEvent::new(
        &victim,
        at(3),
        Kind(1),
        vec![],
        format!("deletion-undo victim {}", rng.next_u64()),
    )
    .sign(&victim);
    let e_hex = e.id.to_hex();
    let deletion = |keys: &Keys, s: u64, id: &str| {
        UnsignedEvent::new(
            keys,
            at(s),
            Kind(5),
            vec![Tag::from_strs(&["e", id]), Tag::from_strs(&["k", "1"])],
            "",
        )
        .sign(keys)
    };
    let d_victim = deletion(&victim, 2, &e_hex);
    let d_attacker = deletion(&attacker, 1, &e_hex);
    let undo = deletion(&attacker, 1, &d_victim.id.to_hex());
    let steps = async {
        let mut conn = Conn::open(&target, ctx.seed)
            .await
            .map_err(|e| e.to_string())?;
        let r = publish_one(&mut conn, &e, timeout).await?;
        if !r.0 {
            return Ok::<_, String>(Err(format!(
                "relay refused the victim's event ({})",
                fmt_ok(&r)
            )));
        }
        if !served(&target, e.id).await? {
            return Ok(Err("the victim's event was not served after OK true".into()));
        }
        let r = publish_one(&mut conn, &d_victim, timeout).await?;
        if !r.0 || served(&target, e.id).await? {
            return Ok(Err(format!(
                "relay does not honour NIP-09 deletion (victim's kind 5: {}; E still served)",
                fmt_ok(&r)
            )));
        }
        let mut attacker_conn = Conn::open(&target, ctx.seed ^ 1)
            .await
            .map_err(|e| e.to_string())?;
        let a1 = publish_one(&mut attacker_conn, &d_attacker, timeout).await?;
        let a2 = publish_one(&mut attacker_conn, &undo, timeout).await?;
        attacker_conn.close().await;
        let mut again = Conn::open(&target, ctx.seed ^ 2)
            .await
            .map_err(|e| e.to_string())?;
        let rebroadcast = publish_one(&mut again, &e, timeout).await?;
        again.close().await;
        conn.close().await;
        let back = served(&target, e.id).await?;
        Ok(Ok((a1, a2, rebroadcast, back)))
    };
    match steps.await {
        Err(why) => f.failed = Some(format!("could not complete: {why}")),
        Ok(Err(why)) => f.unsupported = Some(why),
        Ok(Ok((a1, a2, rebroadcast, back))) => {
            f.metrics.insert(
                "deleted_event_served_again".into(),
                f64::from(u8::from(back)),
            );
            f.notes.push(format!(
                "attacker's kind 5 of E: {}; attacker's kind 5 of the victim's deletion: {}; E sent again: {}",
                fmt_ok(&a1),
                fmt_ok(&a2),
                fmt_ok(&rebroadcast)
            ));
            if back {
                f.failed = Some("deleted event served again".into());
            } else {
                f.passed = Some("deleted event not served again".into());
            }
        }
    }
    f
}

/// An AUTH event that names another relay, answered to our challenge.
pub(super) async fn auth_relayed(ctx: Ctx) -> Found {
    let mut f = Found::default();
    let target = ctx.target().clone();
    let timeout = target.timeout;
    let mut rng = run_rng(ctx.seed);
    let mut conn = match Conn::open(&target, ctx.seed).await {
        Ok(c) => c,
        Err(e) => {
            f.failed = Some(format!("connection failed: {e}"));
            return f;
        }
    };
    let Some(ch) = challenge(&mut conn, timeout.min(Duration::from_secs(3))).await else {
        f.unsupported = Some("no AUTH challenge (NIP-42)".into());
        conn.close().await;
        return f;
    };
    let keys = fresh_keys(&mut rng);
    let evil = auth_event(&keys, &ch, "wss://evil.example/");
    let mut msg = Vec::new();
    write::client_auth(&mut msg, &evil);
    let answer = match conn.writer.send_text(&msg).await {
        Ok(()) => wait_ok(&mut conn, &evil.id, timeout).await,
        Err(e) => Err(e.to_string()),
    };
    conn.close().await;
    // The control: the same AUTH naming this relay, on another connection.
    let control = async {
        let mut c = Conn::open(&target, ctx.seed ^ 1)
            .await
            .map_err(|e| e.to_string())?;
        let ch = challenge(&mut c, timeout.min(Duration::from_secs(3)))
            .await
            .ok_or("no challenge")?;
        let ev = auth_event(&fresh_keys(&mut rng), &ch, &own_url(&target.url));
        let mut msg = Vec::new();
        write::client_auth(&mut msg, &ev);
        c.writer.send_text(&msg).await.map_err(|e| e.to_string())?;
        let r = wait_ok(&mut c, &ev.id, timeout).await;
        c.close().await;
        r
    }
    .await;
    f.notes.push(format!(
        "control AUTH naming {}: {}",
        own_url(&target.url),
        match &control {
            Ok(r) => fmt_ok(r),
            Err(e) => e.clone(),
        }
    ));
    match answer {
        Ok(r) if r.0 => {
            f.metrics.insert("auth_relayed_accepted".into(), 1.0);
            f.failed = Some(format!(
                "AUTH naming wss://evil.example/ accepted ({})",
                fmt_ok(&r)
            ));
        }
        Ok(r) => {
            f.metrics.insert("auth_relayed_accepted".into(), 0.0);
            f.passed = Some(format!("refused ({})", fmt_ok(&r)));
        }
        Err(why) => f.failed = Some(format!("no answer to AUTH: {why}")),
    }
    f
}
