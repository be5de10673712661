//! The `nostrwire stream --config FILE` file: several upstreams, each with
//! its URLs, filter and direction, as strfry's `router` takes them
//! (docs/operations.md, "Streaming with other relays").
//!
//! ```toml
//! local = "ws://127.0.0.1:7777"   # optional: --local, else the relay config
//! state = "stream-state.json"     # optional: --state, else beside the database
//! overlap = 600                   # optional: --overlap
//!
//! [streams.friends]
//! dir = "both"                    # down, up or both
//! urls = ["ws://relay.example:7777"]
//! filter = { kinds = [0, 1, 3] }  # optional: every event
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use nostrwire_event::Filter;

use crate::cmd::sync::Direction;

/// One `[streams.NAME]` group.
#[derive(Debug)]
pub struct Group {
    /// Its name, for log lines.
    pub name: String,
    /// Which way events move.
    pub dir: Direction,
    /// The upstream relays, each streamed on its own.
    pub urls: Vec<String>,
    /// The filter, checked ([`super::stream_filter`]).
    pub filter: Filter,
}

/// A read stream configuration file.
#[derive(Debug, Default)]
pub struct RouterConfig {
    /// The local relay's URL, if the file names it.
    pub local: Option<String>,
    /// The state file, if the file names it (relative to the file's folder).
    pub state: Option<PathBuf>,
    /// Seconds of overlap, if the file sets them.
    pub overlap: Option<u64>,
    /// The stream groups, in name order.
    pub groups: Vec<Group>,
}

impl RouterConfig {
    /// Reads and checks the file.
    pub fn load(path: &Path) -> anyhow::Result<RouterConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new(""));
        RouterConfig::parse(&text, base)
            .with_context(|| format!("invalid stream config {}", path.display()))
    }

    fn parse(text: &str, base: &Path) -> anyhow::Result<RouterConfig> {
        let table: toml::Table = text.parse()?;
        let mut config = RouterConfig::default();
        for (key, value) in &table {
            match key.as_str() {
                "local" => config.local = Some(string(value, "local")?),
                "state" => config.state = Some(base.join(string(value, "state")?)),
                "overlap" => {
                    config.overlap = Some(
                        value
                            .as_integer()
                            .and_then(|n| u64::try_from(n).ok())
                            .context("overlap: a number of seconds")?,
                    )
                }
                "streams" => {
                    let streams = value
                        .as_table()
                        .context("streams: a table of [streams.NAME] groups")?;
                    for (name, group) in streams {
                        config.groups.push(
                            group_of(name, group).with_context(|| format!("[streams.{name}]"))?,
                        );
                    }
                }
                other => bail!("unknown key {other:?} (local, state, overlap, streams)"),
            }
        }
        if config.groups.is_empty() {
            bail!("no [streams.NAME] group");
        }
        Ok(config)
    }
}

fn string(value: &toml::Value, key: &str) -> anyhow::Result<String> {
    value
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("{key}: a string"))
}

fn group_of(name: &str, value: &toml::Value) -> anyhow::Result<Group> {
    let table = value.as_table().context("a table")?;
    let mut dir = None;
    let mut urls = Vec::new();
    let mut filter = Filter::new();
    for (key, value) in table {
        match key.as_str() {
            "dir" => {
                dir = Some(match string(value, "dir")?.as_str() {
                    "down" => Direction::Down,
                    "up" => Direction::Up,
                    "both" => Direction::Both,
                    other => bail!("dir: {other:?} is not down, up or both"),
                })
            }
            "urls" => {
                let list = value.as_array().context("urls: a list of ws:// URLs")?;
                for url in list {
                    urls.push(string(url, "urls")?);
                }
            }
            "filter" => {
                let json = json_of(value)?.to_string();
                filter = super::stream_filter(&json)?;
            }
            other => bail!("unknown key {other:?} (dir, urls, filter)"),
        }
    }
    let dir = dir.context("no dir (down, up or both)")?;
    if urls.is_empty() {
        bail!("no urls");
    }
    Ok(Group {
        name: name.to_string(),
        dir,
        urls,
        filter,
    })
}

/// A TOML value as the JSON value a NIP-01 filter is read from.
fn json_of(value: &toml::Value) -> anyhow::Result<serde_json::Value> {
    Ok(match value {
        toml::Value::String(s) => s.clone().into(),
        toml::Value::Integer(n) => (*n).into(),
        toml::Value::Boolean(b) => (*b).into(),
        toml::Value::Array(items) => items.iter().map(json_of).collect::<Result<_, _>>()?,
        toml::Value::Table(table) => table
            .iter()
            .map(|(k, v)| Ok((k.clone(), json_of(v)?)))
            .collect::<anyhow::Result<serde_json::Map<_, _>>>()?
            .into(),
        toml::Value::Float(_) | toml::Value::Datetime(_) => {
            bail!("filter: {value} has no place in a NIP-01 filter")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_with_their_filters_and_directions() {
        let config = RouterConfig::parse(
            r##"
            local = "ws://127.0.0.1:7000"
            state = "cursors.json"
            [streams.a]
            dir = "down"
            urls = ["ws://127.0.0.1:7001", "ws://127.0.0.1:7002"]
            filter = { kinds = [1, 7], "#t" = ["nostr"] }
            [streams.b]
            dir = "both"
            urls = ["ws://127.0.0.1:7003"]
            "##,
            Path::new("/etc/nostrwire"),
        )
        .unwrap();
        assert_eq!(config.local.as_deref(), Some("ws://127.0.0.1:7000"));
        assert_eq!(
            config.state.as_deref(),
            Some(Path::new("/etc/nostrwire/cursors.json"))
        );
        assert_eq!(config.groups.len(), 2);
        let a = &config.groups[0];
        assert_eq!(
            (a.name.as_str(), a.dir, a.urls.len()),
            ("a", Direction::Down, 2)
        );
        assert_eq!(
            a.filter,
            Filter::from_json(br##"{"kinds":[1,7],"#t":["nostr"]}"##).unwrap()
        );
        assert_eq!(config.groups[1].filter, Filter::new());
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            ("[streams.a]\nurls = [\"ws://x\"]", "no dir"),
            (
                "[streams.a]\ndir = \"sideways\"\nurls = [\"ws://x\"]",
                "sideways",
            ),
            ("[streams.a]\ndir = \"up\"", "no urls"),
            (
                "[streams.a]\ndir = \"up\"\nurls = [\"ws://x\"]\nfilters = {}",
                "filters",
            ),
            (
                "[streams.a]\ndir = \"up\"\nurls = [\"ws://x\"]\nfilter = { kinds = \"1\" }",
                "kinds",
            ),
            ("port = 1", "unknown key \"port\""),
            ("", "no [streams.NAME] group"),
        ];
        for (text, expected) in cases {
            let err = format!(
                "{:#}",
                RouterConfig::parse(text, Path::new("")).unwrap_err()
            );
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
