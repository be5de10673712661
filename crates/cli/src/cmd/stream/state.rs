//! The stream's state file: one cursor (a `created_at`, in seconds) per
//! stream direction, written whole to a temporary file and renamed over the
//! old one, so a kill at any moment leaves either the old or the new file.
//!
//! A cursor on disk is never ahead of the cursor in memory (it is written
//! after it advances), and a cursor only moves past events the destination
//! acknowledged, so a state file that lags behind only means more overlap
//! on the next start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;

/// The cursors of every stream direction of one process.
#[derive(Debug)]
pub struct State {
    path: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    cursors: BTreeMap<String, u64>,
    dirty: bool,
}

impl State {
    /// Reads the state file; a missing file is an empty state.
    pub fn load(path: &Path) -> anyhow::Result<State> {
        let cursors = match std::fs::read(path) {
            Ok(bytes) => parse(&bytes).with_context(|| {
                format!(
                    "{} is not a stream state file (remove it to start from now)",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", path.display()));
            }
        };
        Ok(State {
            path: path.to_path_buf(),
            inner: Mutex::new(Inner {
                cursors,
                dirty: false,
            }),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cursor of `key`, or `start` (recorded as its cursor) when the
    /// state has none.
    pub fn cursor_or(&self, key: &str, start: u64) -> u64 {
        let mut inner = self.inner.lock().expect("state lock");
        if let Some(&cursor) = inner.cursors.get(key) {
            return cursor;
        }
        inner.cursors.insert(key.to_string(), start);
        inner.dirty = true;
        start
    }

    /// Moves the cursor of `key` forward to `cursor` (never back).
    pub fn advance(&self, key: &str, cursor: u64) {
        let mut inner = self.inner.lock().expect("state lock");
        let entry = inner.cursors.entry(key.to_string()).or_default();
        if cursor > *entry {
            *entry = cursor;
            inner.dirty = true;
        }
    }

    /// Writes the file if a cursor changed since the last write.
    pub fn save(&self) -> anyhow::Result<()> {
        let text = {
            let mut inner = self.inner.lock().expect("state lock");
            if !inner.dirty {
                return Ok(());
            }
            inner.dirty = false;
            let cursors: serde_json::Map<String, serde_json::Value> = inner
                .cursors
                .iter()
                .map(|(k, v)| (k.clone(), (*v).into()))
                .collect();
            serde_json::json!({ "version": 1, "cursors": cursors }).to_string()
        };
        let tmp = self.path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&tmp, text.as_bytes())?;
            std::fs::rename(&tmp, &self.path)
        };
        write().with_context(|| format!("cannot write {}", self.path.display()))
    }
}

fn parse(bytes: &[u8]) -> anyhow::Result<BTreeMap<String, u64>> {
    let value: serde_json::Value = serde_json::from_slice(bytes)?;
    if value["version"] != 1 {
        anyhow::bail!("unknown version {}", value["version"]);
    }
    let Some(cursors) = value["cursors"].as_object() else {
        anyhow::bail!("no \"cursors\" object");
    };
    cursors
        .iter()
        .map(|(k, v)| match v.as_u64() {
            Some(n) => Ok((k.clone(), n)),
            None => anyhow::bail!("cursor {k:?} is not a number of seconds"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_survive_a_reload_and_never_move_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db").join("stream-state.json");
        let state = State::load(&path).unwrap();
        assert_eq!(state.cursor_or("down ws://a", 100), 100);
        state.advance("down ws://a", 150);
        state.advance("down ws://a", 120);
        state.save().unwrap();
        let again = State::load(&path).unwrap();
        assert_eq!(again.cursor_or("down ws://a", 999), 150);
        assert_eq!(again.cursor_or("up ws://a", 7), 7);
    }

    #[test]
    fn a_file_that_is_not_a_state_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{\"cursors\":{\"a\":\"x\"},\"version\":1}").unwrap();
        let err = format!("{:#}", State::load(&path).unwrap_err());
        assert!(err.contains("not a stream state file"), "{err}");
        assert!(err.contains("not a number"), "{err}");
    }
}
