//! The exceptions, one per layer, each carrying the codec's stable error
//! kind (`kind`, the snake_case names of `vectors/` and `spec/nwb.md` §12).

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::PyTypeInfo;

create_exception!(
    nostrwire,
    NostrwireError,
    PyValueError,
    "Bad input refused by nostrwire; `kind` names the reason."
);
create_exception!(
    nostrwire,
    InvalidEvent,
    NostrwireError,
    "An event that does not parse strictly, or whose id or signature does not verify."
);
create_exception!(
    nostrwire,
    InvalidFilter,
    NostrwireError,
    "A NIP-01 filter the codec refuses."
);
create_exception!(
    nostrwire,
    InvalidMessage,
    NostrwireError,
    "A relay message (JSON or a binary frame) that does not decode."
);
create_exception!(
    nostrwire,
    NwbError,
    NostrwireError,
    "An nwb record, stream or dictionary set that does not decode."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NostrwireError", py.get_type::<NostrwireError>())?;
    m.add("InvalidEvent", py.get_type::<InvalidEvent>())?;
    m.add("InvalidFilter", py.get_type::<InvalidFilter>())?;
    m.add("InvalidMessage", py.get_type::<InvalidMessage>())?;
    m.add("NwbError", py.get_type::<NwbError>())?;
    Ok(())
}

/// An exception of type `T` with `kind` and `field` attributes set.
fn with_kind<T: PyTypeInfo>(message: String, kind: &str, field: Option<&str>) -> PyErr {
    Python::attach(|py| {
        let err = PyErr::new::<T, _>(message);
        let value = err.value(py);
        // Setting attributes on a fresh exception instance cannot fail.
        let _ = value.setattr("kind", kind);
        let _ = value.setattr("field", field);
        err
    })
}

/// Where a refused item was found in a longer input (a file or a batch).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Place {
    None,
    Line(u64),
    Offset(u64),
}

impl Place {
    fn suffix(self) -> String {
        match self {
            Place::None => String::new(),
            Place::Line(n) => format!(" (line {n})"),
            Place::Offset(n) => format!(" (byte offset {n})"),
        }
    }
}

/// Any failure of the layers below, before it becomes a Python exception
/// (built without the GIL, raised with it).
#[derive(Clone, Debug)]
pub(crate) enum Failure {
    Event(nostrwire_event::Error),
    Filter(nostrwire_event::Error),
    Message(nostrwire_event::Error),
    Nwb(nostrwire_wire::Error),
    /// A binary frame that decoded but is not allowed where it came.
    Frame(&'static str, &'static str),
    Io(String),
}

impl Failure {
    /// The stable kind name.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Failure::Event(e) | Failure::Filter(e) | Failure::Message(e) => e.kind().as_str(),
            Failure::Nwb(e) => e.as_str(),
            Failure::Frame(kind, _) => kind,
            Failure::Io(_) => "io",
        }
    }

    pub(crate) fn to_py_at(&self, place: Place) -> PyErr {
        let at = place.suffix();
        match self {
            Failure::Event(e) => {
                with_kind::<InvalidEvent>(format!("{e}{at}"), e.kind().as_str(), e.field())
            }
            Failure::Filter(e) => {
                with_kind::<InvalidFilter>(format!("{e}{at}"), e.kind().as_str(), e.field())
            }
            Failure::Message(e) => {
                with_kind::<InvalidMessage>(format!("{e}{at}"), e.kind().as_str(), e.field())
            }
            Failure::Nwb(e) => with_kind::<NwbError>(format!("{e}{at}"), e.as_str(), None),
            Failure::Frame(kind, text) => {
                with_kind::<InvalidMessage>(format!("{text} ({kind}){at}"), kind, None)
            }
            Failure::Io(text) => pyo3::exceptions::PyOSError::new_err(format!("{text}{at}")),
        }
    }

    pub(crate) fn to_py(&self) -> PyErr {
        self.to_py_at(Place::None)
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        f.to_py()
    }
}
