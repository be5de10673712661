//! NIP-98 HTTP authorization, as NIP-86 asks for it: an event of kind
//! 27235 in `Authorization: Nostr <base64 of the event's JSON>`, whose id
//! and signature check out, created within the window around the relay's
//! clock, whose `u` tag is the URL requested, `method` tag the request's
//! method, and `payload` tag the SHA-256 (hex) of the request body;
//! signed by one of the admins.

use base64::Engine;
use nostrwire_event::{Event, PreimageFields, PublicKey, SignedFields};
use sha2::{Digest, Sha256};

use crate::policy::{first_tag_value, relay_name};

/// The NIP-98 event kind.
pub const KIND: u16 = 27235;
/// Largest `Authorization` value read (an event with a few tags).
const MAX_HEADER: usize = 8 * 1024;

/// What a request is checked against.
#[derive(Debug)]
pub struct Expected<'a> {
    /// The URL the request reached (scheme, host, path and query).
    pub url: &'a str,
    /// The HTTP method.
    pub method: &'a str,
    /// The request body.
    pub body: &'a [u8],
    /// Seconds `created_at` may be from `now`.
    pub window: u64,
    /// The relay's clock.
    pub now: u64,
}

/// Checks the `Authorization` header value; returns the signer when the
/// event authorizes this request. It does not check who the signer is.
pub fn check(header: Option<&str>, expected: &Expected<'_>) -> Result<PublicKey, &'static str> {
    let header = header.ok_or("auth-required: a NIP-98 Authorization header is needed")?;
    if header.len() > MAX_HEADER {
        return Err("invalid: the Authorization header is too large");
    }
    let encoded = header
        .strip_prefix("Nostr ")
        .ok_or("invalid: the Authorization scheme is not Nostr")?;
    let json = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| "invalid: the Authorization value is not base64")?;
    let event =
        Event::from_json(&json).map_err(|_| "invalid: the Authorization event does not parse")?;
    if event.kind().as_u16() != KIND {
        return Err("invalid: the Authorization event is not of kind 27235");
    }
    if event.created_at().as_u64().abs_diff(expected.now) > expected.window {
        return Err("invalid: the Authorization event's created_at is outside the window");
    }
    let u = first_tag_value(&event, "u").ok_or("invalid: the Authorization event has no u tag")?;
    if !same_url(&u, expected.url) {
        return Err("invalid: the Authorization event's u tag is not this URL");
    }
    if first_tag_value(&event, "method").as_deref() != Some(expected.method) {
        return Err("invalid: the Authorization event's method tag is not this request's");
    }
    let digest = hex(&Sha256::digest(expected.body));
    let payload = first_tag_value(&event, "payload").map(|p| p.to_ascii_lowercase());
    if payload.as_deref() != Some(digest.as_str()) {
        return Err("invalid: the Authorization event's payload tag is not the body's SHA-256");
    }
    event
        .verify()
        .map_err(|_| "invalid: the Authorization event's id or signature is wrong")?;
    Ok(*event.pubkey())
}

/// Whether `u` names the URL `url`: the same host, port, path and query.
/// The scheme is not compared: behind a TLS proxy the relay sees plain
/// HTTP for an `https://` request (nor is `ws`/`http`).
fn same_url(u: &str, url: &str) -> bool {
    let query = |s: &str| {
        s.split_once('?')
            .map(|(_, q)| q.split('#').next().unwrap_or("").to_string())
    };
    relay_name(u) == relay_name(url) && query(u) == query(url)
}

fn hex(bytes: &[u8]) -> String {
    nostrwire_event::hex::encode(bytes)
}

/// The `Authorization` header value authorizing `body` for `method` on
/// `url`, signed by `keys` at `now` (for clients: `nostrwire delete`,
/// tests).
pub fn authorization(
    keys: &nostrwire_event::Keys,
    url: &str,
    method: &str,
    body: &[u8],
    now: u64,
) -> String {
    let tag = |a: &str, b: &str| {
        nostrwire_event::Tag::new(vec![a.to_string(), b.to_string()]).expect("two elements")
    };
    let event = nostrwire_event::UnsignedEvent::new(
        keys,
        nostrwire_event::Timestamp::new(now).expect("a time"),
        nostrwire_event::Kind(KIND),
        vec![
            tag("u", url),
            tag("method", method),
            tag("payload", &hex(&Sha256::digest(body))),
        ],
        "",
    )
    .sign(keys);
    format!(
        "Nostr {}",
        base64::engine::general_purpose::STANDARD.encode(event.to_json_bytes())
    )
}
