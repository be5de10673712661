//! `scan` and `nwb.open`: a JSON Lines or nwb file through a memory map,
//! filtered (NIP-01) and optionally verified in Rust, in batches on every
//! core the caller allows, with the GIL released (stages 1–4 for a dump).

use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use memmap2::Mmap;
use nostrwire_event::{matches_any, Event, EventRef, Filter, SignedFields};
use nostrwire_wire::compress::{self, RecordDecompressor};
use nostrwire_wire::{frame, EventView, Limits, COMPRESSED_V1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::{Failure, Place};
use crate::event::PyEvent;
use crate::nwb::PyDictSet;
use crate::par;

/// Most items and input bytes read per batch (between two trips into
/// Python). Large, because each batch ends in a join of its threads, and
/// on a busy machine a join waits for a thread to be scheduled at all.
const BATCH: usize = 65_536;
const BATCH_BYTES: usize = 64 << 20;
/// Items per unit of work handed to a thread.
const BLOCK: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    JsonLines,
    Nwb,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::JsonLines => "jsonl",
            Format::Nwb => "nwb",
        }
    }

    /// JSON Lines start with `{` (or blank lines); an nwb stream starts with
    /// a record length of at least 142, whose first varint byte is ≥ 0x80.
    fn sniff(data: &[u8]) -> Format {
        match data.first() {
            Some(b) if *b >= 0x80 => Format::Nwb,
            _ => Format::JsonLines,
        }
    }
}

/// What became of one line or record.
enum Outcome {
    Skipped,
    Matched(Event),
    Invalid(Failure, Place),
}

/// Filter first (reading only the fields it needs), then verify.
fn judge<E: SignedFields>(event: &E, filters: &[Filter], verify: bool) -> Result<bool, Failure> {
    if !filters.is_empty() && !matches_any(filters, event) {
        return Ok(false);
    }
    if verify {
        event.verify().map_err(Failure::Event)?;
    }
    Ok(true)
}

/// An iterator of the events of a file that match its filters.
#[pyclass(module = "nostrwire", name = "Scanner")]
pub(crate) struct Scanner {
    map: Option<Mmap>,
    pos: usize,
    line: u64,
    format: Format,
    filters: Vec<Filter>,
    verify: bool,
    skip_invalid: bool,
    threads: usize,
    dictionaries: Option<Arc<compress::DictSet>>,
    ready: VecDeque<Event>,
    error: Option<(Failure, Place)>,
    read: u64,
    matched: u64,
    invalid: u64,
}

impl Scanner {
    fn at_end(&self) -> bool {
        self.map.as_ref().is_none_or(|m| self.pos >= m.len())
    }

    /// Reads the next batch into `ready` (and `error`).
    fn fill(&mut self) {
        let Some(map) = self.map.as_ref() else {
            return;
        };
        let data: &[u8] = map;
        let mut items: Vec<(usize, usize, Place)> = Vec::with_capacity(BATCH);
        let mut framing = None;
        let first = self.pos;
        while items.len() < BATCH && self.pos - first < BATCH_BYTES && self.pos < data.len() {
            let start = self.pos;
            match self.format {
                Format::JsonLines => {
                    let end =
                        memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |i| start + i);
                    self.pos = (end + 1).min(data.len());
                    self.line += 1;
                    if !data[start..end].trim_ascii().is_empty() {
                        items.push((start, end, Place::Line(self.line)));
                    }
                }
                Format::Nwb => {
                    match frame::split_frame(&data[start..], Limits::DEFAULT.max_record_bytes) {
                        Ok((record, rest)) => {
                            let end = data.len() - rest.len();
                            items.push((end - record.len(), end, Place::Offset(start as u64)));
                            self.pos = end;
                        }
                        Err(e) => {
                            // A stream cannot be reframed after a bad length.
                            framing = Some((Failure::Nwb(e), Place::Offset(start as u64)));
                            self.pos = data.len();
                        }
                    }
                }
            }
        }
        let (filters, verify, format) = (&self.filters[..], self.verify, self.format);
        let set = self.dictionaries.as_deref();
        let outcomes = par::map_blocks(&items, self.threads, BLOCK, |block| {
            // A zstd context only for blocks that hold compressed records.
            let mut decompressor: Option<RecordDecompressor<'_>> = None;
            block
                .iter()
                .map(|&(start, end, at)| {
                    let bytes = &data[start..end];
                    let judged = match format {
                        Format::JsonLines => EventRef::parse(bytes)
                            .map_err(Failure::Event)
                            .and_then(|e| Ok(judge(&e, filters, verify)?.then(|| e.to_event()))),
                        Format::Nwb => {
                            let record = if bytes.first() == Some(&COMPRESSED_V1) {
                                if decompressor.is_none() {
                                    match RecordDecompressor::new(set) {
                                        Ok(d) => decompressor = Some(d),
                                        Err(e) => {
                                            return Outcome::Invalid(Failure::Io(e.to_string()), at)
                                        }
                                    }
                                }
                                let d = decompressor.as_mut().expect("just made");
                                d.record(bytes, &Limits::DEFAULT)
                            } else {
                                Ok(bytes)
                            };
                            record
                                .and_then(EventView::decode)
                                .map_err(Failure::Nwb)
                                .and_then(|e| Ok(judge(&e, filters, verify)?.then(|| e.to_event())))
                        }
                    };
                    match judged {
                        Ok(Some(event)) => Outcome::Matched(event),
                        Ok(None) => Outcome::Skipped,
                        Err(f) => Outcome::Invalid(f, at),
                    }
                })
                .collect()
        });
        for outcome in outcomes {
            self.read += 1;
            match outcome {
                Outcome::Skipped => {}
                Outcome::Matched(event) => {
                    self.matched += 1;
                    self.ready.push_back(event);
                }
                Outcome::Invalid(failure, at) => {
                    self.invalid += 1;
                    if !self.skip_invalid {
                        // Stop here: what came before is yielded, then the error.
                        self.error = Some((failure, at));
                        self.map = None;
                        return;
                    }
                }
            }
        }
        if let Some(err) = framing {
            self.invalid += 1;
            if !self.skip_invalid {
                self.error = Some(err);
            }
            self.map = None;
        }
    }

    /// The next event, reading batches as needed; `Ok(None)` at the end.
    fn next_event(&mut self, py: Python<'_>) -> PyResult<Option<Event>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            if let Some((failure, at)) = self.error.take() {
                return Err(failure.to_py_at(at));
            }
            if self.at_end() {
                self.map = None;
                return Ok(None);
            }
            py.detach(|| self.fill());
        }
    }
}

#[pymethods]
impl Scanner {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyEvent>> {
        Ok(self.next_event(py)?.map(PyEvent::new))
    }

    /// Up to `n` events (fewer only at the end, or before an error, which
    /// the next call raises): one trip into Python for many events.
    fn next_batch(&mut self, py: Python<'_>, n: usize) -> PyResult<Vec<PyEvent>> {
        let mut out = Vec::with_capacity(n.min(BATCH));
        while out.len() < n {
            // An error waiting behind these events is raised by the next call.
            if !out.is_empty() && self.ready.is_empty() && self.error.is_some() {
                break;
            }
            match self.next_event(py)? {
                Some(event) => out.push(PyEvent::new(event)),
                None => break,
            }
        }
        Ok(out)
    }

    /// Lines or records read so far (blank lines excepted).
    #[getter]
    fn events_read(&self) -> u64 {
        self.read
    }

    /// Events that matched the filter (and verified, when asked) so far.
    #[getter]
    fn events_matched(&self) -> u64 {
        self.matched
    }

    /// Lines or records refused so far (skipped with `errors="skip"`).
    #[getter]
    fn invalid(&self) -> u64 {
        self.invalid
    }

    /// `"jsonl"` or `"nwb"`.
    #[getter]
    fn format(&self) -> &'static str {
        self.format.name()
    }

    /// Unmaps the file; iteration ends.
    fn close(&mut self) {
        self.map = None;
        self.ready.clear();
        self.error = None;
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &mut self,
        _ty: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> bool {
        self.close();
        false
    }
}

/// Opens `path` for scanning. `filters` are NIP-01 filters as JSON text
/// (none: every event); `format` is `"auto"`, `"jsonl"` or `"nwb"`.
#[pyfunction]
#[pyo3(signature = (path, filters, verify, skip_invalid, threads, format, dictionaries))]
#[allow(clippy::too_many_arguments)]
fn _scan(
    path: PathBuf,
    filters: Vec<String>,
    verify: bool,
    skip_invalid: bool,
    threads: Option<usize>,
    format: &str,
    dictionaries: Option<&PyDictSet>,
) -> PyResult<Scanner> {
    let filters = filters
        .iter()
        .map(|f| Filter::from_json(f.as_bytes()).map_err(|e| Failure::Filter(e).to_py()))
        .collect::<PyResult<Vec<_>>>()?;
    let file = File::open(&path)?;
    // An empty file cannot be mapped, and holds no events.
    let map = if file.metadata()?.len() == 0 {
        None
    } else {
        // SAFETY: the map is read-only; a file truncated by another process
        // while it is scanned is outside what a reader can defend against
        // (the same holds for every memory-mapped reader), documented.
        Some(unsafe { Mmap::map(&file)? })
    };
    let format = match format {
        "auto" => Format::sniff(map.as_deref().unwrap_or(&[])),
        "jsonl" => Format::JsonLines,
        "nwb" => Format::Nwb,
        other => {
            return Err(PyValueError::new_err(format!(
                "format must be \"auto\", \"jsonl\" or \"nwb\", not {other:?}"
            )))
        }
    };
    #[cfg(unix)]
    if let Some(map) = &map {
        let _ = map.advise(memmap2::Advice::Sequential);
    }
    Ok(Scanner {
        map,
        pos: 0,
        line: 0,
        format,
        filters,
        verify,
        skip_invalid,
        threads: par::threads(threads),
        dictionaries: dictionaries.map(|d| Arc::clone(&d.inner)),
        ready: VecDeque::new(),
        error: None,
        read: 0,
        matched: 0,
        invalid: 0,
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Scanner>()?;
    m.add_function(wrap_pyfunction!(_scan, m)?)?;
    Ok(())
}
