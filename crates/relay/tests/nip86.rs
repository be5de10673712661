//! NIP-86 over real HTTP, each call authorized as NIP-98 says (the header
//! is built here from the NIP texts, not by the relay's code): every
//! method, calls that are not authorized change nothing, a ban stops the
//! next EVENT of an open connection, and the lists survive a restart.

mod support;

use base64::Engine;
use nostrwire_event::{Keys, SignedFields};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::{event, filter, http_get, now, Client, TestRelay};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How a test signs a call.
struct Auth<'a> {
    keys: &'a Keys,
    url: String,
    method: &'a str,
    /// The body whose hash goes in the `payload` tag.
    payload: Option<&'a [u8]>,
    created_at: u64,
}

/// `Authorization: Nostr <base64>` for a kind-27235 event with `u`,
/// `method` and `payload` tags (NIP-98).
fn header(auth: &Auth<'_>) -> String {
    let mut tags: Vec<Vec<String>> = vec![
        vec!["u".into(), auth.url.clone()],
        vec!["method".into(), auth.method.into()],
    ];
    if let Some(body) = auth.payload {
        let hash: String = Sha256::digest(body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        tags.push(vec!["payload".into(), hash]);
    }
    let refs: Vec<Vec<&str>> = tags
        .iter()
        .map(|t| t.iter().map(String::as_str).collect())
        .collect();
    let refs: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
    let signed = event(auth.keys, auth.created_at, 27235, &refs, "");
    let b64 = base64::engine::general_purpose::STANDARD.encode(signed.to_json_bytes());
    format!("Authorization: Nostr {b64}\r\n")
}

/// POSTs `body` with `Content-Type: application/nostr+json+rpc` and the
/// header lines `auth`; returns the status code and the JSON answer.
async fn post(addr: std::net::SocketAddr, path: &str, body: &[u8], auth: &str) -> (u16, Value) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/nostr+json+rpc\r\n\
         {auth}Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let status = out[9..12].parse().unwrap();
    let (_, body) = out.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(body).unwrap())
}

struct Admin<'a> {
    addr: std::net::SocketAddr,
    keys: &'a Keys,
}

impl Admin<'_> {
    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// A call signed properly; its `result` (fails on an error).
    async fn call(&self, method: &str, params: Value) -> Value {
        let (status, answer) = self.raw(method, params).await;
        assert_eq!(status, 200, "{method}: {answer}");
        assert!(
            answer.get("error").is_none_or(Value::is_null),
            "{method}: {answer}"
        );
        answer["result"].clone()
    }

    async fn raw(&self, method: &str, params: Value) -> (u16, Value) {
        let body = json!({ "method": method, "params": params }).to_string();
        let auth = header(&Auth {
            keys: self.keys,
            url: self.url(),
            method: "POST",
            payload: Some(body.as_bytes()),
            created_at: now(),
        });
        post(self.addr, "/", body.as_bytes(), &auth).await
    }
}

async fn publish(client: &mut Client, keys: &Keys, kind: u16, content: &str) -> (bool, String) {
    client
        .publish(&event(keys, now(), kind, &[], content))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_over_http_with_nip98() {
    let admin_keys = Keys::derive(86, 1);
    let stranger = Keys::derive(86, 2);
    let victim = Keys::derive(86, 3);
    let member = Keys::derive(86, 4);
    let mut relay =
        TestRelay::start_with(|c| c.admin.pubkeys = vec![admin_keys.public_key().to_hex()]);
    let addr = relay.addr();
    let admin = Admin {
        addr,
        keys: &admin_keys,
    };
    // Open before any change: the changes apply to open connections.
    let mut client = Client::connect(&relay.url).await;

    let methods = admin.call("supportedmethods", json!([])).await;
    for m in [
        "banpubkey",
        "listbannedpubkeys",
        "allowpubkey",
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
    ] {
        assert!(methods.as_array().unwrap().contains(&json!(m)), "{m}");
    }

    // Calls that are not authorized change nothing: 401, and the lists stay empty.
    let victim_hex = victim.public_key().to_hex();
    let body = json!({ "method": "banpubkey", "params": [victim_hex, "spam"] }).to_string();
    let good = Auth {
        keys: &admin_keys,
        url: admin.url(),
        method: "POST",
        payload: Some(body.as_bytes()),
        created_at: now(),
    };
    let other_body = b"{}".as_slice();
    let refused = [
        ("no header", String::new()),
        (
            "not an admin",
            header(&Auth {
                keys: &stranger,
                ..good_clone(&good)
            }),
        ),
        (
            "another URL",
            header(&Auth {
                url: format!("http://{addr}/other"),
                ..good_clone(&good)
            }),
        ),
        (
            "another body",
            header(&Auth {
                payload: Some(other_body),
                ..good_clone(&good)
            }),
        ),
        (
            "no payload tag",
            header(&Auth {
                payload: None,
                ..good_clone(&good)
            }),
        ),
        (
            "another method",
            header(&Auth {
                method: "GET",
                ..good_clone(&good)
            }),
        ),
        (
            "stale",
            header(&Auth {
                created_at: now() - 600,
                ..good_clone(&good)
            }),
        ),
    ];
    for (why, auth) in &refused {
        let (status, answer) = post(addr, "/", body.as_bytes(), auth).await;
        assert_eq!(status, 401, "{why}: {answer}");
        assert!(
            answer["result"].is_null() && answer["error"].is_string(),
            "{why}: {answer}"
        );
    }
    assert_eq!(admin.call("listbannedpubkeys", json!([])).await, json!([]));
    assert!(publish(&mut client, &victim, 1, "still allowed").await.0);
    // The same request, properly signed, is taken.
    let (status, answer) = post(addr, "/", body.as_bytes(), &header(&good)).await;
    assert_eq!((status, &answer["result"]), (200, &json!(true)), "{answer}");

    // banpubkey: the victim's next EVENT on the open connection is refused.
    assert_eq!(
        admin.call("listbannedpubkeys", json!([])).await,
        json!([{ "pubkey": victim_hex, "reason": "spam" }])
    );
    let (accepted, message) = publish(&mut client, &victim, 1, "after the ban").await;
    assert!(!accepted && message.starts_with("blocked:"), "{message}");
    assert!(
        publish(&mut client, &stranger, 1, "others still publish")
            .await
            .0
    );
    assert_eq!(
        admin.call("unbanpubkey", json!([victim_hex])).await,
        json!(true)
    );
    assert!(publish(&mut client, &victim, 1, "unbanned").await.0);

    // allowpubkey: only the allowed publish.
    let member_hex = member.public_key().to_hex();
    assert_eq!(
        admin
            .call("allowpubkey", json!([member_hex, "member"]))
            .await,
        json!(true)
    );
    assert_eq!(
        admin.call("listallowedpubkeys", json!([])).await,
        json!([{ "pubkey": member_hex, "reason": "member" }])
    );
    assert!(publish(&mut client, &member, 1, "member").await.0);
    assert!(!publish(&mut client, &stranger, 1, "not a member").await.0);
    admin.call("unallowpubkey", json!([member_hex])).await;
    assert!(publish(&mut client, &stranger, 1, "open again").await.0);

    // banevent: the stored copy goes and it is refused; allowevent lets it back.
    let note = event(&stranger, now(), 1, &[], "to be banned");
    assert!(client.publish(&note).await.0);
    let by_id = filter(&format!(r#"{{"ids":["{}"]}}"#, note.id.to_hex()));
    assert_eq!(
        client.query("s", std::slice::from_ref(&by_id)).await.len(),
        1
    );
    assert_eq!(
        admin
            .call("banevent", json!([note.id.to_hex(), "bad"]))
            .await,
        json!(true)
    );
    assert_eq!(
        admin.call("listbannedevents", json!([])).await,
        json!([{ "id": note.id.to_hex(), "reason": "bad" }])
    );
    assert!(client
        .query("s", std::slice::from_ref(&by_id))
        .await
        .is_empty());
    assert!(!client.publish(&note).await.0);
    admin.call("allowevent", json!([note.id.to_hex()])).await;
    assert_eq!(admin.call("listbannedevents", json!([])).await, json!([]));
    assert!(client.publish(&note).await.0);
    assert_eq!(
        admin.call("listeventsneedingmoderation", json!([])).await,
        json!([])
    );

    // Kinds.
    admin.call("allowkind", json!([1])).await;
    assert_eq!(admin.call("listallowedkinds", json!([])).await, json!([1]));
    assert!(publish(&mut client, &stranger, 1, "kind 1").await.0);
    assert!(!publish(&mut client, &stranger, 7, "+").await.0);
    admin.call("disallowkind", json!([1])).await;
    assert_eq!(admin.call("listallowedkinds", json!([])).await, json!([]));
    assert!(
        !publish(&mut client, &stranger, 1, "kind 1 disallowed")
            .await
            .0
    );
    assert!(publish(&mut client, &stranger, 7, "+").await.0);

    // NIP-11.
    admin.call("changerelayname", json!(["renamed"])).await;
    admin
        .call("changerelaydescription", json!(["described"]))
        .await;
    admin
        .call("changerelayicon", json!(["https://example.com/icon.png"]))
        .await;
    let info: Value =
        serde_json::from_str(&http_get(addr, "/", "application/nostr+json").await).unwrap();
    assert_eq!(
        (&info["name"], &info["description"], &info["icon"]),
        (
            &json!("renamed"),
            &json!("described"),
            &json!("https://example.com/icon.png")
        )
    );

    // Addresses: a blocked one cannot connect.
    admin.call("blockip", json!(["127.0.0.2", "abuse"])).await;
    assert_eq!(
        admin.call("listblockedips", json!([])).await,
        json!([{ "ip": "127.0.0.2", "reason": "abuse" }])
    );
    let from_blocked = tokio::net::TcpSocket::new_v4().unwrap();
    from_blocked.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut s = from_blocked.connect(addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    admin.call("unblockip", json!(["127.0.0.2"])).await;
    let mut unblocked = Client::connect_from(&relay.url, addr, "127.0.0.2").await;
    assert!(publish(&mut unblocked, &stranger, 7, "from .2").await.0);

    // Errors as the NIP says.
    let (status, answer) = admin.raw("nosuchmethod", json!([])).await;
    assert_eq!(status, 200);
    assert!(
        answer["result"].is_null() && answer["error"].is_string(),
        "{answer}"
    );
    let (_, answer) = admin.raw("banpubkey", json!(["nothex"])).await;
    assert!(answer["error"].is_string(), "{answer}");

    // Survives a restart.
    admin.call("banpubkey", json!([victim_hex, "again"])).await;
    drop(client);
    drop(unblocked);
    relay.relay.take().unwrap().shutdown();
    let dir = relay.dir.path().to_path_buf();
    let again = TestRelay::start_with(|c| {
        c.admin.pubkeys = vec![admin_keys.public_key().to_hex()];
        c.relay.data = dir;
    });
    let admin = Admin {
        addr: again.addr(),
        keys: &admin_keys,
    };
    assert_eq!(
        admin.call("listbannedpubkeys", json!([])).await,
        json!([{ "pubkey": victim_hex, "reason": "again" }])
    );
    let info: Value =
        serde_json::from_str(&http_get(again.addr(), "/", "application/nostr+json").await).unwrap();
    assert_eq!(info["name"], json!("renamed"));
    let mut client = Client::connect(&again.url).await;
    assert!(
        !publish(&mut client, &victim, 1, "banned after restart")
            .await
            .0
    );
    assert!(
        !publish(&mut client, &stranger, 1, "kind 1 still disallowed")
            .await
            .0
    );
}

fn good_clone<'a>(a: &Auth<'a>) -> Auth<'a> {
    Auth {
        keys: a.keys,
        url: a.url.clone(),
        method: a.method,
        payload: a.payload,
        created_at: a.created_at,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleteevents_removes_exactly_the_matching_set_while_the_relay_serves() {
    let admin_keys = Keys::derive(86, 10);
    let relay = TestRelay::start_with(|c| c.admin.pubkeys = vec![admin_keys.public_key().to_hex()]);
    let admin = Admin {
        addr: relay.addr(),
        keys: &admin_keys,
    };
    let mut client = Client::connect(&relay.url).await;
    let authors: Vec<Keys> = (0..4).map(|i| Keys::derive(86, 20 + i)).collect();
    let t = now();
    for i in 0..200u64 {
        let keys = &authors[(i % 4) as usize];
        let kind = if i % 3 == 0 { 7 } else { 1 };
        assert!(
            client
                .publish(&event(keys, t - i, kind, &[], &format!("n{i}")))
                .await
                .0
        );
    }
    let all = client.query("all", &[filter(r#"{"limit":1000}"#)]).await;
    let doomed_filter = format!(
        r#"{{"authors":["{}"],"kinds":[7]}}"#,
        authors[1].public_key().to_hex()
    );
    let doomed = client.query("d", &[filter(&doomed_filter)]).await;
    assert!(!doomed.is_empty());
    let result = admin
        .call(
            "deleteevents",
            serde_json::from_str::<Value>(&format!("[{doomed_filter}]")).unwrap(),
        )
        .await;
    assert_eq!(
        result,
        json!({ "matched": doomed.len(), "removed": doomed.len() })
    );
    let mut left: Vec<String> = client
        .query("all2", &[filter(r#"{"limit":1000}"#)])
        .await
        .iter()
        .map(|e| e.id.to_hex())
        .collect();
    let mut expected: Vec<String> = all
        .iter()
        .filter(|e| !doomed.iter().any(|d| d.id == e.id))
        .map(|e| e.id.to_hex())
        .collect();
    left.sort();
    expected.sort();
    assert_eq!(left, expected);
    // The relay keeps serving, and a removed event may be published again.
    assert!(client.publish(&doomed[0]).await.0);
}
