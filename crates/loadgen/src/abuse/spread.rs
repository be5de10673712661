//! Attacks from many addresses at once: every per-address limit holds,
//! and only the relay-wide ones stand between the attackers and the
//! relay's memory and CPU. On loopback the attackers come from
//! 127.0.0.2, 127.0.0.3, … (`--attack-addresses` of them), the probe from
//! 127.0.0.1.

use super::*;

/// The `k`-th attacking address: 127.0.0.2 and up, then 127.0.1.1 and up.
pub(super) fn attacker_address(k: usize) -> std::net::Ipv4Addr {
    let n = k + 2;
    std::net::Ipv4Addr::new(
        127,
        0,
        (n / 254) as u8,
        (n % 254) as u8 + u8::from(n >= 254),
    )
}

impl Ctx {
    /// Opens connection `i` from the `i % attack_addresses`-th address
    /// (when the relay is on loopback; otherwise from this host).
    async fn open_spread(&self, i: usize) -> Result<Conn, Error> {
        let mut target = self.attacker.clone();
        if target.url.source.is_some() {
            let k = i % self.p().attack_addresses.max(1);
            target.url.source = Some(attacker_address(k).into());
        }
        Conn::open(
            &target,
            self.seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9),
        )
        .await
    }
}

/// The IPv6 /48 the `spread-ipv6-48` attackers claim: 2001:db8:4b00::/48
/// (in the documentation prefix, RFC 3849).
const ATTACK_48: [u16; 3] = [0x2001, 0x0db8, 0x4b00];

/// The `k`-th address of the `spread-ipv6-48` attack: in the `k`-th /64 of
/// [`ATTACK_48`] (65,536 of them), with an interface id of its own, as
/// SLAAC privacy addresses pick them.
pub(super) fn slash64_address(k: usize) -> std::net::Ipv6Addr {
    let [a, b, c] = ATTACK_48;
    let lap = (k >> 16) as u16;
    std::net::Ipv6Addr::new(a, b, c, k as u16, 0x5a1e, lap, 0x7, 0x1)
}

/// Opens `n` attacking connections over the addresses.
async fn open_many(ctx: &Ctx, n: usize) -> (Vec<Conn>, usize) {
    let mut open = Vec::with_capacity(n);
    let mut failed = 0;
    for i in 0..n {
        if ctx.over() {
            break;
        }
        match ctx.open_spread(i).await {
            Ok(c) => open.push(c),
            Err(_) => failed += 1,
        }
    }
    (open, failed)
}

/// `spread_connections` connections over `attack_addresses` addresses, each
/// asking for `spread_reqs` subscriptions of `{"kinds":[1],"limit":5000}`
/// and never reading.
pub(super) async fn spread_slow_readers(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let (mut conns, failed) = open_many(&ctx, p.spread_connections).await;
    let mut msg = Vec::new();
    let mut send_failed = 0;
    for conn in &mut conns {
        for r in 0..p.spread_reqs.max(1) {
            msg.clear();
            let notes = Filter {
                kinds: Some(vec![Kind(1)]),
                limit: Some(5_000),
                ..Filter::new()
            };
            write::req(&mut msg, &format!("notes{r}"), &[notes]);
            conn.writer.queue_text(&msg);
        }
        if conn.writer.flush().await.is_err() {
            send_failed += 1;
        }
    }
    f.metrics
        .insert("attack_connections".into(), conns.len() as f64);
    f.notes.push(format!(
        "{} connections from {} addresses × {} subscriptions of kind 1 (limit 5000), never read; {failed} failed to open, {send_failed} to send",
        conns.len(),
        p.attack_addresses,
        p.spread_reqs
    ));
    ctx.hold().await;
    drop(conns);
    f
}

/// `spread_connections` connections over `attack_addresses` addresses,
/// each sending oversized live REQs (32 filters of long `authors` lists)
/// until the attack ends; what the relay answers is read and counted.
pub(super) async fn spread_oversized_subs(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let (conns, failed) = open_many(&ctx, p.spread_connections).await;
    let filters = p.oversized_filters.max(1);
    let authors = p
        .oversized_values
        .min(p.message_bytes.max(1_000) / filters / 67)
        .max(1);
    let mut rng = Rng::new(ctx.seed);
    let sent: SentSubs = Arc::default();
    let mut drains = Vec::new();
    let mut writers = Vec::new();
    for c in conns {
        let Conn { reader, writer, .. } = c;
        drains.push(tokio::spawn(drain(reader, sent.clone(), ctx.stop.clone())));
        writers.push(writer);
    }
    // One REQ text, sent under new subscription ids: building a megabyte
    // message per REQ would measure this tester, not the relay.
    let template = list_req(
        "X",
        filters,
        "authors",
        &mut || random_hex32(&mut rng),
        authors,
    );
    let mut reqs = 0usize;
    let mut bytes = 0usize;
    'rounds: for round in 0.. {
        for (k, w) in writers.iter_mut().enumerate() {
            if ctx.over() || reqs >= p.oversized_reqs * p.attack_addresses.max(1) {
                break 'rounds;
            }
            let sub = format!("s{round}-{k}");
            let msg = rename_sub(&template, &sub);
            sent.lock().expect("sent lock").insert(sub, Instant::now());
            if w.send_text(&msg).await.is_err() {
                continue;
            }
            reqs += 1;
            bytes += msg.len();
        }
    }
    f.metrics
        .insert("attack_connections".into(), writers.len() as f64);
    f.notes.push(format!(
        "{} connections from {} addresses sent {reqs} oversized live REQs ({} MiB: {filters} filters × {authors} authors); {failed} failed to open",
        writers.len(),
        p.attack_addresses,
        bytes >> 20
    ));
    ctx.hold().await;
    for w in &mut writers {
        let _ = w.close().await;
    }
    answered(&mut f, "the oversized REQs", drains).await;
    f
}

/// `spread_connections` connections, the `i`-th claiming (through
/// `X-Forwarded-For`, from the attacking loopback address, as a reverse
/// proxy would forward it) an address in the `i`-th /64 of one /48: within
/// every per-/64 limit, one tunnel broker's allocation. Each subscribes to
/// nothing and holds its socket until the attack ends; how many the relay
/// took and refused is counted. A relay that does not take client
/// addresses from the header (`relay.real_ip_header`) sees them all come
/// from one address.
pub(super) async fn spread_ipv6_48(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let mut open = Vec::new();
    let mut refused = 0usize;
    for i in 0..p.spread_connections {
        if ctx.over() {
            break;
        }
        let mut target = ctx.attacker.clone();
        target.url.forwarded_for = Some(slash64_address(i).into());
        match Conn::open(&target, ctx.seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9)).await {
            Ok(c) => open.push(c),
            Err(_) => refused += 1,
        }
    }
    let [a, b, c] = ATTACK_48;
    f.metrics
        .insert("attack_connections".into(), open.len() as f64);
    f.metrics.insert("attack_refused".into(), refused as f64);
    f.notes.push(format!(
        "{} of {} connections from as many /64s of {a:x}:{b:x}:{c:x}::/48 (X-Forwarded-For) held open; {refused} refused",
        open.len(),
        open.len() + refused,
    ));
    ctx.hold().await;
    drop(open);
    f
}

/// `list_req`'s text with subscription id `X` replaced by `sub`.
fn rename_sub(template: &[u8], sub: &str) -> Vec<u8> {
    // `["REQ","X",` is the start of every list_req message.
    let head = b"[\"REQ\",\"X\",";
    debug_assert!(template.starts_with(head));
    let mut out = Vec::with_capacity(template.len() + sub.len());
    out.extend_from_slice(b"[\"REQ\",\"");
    out.extend_from_slice(sub.as_bytes());
    out.extend_from_slice(b"\",");
    out.extend_from_slice(&template[head.len()..]);
    out
}

/// `spread_connections` connections over `attack_addresses` addresses,
/// each asking again and again for 5,000 notes and reading them: the
/// most a client can make the relay work while it plays by the rules.
pub(super) async fn spread_heavy_queries(ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let (conns, failed) = open_many(&ctx, p.spread_connections).await;
    let timeout = ctx.target().timeout;
    let query = Query {
        label: "attack:heavy",
        filter: Filter {
            kinds: Some(vec![Kind(1)]),
            limit: Some(5_000),
            ..Filter::new()
        },
        must_include: vec![],
    };
    let n = conns.len();
    let mut tasks = Vec::new();
    for mut c in conns {
        let (query, ctx) = (query.clone(), ctx.clone());
        tasks.push(tokio::spawn(async move {
            let mut stats = OpStats::default();
            while !ctx.over() {
                match c.query(&query, timeout).await {
                    QueryOutcome::Ok { latency, .. } => stats.success(latency),
                    QueryOutcome::Failed(fail, _) => {
                        let lost = fail == Failure::ConnectionLost;
                        stats.fail(fail);
                        if lost {
                            break;
                        }
                    }
                }
            }
            stats
        }));
    }
    let mut stats = OpStats::default();
    for t in tasks {
        if let Ok(s) = t.await {
            stats.merge(&s);
        }
    }
    f.op("attack:heavy").merge(&stats);
    f.metrics.insert("attack_connections".into(), n as f64);
    f.notes.push(format!(
        "{n} connections from {} addresses asking for 5,000 notes again and again, reading every answer; {} answered; {failed} failed to open",
        p.attack_addresses, stats.successes
    ));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attacking_addresses_are_distinct_loopback_addresses_beside_the_probe() {
        let all: HashSet<_> = (0..1_000).map(attacker_address).collect();
        assert_eq!(all.len(), 1_000);
        assert!(all.iter().all(|a| a.is_loopback()));
        assert!(
            !all.contains(&std::net::Ipv4Addr::new(127, 0, 0, 1)),
            "the probe's"
        );
        assert_eq!(attacker_address(0), std::net::Ipv4Addr::new(127, 0, 0, 2));
        assert!(all
            .iter()
            .all(|a| a.octets()[3] != 0 && a.octets()[3] != 255));
    }

    #[test]
    fn ipv6_attackers_fill_distinct_64s_of_one_48() {
        let n = 70_000;
        let all: Vec<_> = (0..n).map(slash64_address).collect();
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), n);
        let net = |ip: &std::net::Ipv6Addr, bits: u32| u128::from(*ip) >> (128 - bits);
        assert!(
            all.iter().all(|ip| net(ip, 48) == net(&all[0], 48)),
            "one /48"
        );
        // The first 65,536 are each in a /64 of their own; then it wraps.
        let slash64s: HashSet<_> = all[..65_536].iter().map(|ip| net(ip, 64)).collect();
        assert_eq!(slash64s.len(), 65_536);
        assert_eq!(net(&all[65_536], 64), net(&all[0], 64));
        assert_eq!(all[3].to_string(), "2001:db8:4b00:3:5a1e:0:7:1");
    }

    #[test]
    fn renamed_requests_stay_json() {
        let mut rng = Rng::new(3);
        let t = list_req("X", 2, "authors", &mut || random_hex32(&mut rng), 3);
        let r = rename_sub(&t, "s12-4");
        let v: serde_json::Value = serde_json::from_slice(&r).unwrap();
        assert_eq!(v[1], "s12-4");
        assert_eq!(
            v[2],
            serde_json::from_slice::<serde_json::Value>(&t).unwrap()[2]
        );
    }
}
