//! `nostrwire.nwb`: records ↔ events, dictionary sets, writing streams
//! (stages 2–3; reading files is `scan.rs`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use nostrwire_event::{EventRef, SignedFields};
use nostrwire_wire::compress::{self, RecordCompressor, RecordDecompressor};
use nostrwire_wire::{encode_json_event_into, frame, EventView, Limits};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::Failure;
use crate::event::PyEvent;
use crate::input::Input;

/// A set of zstd dictionaries for compressed records (`spec/nwb.md` §11.2),
/// as written by `nostrwire dict train`.
#[pyclass(module = "nostrwire.nwb", name = "DictSet", frozen)]
#[derive(Debug, Clone)]
pub(crate) struct PyDictSet {
    pub(crate) inner: Arc<compress::DictSet>,
}

#[pymethods]
impl PyDictSet {
    /// Parses the bytes of a dictionary set file.
    #[new]
    fn new(py: Python<'_>, data: Input) -> PyResult<PyDictSet> {
        let bytes = data.as_bytes();
        let set = py
            .detach(|| compress::DictSet::from_bytes(bytes))
            .map_err(|e| Failure::Nwb(e).to_py())?;
        Ok(PyDictSet {
            inner: Arc::new(set),
        })
    }

    /// Reads a dictionary set file.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<PyDictSet> {
        let bytes = std::fs::read(&path)?;
        let set = py
            .detach(|| compress::DictSet::from_bytes(&bytes))
            .map_err(|e| Failure::Nwb(e).to_py())?;
        Ok(PyDictSet {
            inner: Arc::new(set),
        })
    }

    /// The zstd level records are compressed at.
    #[getter]
    fn level(&self) -> i32 {
        self.inner.level()
    }

    /// `(id, kind)` of each dictionary; kind `None` is the fallback.
    fn dictionaries(&self) -> Vec<(u32, Option<u16>)> {
        self.inner
            .dictionaries()
            .iter()
            .map(|d| (d.id(), d.kind().map(|k| k.as_u16())))
            .collect()
    }

    fn __len__(&self) -> usize {
        self.inner.dictionaries().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "DictSet(level={}, dictionaries={})",
            self.inner.level(),
            self.inner.dictionaries().len()
        )
    }
}

/// Appends the record of `event` (an `Event`, or event JSON) to `out`.
fn record_into(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    if let Ok(event) = obj.cast::<PyEvent>() {
        event
            .get()
            .record_into(out)
            .map_err(|e| Failure::Nwb(e).to_py())
    } else {
        let input: Input = obj.extract()?;
        let event = EventRef::parse(input.as_bytes()).map_err(|e| Failure::Event(e).to_py())?;
        encode_json_event_into(&event, out);
        Ok(())
    }
}

/// The nwb record of an event (an `Event`, or event JSON as `str` or
/// bytes-like, parsed strictly but not verified). With `dictionaries`, the
/// stored form: a compressed record when that is smaller.
#[pyfunction]
#[pyo3(signature = (event, dictionaries = None))]
fn encode<'py>(
    py: Python<'py>,
    event: &Bound<'py, PyAny>,
    dictionaries: Option<&PyDictSet>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut record = Vec::new();
    record_into(event, &mut record)?;
    let Some(set) = dictionaries else {
        return Ok(PyBytes::new(py, &record));
    };
    let mut stored = Vec::with_capacity(record.len());
    RecordCompressor::new(&set.inner)
        .and_then(|mut c| c.compress_into(&record, &mut stored))
        .map_err(|e| Failure::Io(e.to_string()).to_py())?;
    Ok(PyBytes::new(py, &stored))
}

/// Decodes one event record, enforcing every canonical rule; by default
/// also verifies the id and signature. A stored record (raw, or compressed
/// as `spec/nwb.md` §11 describes) is read with `stored=True` or with
/// `dictionaries`; otherwise a compressed record is refused
/// (`bad_version`), as a plain record decoder must.
#[pyfunction]
#[pyo3(signature = (data, verify = true, dictionaries = None, stored = false))]
fn decode(
    py: Python<'_>,
    data: Input,
    verify: bool,
    dictionaries: Option<&PyDictSet>,
    stored: bool,
) -> PyResult<PyEvent> {
    let bytes = data.as_bytes();
    let set = dictionaries.map(|d| d.inner.as_ref());
    let event = py.detach(|| {
        let mut decompressor = if stored || set.is_some() {
            Some(RecordDecompressor::new(set).map_err(|e| Failure::Io(e.to_string()))?)
        } else {
            None
        };
        let record = match decompressor.as_mut() {
            Some(d) => d.record(bytes, &Limits::DEFAULT).map_err(Failure::Nwb)?,
            None => bytes,
        };
        let view = EventView::decode(record).map_err(Failure::Nwb)?;
        if verify {
            view.verify().map_err(Failure::Event)?;
        }
        Ok::<_, Failure>(view.to_event())
    })?;
    Ok(PyEvent::new(event))
}

/// Writes `events` (each an `Event`, or event JSON) to `path` as an nwb
/// stream (each record preceded by its length, `spec/nwb.md` §10),
/// compressed with `dictionaries` when given. Returns the number written.
/// Refuses an event that does not parse before writing it, leaving the
/// ones before it in the file.
#[pyfunction]
#[pyo3(signature = (path, events, dictionaries = None))]
fn write(
    path: PathBuf,
    events: &Bound<'_, PyAny>,
    dictionaries: Option<&PyDictSet>,
) -> PyResult<u64> {
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&path)?);
    let mut compressor = match dictionaries {
        Some(set) => Some(
            RecordCompressor::new(&set.inner).map_err(|e| Failure::Io(e.to_string()).to_py())?,
        ),
        None => None,
    };
    let (mut record, mut stored) = (Vec::new(), Vec::new());
    let mut written = 0u64;
    for obj in events.try_iter()? {
        record.clear();
        record_into(&obj?, &mut record)?;
        let bytes = match compressor.as_mut() {
            Some(c) => {
                stored.clear();
                c.compress_into(&record, &mut stored)
                    .map_err(|e| Failure::Io(e.to_string()).to_py())?;
                &stored
            }
            None => &record,
        };
        frame::write_frame(&mut out, bytes)?;
        written += 1;
    }
    out.flush()?;
    Ok(written)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDictSet>()?;
    m.add_function(wrap_pyfunction!(encode, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(write, m)?)?;
    Ok(())
}
