//! `nostrwire migrate strfry-config`: reads a `strfry.conf` and writes the
//! equivalent `relay.toml` on standard output; every setting without an
//! equivalent is listed as a comment, with its value and why.
//!
//! strfry's format: `key = value` lines, `name { ... }` sections, `#`
//! comments, values as double-quoted strings, numbers or `true`/`false`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// `nostrwire migrate ...`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Read a strfry.conf and write the equivalent relay.toml to standard
    /// output; settings without an equivalent are listed as comments.
    StrfryConfig {
        /// The strfry.conf to read.
        file: PathBuf,
    },
}

pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::StrfryConfig { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let settings = parse(&text).with_context(|| format!("in {}", file.display()))?;
            print!("{}", to_relay_toml(&settings));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A strfry setting's value.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Text(String),
    Number(i64),
    Bool(bool),
}

impl Value {
    fn toml(&self) -> String {
        match self {
            Value::Text(t) => toml_string(t),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
        }
    }
}

fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Parses strfry's config text into dotted keys (`relay.info.name`).
fn parse(text: &str) -> anyhow::Result<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    let mut path: Vec<String> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = strip_comment(raw).trim();
        let at = || format!("line {}", n + 1);
        if line.is_empty() {
            continue;
        }
        if line == "}" {
            path.pop()
                .with_context(|| format!("{}: `}}` closes nothing", at()))?;
        } else if let Some(name) = line.strip_suffix('{') {
            let name = name.trim();
            anyhow::ensure!(is_key(name), "{}: invalid section name {name:?}", at());
            path.push(name.to_string());
        } else if let Some((key, value)) = line.split_once('=') {
            let key = key.trim();
            anyhow::ensure!(is_key(key), "{}: invalid key {key:?}", at());
            let value = value_of(value.trim()).with_context(at)?;
            let mut full = path.join(".");
            if !full.is_empty() {
                full.push('.');
            }
            full.push_str(key);
            out.insert(full, value);
        } else {
            anyhow::bail!("{}: expected `key = value`, `name {{` or `}}`", at());
        }
    }
    anyhow::ensure!(
        path.is_empty(),
        "section {:?} is not closed",
        path.join(".")
    );
    Ok(out)
}

fn is_key(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The line without its `#` comment (a `#` inside a string is kept).
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

fn value_of(text: &str) -> anyhow::Result<Value> {
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(c) => out.push(c),
                    None => anyhow::bail!("a string ends with a backslash"),
                },
                c => out.push(c),
            }
        }
        return Ok(Value::Text(out));
    }
    match text {
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        _ => text
            .parse()
            .map(Value::Number)
            .map_err(|_| anyhow::anyhow!("unrecognised value {text:?}")),
    }
}

/// strfry keys with a direct equivalent: (strfry key, section, key).
const DIRECT: &[(&str, &str, &str)] = &[
    ("relay.realIpHeader", "relay", "real_ip_header"),
    ("relay.info.name", "info", "name"),
    ("relay.info.description", "info", "description"),
    ("relay.info.pubkey", "info", "pubkey"),
    ("relay.info.contact", "info", "contact"),
    ("relay.info.icon", "info", "icon"),
    ("relay.info.banner", "info", "banner"),
    (
        "relay.maxWebsocketPayloadSize",
        "limits",
        "max_message_bytes",
    ),
    ("relay.autoPingSeconds", "websocket", "ping_seconds"),
    ("relay.maxFilterLimit", "limits", "max_limit"),
    ("relay.maxSubsPerConnection", "limits", "max_subscriptions"),
    ("relay.negentropy.maxSyncEvents", "limits", "max_sync_items"),
    ("relay.writePolicy.plugin", "policy", "plugin"),
    ("relay.compression.enabled", "websocket", "deflate"),
    (
        "relay.compression.slidingWindow",
        "websocket",
        "server_context_takeover",
    ),
    (
        "events.rejectEventsNewerThanSeconds",
        "limits",
        "future_seconds",
    ),
    (
        "events.rejectEventsOlderThanSeconds",
        "limits",
        "past_seconds",
    ),
    ("events.maxNumTags", "limits", "max_event_tags"),
];

/// Why a strfry key has no equivalent (by key prefix).
const UNMAPPED: &[(&str, &str)] = &[
    (
        "db",
        "strfry's database is not nostrwire's: `strfry export` it and `nostrwire import` \
         the file into relay.data",
    ),
    (
        "dbParams.",
        "LMDB is sized by storage.map_size_gib; readers are not limited",
    ),
    (
        "relay.nofiles",
        "set the open-file limit in the service unit (LimitNOFILE)",
    ),
    (
        "relay.numThreads.",
        "performance.ingest_threads and query_threads size the pools (0: one per core)",
    ),
    (
        "relay.logging.",
        "logging is set by NOSTRWIRE_LOG (error, warn, info, debug)",
    ),
    (
        "relay.enableTcpKeepalive",
        "TCP keep-alive is not configurable",
    ),
    (
        "relay.queryTimesliceBudgetMicroseconds",
        "queries are sliced by performance.query_slice (events, not time)",
    ),
    (
        "relay.negentropy.enabled",
        "NIP-77 is always served; limits.max_sync_sessions = 0 is not a switch",
    ),
    ("relay.info.nips", "the supported NIPs are the relay's own"),
    (
        "events.maxEventSize",
        "events are bounded by limits.max_message_bytes",
    ),
    (
        "events.maxTagValSize",
        "tag values are bounded by the message size",
    ),
    (
        "events.rejectEphemeralEventsOlderThanSeconds",
        "ephemeral events are never stored",
    ),
    (
        "events.ephemeralEventsLifetimeSeconds",
        "ephemeral events are never stored",
    ),
];

/// The relay.toml text for strfry settings.
fn to_relay_toml(settings: &BTreeMap<String, Value>) -> String {
    let mut sections: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut unmapped = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    // bind and port become one address.
    if settings.contains_key("relay.bind") || settings.contains_key("relay.port") {
        let bind = match settings.get("relay.bind") {
            Some(Value::Text(b)) => b.clone(),
            _ => "127.0.0.1".into(),
        };
        let port = match settings.get("relay.port") {
            Some(Value::Number(p)) => *p,
            _ => 7777,
        };
        let host = match bind.contains(':') {
            true => format!("[{bind}]"),
            false => bind,
        };
        sections.entry("relay").or_default().push(format!(
            "listen = {}",
            toml_string(&format!("{host}:{port}"))
        ));
        used.insert("relay.bind");
        used.insert("relay.port");
    }
    for (strfry, section, key) in DIRECT {
        let Some(value) = settings.get(*strfry) else {
            continue;
        };
        used.insert(strfry);
        // strfry's placeholder for an unset NIP-11 field.
        if *value == Value::Text("unset".into()) || *value == Value::Text(String::new()) {
            continue;
        }
        sections
            .entry(section)
            .or_default()
            .push(format!("{key} = {}", value.toml()));
    }
    for (key, value) in settings {
        if used.contains(key.as_str()) {
            continue;
        }
        let why = UNMAPPED
            .iter()
            .find(|(prefix, _)| key == prefix || (prefix.ends_with('.') && key.starts_with(prefix)))
            .map_or("no equivalent setting", |(_, why)| why);
        unmapped.push(format!("# {key} = {}: {why}", value.toml()));
    }
    let mut out = String::from(
        "# relay.toml written by `nostrwire migrate strfry-config` from a strfry.conf.\n\
         # `nostrwire relay --print-config` lists every setting and its default.\n",
    );
    for (section, lines) in &sections {
        out.push_str(&format!("\n[{section}]\n"));
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !unmapped.is_empty() {
        out.push_str("\n# strfry settings without an equivalent here:\n");
        for line in unmapped {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_strings_and_comments_are_read() {
        let text = "db = \"./db/\" # where\nrelay {\n  info {\n    name = \"a # b\"\n  }\n  port = 7778\n  x = true\n}\n";
        let s = parse(text).unwrap();
        assert_eq!(s["db"], Value::Text("./db/".into()));
        assert_eq!(s["relay.info.name"], Value::Text("a # b".into()));
        assert_eq!(s["relay.port"], Value::Number(7778));
        assert_eq!(s["relay.x"], Value::Bool(true));
    }

    #[test]
    fn malformed_text_is_an_error_not_a_guess() {
        assert!(parse("relay {\n port = 1\n").is_err());
        assert!(parse("}\n").is_err());
        assert!(parse("port = seven\n").is_err());
        assert!(parse("just words\n").is_err());
    }
}
