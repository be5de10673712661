//! The NIP-11 relay information document, built from the configuration so it
//! advertises exactly what is enabled.

use serde_json::json;

use crate::config::Config;

/// NIPs this relay implements, apart from those that can be turned off.
pub const SUPPORTED_NIPS: &[u32] = &[1, 9, 11, 40, 45, 62, 77];

/// NIPs this relay implements with `config`, in order.
pub fn supported_nips(config: &Config) -> Vec<u32> {
    let mut nips = SUPPORTED_NIPS.to_vec();
    if config.search.enabled {
        nips.push(50);
    }
    if config.auth.enabled {
        nips.extend([42, 70]);
    }
    if config.policy.min_pow_difficulty > 0 {
        nips.push(13);
    }
    if !config.admin.pubkeys.is_empty() {
        nips.extend([86, 98]);
    }
    nips.sort_unstable();
    nips
}

/// The document as JSON text; `dictionaries` names the dictionary sets the
/// relay serves (`nostrwire.v2`), the current one first.
pub fn document(config: &Config, dictionaries: &[String]) -> String {
    let limits = &config.limits;
    let mut doc = json!({
        "name": config.info.name,
        "description": config.info.description,
        "supported_nips": supported_nips(config),
        "software": "https://github.com/nostrwire/nostrwire",
        "version": env!("CARGO_PKG_VERSION"),
        "limitation": {
            "max_message_length": limits.max_message_bytes,
            "max_subscriptions": limits.max_subscriptions,
            "max_filters": limits.max_filters,
            "max_limit": limits.max_limit,
            "default_limit": limits.default_limit,
            "max_subid_length": nostrwire_event::message::MAX_SUBSCRIPTION_ID_CHARS,
            "max_event_tags": limits.max_event_tags,
            "max_content_length": limits.max_message_bytes,
            "auth_required": config.auth.write_requires_auth,
            "payment_required": false,
            "restricted_writes": config.auth.write_requires_auth
                || !config.policy.kinds_allow.is_empty()
                || !config.policy.kinds_deny.is_empty()
                || !config.policy.pubkeys_allow.is_empty()
                || !config.policy.plugin.as_os_str().is_empty(),
        },
    });
    if config.websocket.binary {
        doc["nostrwire"] = json!({
            "transports": [
                nostrwire_wire::transport::SUBPROTOCOL_V2,
                nostrwire_wire::transport::SUBPROTOCOL,
            ],
            "dictionaries": dictionaries,
        });
    }
    if config.policy.min_pow_difficulty > 0 {
        doc["limitation"]["min_pow_difficulty"] = json!(config.policy.min_pow_difficulty);
    }
    if limits.future_seconds > 0 {
        doc["limitation"]["created_at_upper_limit"] = json!(limits.future_seconds);
    }
    if limits.past_seconds > 0 {
        doc["limitation"]["created_at_lower_limit"] = json!(limits.past_seconds);
    }
    // Optional fields are left out when not set, as NIP-11 suggests.
    let info = &config.info;
    for (key, value) in [
        ("pubkey", &info.pubkey),
        ("contact", &info.contact),
        ("icon", &info.icon),
        ("banner", &info.banner),
        ("terms_of_service", &info.terms_of_service),
        ("privacy_policy", &info.privacy_policy),
        ("posting_policy", &info.posting_policy),
    ] {
        if !value.is_empty() {
            doc[key] = json!(value);
        }
    }
    for (key, values) in [
        ("relay_countries", &info.relay_countries),
        ("language_tags", &info.language_tags),
        ("tags", &info.tags),
    ] {
        if !values.is_empty() {
            doc[key] = json!(values);
        }
    }
    doc.to_string()
}
