//! NIP-86, relay management: JSON-RPC-like calls (`{"method": ..,
//! "params": [..]}` in a POST with `Content-Type:
//! application/nostr+json+rpc`) on the relay's own URL, each authorized by
//! NIP-98 ([`super::nip98`]) and signed by one of `admin.pubkeys`. Changes
//! are stored through the writer before they are answered, applied at once
//! (ingest's policy, new connections, NIP-11) and logged.

use std::sync::Arc;

use nostrwire_event::{EventId, Filter, PublicKey};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::moderation::Moderation;
use super::nip98;
use crate::msg::WriterMsg;
use crate::store::Task;
use crate::Shared;

/// The content type of NIP-86 requests and answers.
pub const CONTENT_TYPE: &str = "application/nostr+json+rpc";
/// Largest request body read.
pub const MAX_BODY: usize = 64 * 1024;
/// How long a client may take to send its body.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Every method answered: those of NIP-86 that apply, and `deleteevents`
/// (this relay's: removes the stored events a NIP-01 filter matches).
pub const METHODS: &[&str] = &[
    "supportedmethods",
    "banpubkey",
    "unbanpubkey",
    "listbannedpubkeys",
    "allowpubkey",
    "unallowpubkey",
    "listallowedpubkeys",
    "listeventsneedingmoderation",
    "allowevent",
    "banevent",
    "listbannedevents",
    "changerelayname",
    "changerelaydescription",
    "changerelayicon",
    "allowkind",
    "disallowkind",
    "listallowedkinds",
    "blockip",
    "unblockip",
    "listblockedips",
    "deleteevents",
];

/// An answer: HTTP status line and the JSON body.
#[derive(Debug)]
pub struct Answer {
    /// `200 OK`, `401 Unauthorized`, …
    pub status: &'static str,
    /// `{"result": …, "error": …}`.
    pub body: String,
}

impl Answer {
    fn ok(result: Value) -> Answer {
        Answer {
            status: "200 OK",
            body: json!({ "result": result }).to_string(),
        }
    }

    fn error(status: &'static str, error: &str) -> Answer {
        Answer {
            status,
            body: json!({ "result": null, "error": error }).to_string(),
        }
    }
}

/// Reads the body of a NIP-86 request (`early`: what came with its head)
/// of `length` bytes.
pub async fn read_body(
    stream: &mut TcpStream,
    early: &[u8],
    length: Option<usize>,
) -> Result<Vec<u8>, Answer> {
    let length = length.ok_or_else(|| {
        Answer::error("411 Length Required", "invalid: a Content-Length is needed")
    })?;
    if length > MAX_BODY {
        return Err(Answer::error(
            "413 Payload Too Large",
            "invalid: the request is too large",
        ));
    }
    let mut body = early[..early.len().min(length)].to_vec();
    let read = async {
        while body.len() < length {
            let mut buf = vec![0u8; length - body.len()];
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
            body.extend_from_slice(&buf[..n]);
        }
        Ok(())
    };
    match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(Ok(())) => Ok(body),
        _ => Err(Answer::error(
            "400 Bad Request",
            "invalid: the request body did not arrive",
        )),
    }
}

/// Answers one call: `url` is the URL the request reached, `authorization`
/// its header.
pub async fn call(
    shared: &Arc<Shared>,
    url: &str,
    authorization: Option<&str>,
    body: Vec<u8>,
) -> Answer {
    let config = shared.current_config();
    let expected = nip98::Expected {
        url,
        method: "POST",
        body: &body,
        window: shared.config.admin.window_seconds,
        now: crate::now(),
    };
    let admin = match nip98::check(authorization, &expected) {
        Ok(signer) => signer,
        Err(why) => {
            shared.metrics.limit_hit("nip86_unauthorized");
            return Answer::error("401 Unauthorized", why);
        }
    };
    let is_admin = config
        .admin
        .pubkeys
        .iter()
        .any(|k| PublicKey::from_hex(k).is_ok_and(|k| k == admin));
    if !is_admin {
        shared.metrics.limit_hit("nip86_unauthorized");
        return Answer::error(
            "401 Unauthorized",
            "restricted: this pubkey may not manage the relay",
        );
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return Answer::error("400 Bad Request", "invalid: the request is not JSON"),
    };
    let Some(method) = request
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return Answer::error("400 Bad Request", "invalid: the request names no method");
    };
    let params = match request.get("params") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(params)) => params.clone(),
        Some(_) => return Answer::error("400 Bad Request", "invalid: params is not an array"),
    };
    let shared = shared.clone();
    let admin_hex = admin.to_hex();
    let outcome = tokio::task::spawn_blocking(move || {
        run(&shared, &method, &params).map(|r| (method, params, r))
    })
    .await
    .unwrap_or_else(|_| Err("error: the call failed".into()));
    match outcome {
        Ok((method, params, result)) => {
            if !method.starts_with("list") && method != "supportedmethods" {
                let params = Value::Array(params).to_string();
                tracing::info!(admin = %admin_hex, method, params, "NIP-86 change");
            }
            Answer::ok(result)
        }
        Err(error) => Answer::error("200 OK", &error),
    }
}

/// Runs `method` (on a blocking thread: changes wait for the writer).
fn run(shared: &Shared, method: &str, params: &[Value]) -> Result<Value, String> {
    let text = |i: usize| params.get(i).and_then(Value::as_str);
    let reason = || text(1).unwrap_or("").to_string();
    let pubkey = || {
        text(0)
            .and_then(|s| PublicKey::from_hex(s).ok())
            .map(|k| k.to_hex())
            .ok_or_else(|| "invalid: the first parameter is not a hex public key".to_string())
    };
    let event_id = || {
        text(0)
            .and_then(|s| EventId::from_hex(s).ok())
            .ok_or_else(|| "invalid: the first parameter is not a hex event id".to_string())
    };
    let kind = || {
        params
            .first()
            .and_then(Value::as_u64)
            .and_then(|k| u16::try_from(k).ok())
            .ok_or_else(|| "invalid: the first parameter is not a kind number".to_string())
    };
    let ip = || {
        text(0)
            .and_then(|s| s.trim().parse::<std::net::IpAddr>().ok())
            .map(|ip| ip.to_canonical().to_string())
            .ok_or_else(|| "invalid: the first parameter is not an IP address".to_string())
    };
    let listed = |map: &std::collections::BTreeMap<String, String>, key: &str| {
        map.iter()
            .map(|(k, reason)| json!({ key: k, "reason": reason }))
            .collect::<Vec<_>>()
    };
    let now = shared.moderation();
    match method {
        "supportedmethods" => Ok(json!(METHODS)),
        "listbannedpubkeys" => Ok(json!(listed(&now.banned_pubkeys, "pubkey"))),
        "listallowedpubkeys" => Ok(json!(listed(&now.allowed_pubkeys, "pubkey"))),
        "listbannedevents" => Ok(json!(listed(&now.banned_events, "id"))),
        "listblockedips" => Ok(json!(listed(&now.blocked_ips, "ip"))),
        "listallowedkinds" => Ok(json!(now.allowed_kinds)),
        "listeventsneedingmoderation" => Ok(json!([])),
        "banpubkey" => {
            let key = pubkey()?;
            change(shared, |m| {
                m.allowed_pubkeys.remove(&key);
                m.banned_pubkeys.insert(key, reason());
            })
        }
        "unbanpubkey" => {
            let key = pubkey()?;
            change(shared, |m| {
                m.banned_pubkeys.remove(&key);
            })
        }
        "allowpubkey" => {
            let key = pubkey()?;
            change(shared, |m| {
                m.banned_pubkeys.remove(&key);
                m.allowed_pubkeys.insert(key, reason());
            })
        }
        "unallowpubkey" => {
            let key = pubkey()?;
            change(shared, |m| {
                m.allowed_pubkeys.remove(&key);
            })
        }
        "banevent" => {
            let id = event_id()?;
            change(shared, |m| {
                m.banned_events.insert(id.to_hex(), reason());
            })?;
            // A stored copy goes too.
            super::remove(&shared.writer_tx, &[id], &mut |_| {})
                .map_err(|e| format!("error: {e}"))?;
            Ok(json!(true))
        }
        "allowevent" => {
            let id = event_id()?;
            change(shared, |m| {
                m.banned_events.remove(&id.to_hex());
            })
        }
        "changerelayname" => {
            let name = text(0)
                .ok_or("invalid: the first parameter is not a string")?
                .to_string();
            change(shared, |m| m.name = Some(name))
        }
        "changerelaydescription" => {
            let text = text(0)
                .ok_or("invalid: the first parameter is not a string")?
                .to_string();
            change(shared, |m| m.description = Some(text))
        }
        "changerelayicon" => {
            let icon = text(0)
                .ok_or("invalid: the first parameter is not a string")?
                .to_string();
            change(shared, |m| m.icon = Some(icon))
        }
        "allowkind" => {
            let kind = kind()?;
            change(shared, |m| {
                m.disallowed_kinds.remove(&kind);
                m.allowed_kinds.insert(kind);
            })
        }
        "disallowkind" => {
            let kind = kind()?;
            change(shared, |m| {
                m.allowed_kinds.remove(&kind);
                m.disallowed_kinds.insert(kind);
            })
        }
        "blockip" => {
            let ip = ip()?;
            change(shared, |m| {
                m.blocked_ips.insert(ip, reason());
            })
        }
        "unblockip" => {
            let ip = ip()?;
            change(shared, |m| {
                m.blocked_ips.remove(&ip);
            })
        }
        "deleteevents" => {
            let filter = params
                .first()
                .filter(|f| f.is_object())
                .and_then(|f| Filter::from_json(f.to_string().as_bytes()).ok())
                .ok_or("invalid: the first parameter is not a NIP-01 filter")?;
            let found = super::matching(&*shared.store, &filter, crate::now())
                .map_err(|e| format!("error: {e}"))?;
            let ids: Vec<EventId> = found.iter().map(|f| f.id).collect();
            let removed = super::remove(&shared.writer_tx, &ids, &mut |_| {})
                .map_err(|e| format!("error: {e}"))?;
            Ok(json!({ "matched": ids.len(), "removed": removed }))
        }
        _ => Err(format!("invalid: unknown method {method:?}")),
    }
}

/// Applies `edit` to the lists: stored through the writer, then in force.
/// One change at a time, so none is lost.
fn change(shared: &Shared, edit: impl FnOnce(&mut Moderation)) -> Result<Value, String> {
    let _one = shared.admin_lock.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = Moderation::clone(&shared.moderation());
    edit(&mut next);
    let (tell, told) = crossbeam_channel::bounded(1);
    let saved = next.clone();
    let task = Task::new(move |store| {
        let _ = tell.send(saved.save(store).map_err(|e| e.to_string()));
    });
    shared
        .writer_tx
        .send(WriterMsg::Task(task))
        .map_err(|_| "error: the relay is stopping".to_string())?;
    told.recv()
        .map_err(|_| "error: the relay is stopping".to_string())?
        .map_err(|e| format!("error: could not store the change: {e}"))?;
    shared.set_moderation(next);
    Ok(json!(true))
}
