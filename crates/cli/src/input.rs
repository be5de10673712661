//! Input helpers shared by subcommands: `FILE|-` arguments and a line reader
//! that never buffers more than a fixed limit per line.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Opens `path`, or standard input for `-` or no path.
pub fn open(path: Option<&Path>) -> anyhow::Result<Box<dyn BufRead>> {
    match path {
        None => Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin()))),
        Some(p) if p.as_os_str() == "-" => {
            Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin())))
        }
        Some(p) => {
            let file = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
        }
    }
}

/// `path` made absolute when it names a file; else an error that says
/// where a relative path was looked for and names `flag`, which sets it
/// (the defaults under `testdata/` are relative, read from the repository
/// root).
pub fn input_file(path: &Path, flag: &str) -> anyhow::Result<PathBuf> {
    if path.is_file() {
        return std::path::absolute(path).with_context(|| format!("{}", path.display()));
    }
    if path.is_absolute() {
        anyhow::bail!("{}: no such file (given by {flag})", path.display());
    }
    let cwd = std::env::current_dir().map_or_else(|_| "?".into(), |d| d.display().to_string());
    anyhow::bail!(
        "{}: no such file in the current directory ({cwd}); run from the repository root or give {flag} FILE",
        path.display()
    )
}

/// One line of input.
#[derive(Debug)]
pub enum Line {
    /// The line's bytes, without the newline (and without a trailing `\r`).
    Text(Vec<u8>),
    /// The line was longer than the limit; its bytes were skipped.
    TooLong,
}

/// Reads lines of at most `max` bytes, skipping (not buffering) longer ones.
#[derive(Debug)]
pub struct Lines<R> {
    reader: R,
    max: usize,
    consumed: u64,
}

impl<R: BufRead> Lines<R> {
    /// A line reader over `reader`.
    pub fn new(reader: R, max: usize) -> Self {
        Lines {
            reader,
            max,
            consumed: 0,
        }
    }

    /// Bytes of input taken so far (lines and their newlines): progress
    /// through a file of known size.
    pub fn bytes_read(&self) -> u64 {
        self.consumed
    }

    /// The next line, or `None` at end of input.
    pub fn next_line(&mut self) -> io::Result<Option<Line>> {
        let mut line = Vec::new();
        let mut too_long = false;
        let mut any = false;
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            any = true;
            let (chunk, done) = match memchr(buf) {
                Some(i) => (&buf[..i], Some(i + 1)),
                None => (buf, None),
            };
            if !too_long {
                if line.len() + chunk.len() > self.max {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            let consumed = done.unwrap_or(buf.len());
            self.reader.consume(consumed);
            self.consumed += consumed as u64;
            if done.is_some() {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        if too_long {
            return Ok(Some(Line::TooLong));
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(Some(Line::Text(line)))
    }
}

fn memchr(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// Reads a whole file into memory (for corpora).
pub fn read_all(path: &Path) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    File::open(path)
        .with_context(|| format!("cannot open {}", path.display()))?
        .read_to_end(&mut out)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_lines() {
        let data = b"ab\r\ncdefgh\n\nij";
        let mut lines = Lines::new(BufReader::with_capacity(3, &data[..]), 4);
        let mut out = Vec::new();
        let mut read = Vec::new();
        while let Some(line) = lines.next_line().unwrap() {
            out.push(match line {
                Line::Text(t) => String::from_utf8(t).unwrap(),
                Line::TooLong => "<long>".into(),
            });
            read.push(lines.bytes_read());
        }
        assert_eq!(out, ["ab", "<long>", "", "ij"]);
        // Newlines, `\r` and skipped bytes all count.
        assert_eq!(read, [4, 11, 12, 14]);
    }
}
