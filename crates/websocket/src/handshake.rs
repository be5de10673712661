//! The parts of the opening handshake (RFC 6455 §4) that are not plain
//! HTTP: the accept key, and the permessage-deflate negotiation carried in
//! `Sec-WebSocket-Extensions` (RFC 7692 §5, §7.1).

use sha1::{Digest, Sha1};

use crate::deflate::{DeflateConfig, DeflateParams};
use crate::Error;

/// The GUID that RFC 6455 §1.3 appends to the client key.
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The extension token.
pub const PERMESSAGE_DEFLATE: &str = "permessage-deflate";

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key` (RFC 6455 §4.2.2).
pub fn accept_key(key: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(key);
    h.update(WS_GUID.as_bytes());
    base64(&h.finalize())
}

/// Standard base64 with padding.
pub fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One extension offer or answer: its name and `name[=value]` parameters.
struct Extension<'a> {
    name: &'a str,
    params: Vec<(&'a str, Option<&'a str>)>,
}

/// Splits a `Sec-WebSocket-Extensions` value into extensions. Values may be
/// quoted (`client_max_window_bits="10"`); quotes are removed.
fn parse_extensions(value: &str) -> impl Iterator<Item = Extension<'_>> {
    value.split(',').filter_map(|item| {
        let mut parts = item.split(';').map(str::trim);
        let name = parts.next().filter(|n| !n.is_empty())?;
        let params = parts
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim().trim_matches('"'))),
                None => (p, None),
            })
            .collect();
        Some(Extension { name, params })
    })
}

/// Window bits as RFC 7692 §7.1.2 writes them: 8 to 15.
fn window_bits(value: Option<&str>) -> Option<u8> {
    let bits: u8 = value?.parse().ok()?;
    (8..=15).contains(&bits).then_some(bits)
}

/// Server side: picks the first permessage-deflate offer in `offers` (the
/// client's `Sec-WebSocket-Extensions` values, joined with `,`) that this
/// server can honour, and returns the agreed parameters with the header
/// value to answer with. `None` means "answer without the extension".
///
/// Offers asking the server to shrink its window below 15 bits are declined:
/// the DEFLATE backend always uses a 32 KiB window.
pub fn accept_deflate(offers: &str, config: &DeflateConfig) -> Option<(DeflateParams, String)> {
    'offers: for offer in parse_extensions(offers) {
        if !offer.name.eq_ignore_ascii_case(PERMESSAGE_DEFLATE) {
            continue;
        }
        let mut params = DeflateParams {
            server_no_context_takeover: !config.server_context_takeover,
            client_no_context_takeover: !config.client_context_takeover,
        };
        let mut seen: Vec<&str> = Vec::new();
        for (name, value) in &offer.params {
            if seen.contains(name) {
                continue 'offers; // §7.1: a repeated parameter voids the offer
            }
            seen.push(name);
            match *name {
                "server_no_context_takeover" if value.is_none() => {
                    params.server_no_context_takeover = true;
                }
                "client_no_context_takeover" if value.is_none() => {
                    params.client_no_context_takeover = true;
                }
                "server_max_window_bits" => {
                    if window_bits(*value) != Some(15) {
                        continue 'offers;
                    }
                }
                // The client may use any window; inflating with 15 bits
                // reads them all, so no answer is needed.
                "client_max_window_bits" => {
                    if value.is_some() && window_bits(*value).is_none() {
                        continue 'offers;
                    }
                }
                _ => continue 'offers,
            }
        }
        let mut answer = String::from(PERMESSAGE_DEFLATE);
        if params.server_no_context_takeover {
            answer.push_str("; server_no_context_takeover");
        }
        if params.client_no_context_takeover {
            answer.push_str("; client_no_context_takeover");
        }
        return Some((params, answer));
    }
    None
}

/// Client side: the `Sec-WebSocket-Extensions` value offering
/// permessage-deflate with `config`.
pub fn deflate_offer(config: &DeflateConfig) -> String {
    let mut offer = String::from(PERMESSAGE_DEFLATE);
    if !config.server_context_takeover {
        offer.push_str("; server_no_context_takeover");
    }
    if !config.client_context_takeover {
        offer.push_str("; client_no_context_takeover");
    }
    offer
}

/// Client side: checks the server's `Sec-WebSocket-Extensions` answer to
/// [`deflate_offer`]. `Ok(None)`: the server declined (no header, or an
/// empty one).
pub fn check_deflate_answer(
    answer: Option<&str>,
    config: &DeflateConfig,
) -> Result<Option<DeflateParams>, Error> {
    let Some(answer) = answer.filter(|a| !a.trim().is_empty()) else {
        return Ok(None);
    };
    let mut extensions = parse_extensions(answer);
    let Some(ext) = extensions.next() else {
        return Ok(None);
    };
    if extensions.next().is_some() || !ext.name.eq_ignore_ascii_case(PERMESSAGE_DEFLATE) {
        return Err(Error::Handshake(format!(
            "unrequested extension `{answer}`"
        )));
    }
    let mut params = DeflateParams {
        server_no_context_takeover: !config.server_context_takeover,
        client_no_context_takeover: !config.client_context_takeover,
    };
    for (name, value) in ext.params {
        match (name, value) {
            ("server_no_context_takeover", None) => params.server_no_context_takeover = true,
            ("client_no_context_takeover", None) => params.client_no_context_takeover = true,
            // Inflating with a 15-bit window reads any smaller one.
            ("server_max_window_bits", v) if window_bits(v).is_some() => {}
            ("client_max_window_bits", v) if window_bits(v) == Some(15) => {}
            _ => {
                return Err(Error::Handshake(format!(
                    "unsupported permessage-deflate parameter `{name}` in `{answer}`"
                )))
            }
        }
    }
    Ok(Some(params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6455_handshake_example() {
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn base64_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
    }

    #[test]
    fn server_accepts_what_browsers_and_ws_offer() {
        let config = DeflateConfig::default();
        let (params, answer) =
            accept_deflate("permessage-deflate; client_max_window_bits", &config).unwrap();
        assert_eq!(params, DeflateParams::default());
        assert_eq!(answer, "permessage-deflate");
        let (params, answer) = accept_deflate(
            "permessage-deflate; server_no_context_takeover; client_max_window_bits=\"12\"",
            &config,
        )
        .unwrap();
        assert!(params.server_no_context_takeover && !params.client_no_context_takeover);
        assert_eq!(answer, "permessage-deflate; server_no_context_takeover");
    }

    #[test]
    fn server_config_can_refuse_context_takeover() {
        let config = DeflateConfig {
            server_context_takeover: false,
            client_context_takeover: false,
            ..DeflateConfig::default()
        };
        let (params, answer) = accept_deflate("permessage-deflate", &config).unwrap();
        assert!(params.server_no_context_takeover && params.client_no_context_takeover);
        assert_eq!(
            answer,
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        );
    }

    #[test]
    fn server_declines_what_it_cannot_honour_and_takes_the_next_offer() {
        let config = DeflateConfig::default();
        assert_eq!(accept_deflate("x-webkit-deflate-frame", &config), None);
        assert_eq!(
            accept_deflate("permessage-deflate; server_max_window_bits=10", &config),
            None
        );
        assert_eq!(accept_deflate("permessage-deflate; mystery", &config), None);
        assert_eq!(
            accept_deflate(
                "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
                &config
            ),
            None
        );
        let (params, _) = accept_deflate(
            "permessage-deflate; server_max_window_bits=10, permessage-deflate; client_no_context_takeover",
            &config,
        )
        .unwrap();
        assert!(params.client_no_context_takeover);
    }

    #[test]
    fn client_checks_the_answer() {
        let config = DeflateConfig::default();
        assert_eq!(check_deflate_answer(None, &config), Ok(None));
        assert_eq!(
            check_deflate_answer(Some("permessage-deflate"), &config),
            Ok(Some(DeflateParams::default()))
        );
        let p = check_deflate_answer(
            Some("permessage-deflate; server_no_context_takeover; server_max_window_bits=12"),
            &config,
        )
        .unwrap()
        .unwrap();
        assert!(p.server_no_context_takeover);
        assert!(check_deflate_answer(
            Some("permessage-deflate; client_max_window_bits=9"),
            &config
        )
        .is_err());
        assert!(check_deflate_answer(Some("x-other"), &config).is_err());
        assert_eq!(
            deflate_offer(&DeflateConfig {
                client_context_takeover: false,
                ..config
            }),
            "permessage-deflate; client_no_context_takeover"
        );
    }
}
