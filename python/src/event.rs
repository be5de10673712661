//! `Event`, `Keys`, `event_id` and `verify_many` (stages 3–4 for Python).

use std::borrow::Cow;

use nostrwire_event::message::write;
use nostrwire_event::{
    Event, EventRef, Keys, Kind, PreimageFields, PublicKey, SignedFields, Tag, Timestamp,
    UnsignedEvent,
};
use nostrwire_wire::{EventView, Limits};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::errors::Failure;
use crate::input::Input;
use crate::par;

/// Inputs longer than this are parsed with the GIL released even when no
/// signature is checked.
const DETACH_BYTES: usize = 64 * 1024;

/// How an event is held.
enum Repr {
    /// Signed here, decoded from nwb, read from a file or from a relay.
    Owned(Event),
    /// Parsed from the JSON the caller gave, which is kept with the
    /// parser's view into it: nothing is copied or decoded until asked for.
    Json {
        /// Borrows `_source`'s bytes. They are on the heap (a Python object,
        /// or a Rust allocation, that `_source` holds and never changes), so
        /// they stay put when `Repr` moves, and live as long as it does;
        /// the `'static` never leaves this type (see [`shorten`]).
        view: EventRef<'static>,
        /// Held for `view`, never read.
        _source: Input,
    },
    /// An nwb record inside a binary frame from a relay, kept the same way.
    Nwb {
        /// Borrows `_source`'s bytes, as `Json::view` does.
        view: EventView<'static>,
        /// Held for `view`, never read.
        _source: Input,
    },
}

/// A view into bytes that an [`Input`] holds, before the two are joined.
pub(crate) enum Borrowed<'a> {
    Json(EventRef<'a>),
    Nwb(EventView<'a>),
}

/// The view with the lifetime of the borrow of its holder.
fn shorten<'a>(view: &'a EventRef<'static>) -> &'a EventRef<'a> {
    view
}

/// As [`shorten`], for nwb views.
fn shorten_nwb<'a>(view: &'a EventView<'static>) -> &'a EventView<'a> {
    view
}

/// Runs `$body` with `$e` bound to the event, whichever its representation.
macro_rules! with_event {
    ($self:expr, $e:ident => $body:expr) => {
        match &$self.repr {
            Repr::Owned($e) => $body,
            Repr::Json { view, .. } => {
                let $e = shorten(view);
                $body
            }
            Repr::Nwb { view, .. } => {
                let $e = shorten_nwb(view);
                $body
            }
        }
    };
}

/// Strict parse, then (optionally) the id and the signature.
fn parse_json(source: Input, verify: bool) -> Result<PyEvent, Failure> {
    // SAFETY: `view` is joined with `source` below, or dropped.
    let view = EventRef::parse(unsafe { source.unbound_bytes() }).map_err(Failure::Event)?;
    if verify {
        view.verify().map_err(Failure::Event)?;
    }
    // SAFETY: `view` was parsed from `source`'s bytes.
    Ok(unsafe { PyEvent::from_borrowed(Borrowed::Json(view), source) })
}

/// A Nostr event: parsed strictly, immutable.
#[pyclass(module = "nostrwire", name = "Event", frozen, eq, hash)]
pub(crate) struct PyEvent {
    repr: Repr,
}

impl std::fmt::Debug for PyEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.__repr__())
    }
}

/// Equal events have one canonical form.
impl PartialEq for PyEvent {
    fn eq(&self, other: &PyEvent) -> bool {
        self.id_bytes() == other.id_bytes() && self.json_bytes() == other.json_bytes()
    }
}

impl Eq for PyEvent {}

impl std::hash::Hash for PyEvent {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id_bytes().hash(state);
    }
}

impl PyEvent {
    pub(crate) fn new(event: Event) -> PyEvent {
        PyEvent {
            repr: Repr::Owned(event),
        }
    }

    /// An event that keeps `source` and the view into it.
    ///
    /// # Safety
    ///
    /// `view` must borrow only from the bytes of `source` (`source.as_bytes()`),
    /// which stay where they are while `source` lives and moves (a Python
    /// object or a Rust allocation it holds); the view is stored beside
    /// `source` and only lent out with the lifetime of a borrow of the event.
    pub(crate) unsafe fn from_borrowed(view: Borrowed<'_>, source: Input) -> PyEvent {
        // SAFETY: the caller's promise; the lifetimes are erased only here.
        let repr = unsafe {
            match view {
                Borrowed::Json(view) => Repr::Json {
                    view: std::mem::transmute::<EventRef<'_>, EventRef<'static>>(view),
                    _source: source,
                },
                Borrowed::Nwb(view) => Repr::Nwb {
                    view: std::mem::transmute::<EventView<'_>, EventView<'static>>(view),
                    _source: source,
                },
            }
        };
        PyEvent { repr }
    }

    fn id_bytes(&self) -> [u8; 32] {
        with_event!(self, e => *e.id().as_bytes())
    }

    pub(crate) fn id_hex(&self) -> String {
        with_event!(self, e => e.id().to_hex())
    }

    fn json_bytes(&self) -> Vec<u8> {
        with_event!(self, e => e.to_json_bytes())
    }

    /// The id and the signature.
    pub(crate) fn check(&self) -> Result<(), nostrwire_event::Error> {
        with_event!(self, e => e.verify())
    }

    /// Appends the nwb record.
    pub(crate) fn record_into(&self, out: &mut Vec<u8>) -> Result<(), nostrwire_wire::Error> {
        match &self.repr {
            Repr::Owned(e) => nostrwire_wire::try_encode_event_into(e, &Limits::DEFAULT, out),
            // Parsed under the default JSON limits, which the default
            // record limits admit.
            Repr::Json { view, .. } => {
                nostrwire_wire::encode_json_event_into(shorten(view), out);
                Ok(())
            }
            Repr::Nwb { view, .. } => {
                out.extend_from_slice(shorten_nwb(view).record());
                Ok(())
            }
        }
    }

    /// Appends `["EVENT",…]` or `["AUTH",…]`.
    pub(crate) fn write_message(&self, auth: bool, out: &mut Vec<u8>) {
        with_event!(self, e => if auth {
            write::client_auth(out, e)
        } else {
            write::client_event(out, e)
        })
    }
}

#[pymethods]
impl PyEvent {
    /// Parses one event (strict NIP-01 JSON) and by default verifies its id
    /// and signature.
    #[staticmethod]
    #[pyo3(signature = (data, verify = true))]
    fn from_json(py: Python<'_>, data: Input, verify: bool) -> PyResult<PyEvent> {
        let event = if verify || data.as_bytes().len() > DETACH_BYTES {
            py.detach(move || parse_json(data, verify))
        } else {
            parse_json(data, verify)
        };
        Ok(event?)
    }

    /// The id, 64 lowercase hex characters.
    #[getter]
    fn id(&self) -> String {
        self.id_hex()
    }

    /// The author's x-only public key, 64 lowercase hex characters.
    #[getter]
    fn pubkey(&self) -> String {
        with_event!(self, e => e.pubkey().to_hex())
    }

    #[getter]
    fn created_at(&self) -> u64 {
        with_event!(self, e => e.created_at().as_u64())
    }

    #[getter]
    fn kind(&self) -> u16 {
        with_event!(self, e => e.kind().as_u16())
    }

    /// The tags, a new list of lists of strings on every access.
    #[getter]
    fn tags<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        match &self.repr {
            Repr::Owned(e) => {
                for tag in &e.tags {
                    list.append(PyList::new(py, tag.as_slice())?)?;
                }
            }
            Repr::Json { view, .. } => {
                for tag in shorten(view).tags().iter() {
                    let elements = PyList::empty(py);
                    for element in tag.iter() {
                        elements.append(element.value())?;
                    }
                    list.append(elements)?;
                }
            }
            Repr::Nwb { view, .. } => {
                for tag in shorten_nwb(view).tags() {
                    let elements = PyList::empty(py);
                    for element in tag.iter() {
                        elements.append(element.to_str())?;
                    }
                    list.append(elements)?;
                }
            }
        }
        Ok(list)
    }

    #[getter]
    fn content(&self) -> Cow<'_, str> {
        match &self.repr {
            Repr::Owned(e) => Cow::Borrowed(&e.content),
            Repr::Json { view, .. } => shorten(view).content().value(),
            Repr::Nwb { view, .. } => Cow::Borrowed(shorten_nwb(view).content()),
        }
    }

    /// The signature, 128 lowercase hex characters.
    #[getter]
    fn sig(&self) -> String {
        with_event!(self, e => e.sig().to_hex())
    }

    /// Canonical compact JSON, keys in NIP-01 order.
    fn to_json(&self) -> String {
        with_event!(self, e => e.to_json())
    }

    /// The event as a dict of its seven fields.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("id", self.id())?;
        d.set_item("pubkey", self.pubkey())?;
        d.set_item("created_at", self.created_at())?;
        d.set_item("kind", self.kind())?;
        d.set_item("tags", self.tags(py)?)?;
        d.set_item("content", self.content())?;
        d.set_item("sig", self.sig())?;
        Ok(d)
    }

    /// Recomputes the id and checks the signature; raises `InvalidEvent`.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.check())
            .map_err(|e| Failure::Event(e).to_py())
    }

    /// The id computed from the fields (equal to `id` when the event verifies).
    fn compute_id(&self) -> String {
        with_event!(self, e => e.compute_id().to_hex())
    }

    fn __repr__(&self) -> String {
        format!(
            "Event(id='{}', kind={}, pubkey='{}', created_at={})",
            self.id(),
            self.kind(),
            self.pubkey(),
            self.created_at()
        )
    }

    fn __str__(&self) -> String {
        self.to_json()
    }

    /// Pickles through the canonical JSON (verified again on loading).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let from_json = slf.get_type().getattr("from_json")?;
        let args = PyTuple::new(py, [slf.get().to_json()])?;
        PyTuple::new(py, [from_json.into_any(), args.into_any()])
    }
}

/// Fields given from Python, checked the way the parser checks them.
fn timestamp(created_at: u64) -> PyResult<Timestamp> {
    Timestamp::new(created_at).map_err(|k| Failure::Event(nostrwire_event::Error::new(k)).to_py())
}

fn kind(kind: u64) -> PyResult<Kind> {
    u16::try_from(kind).map(Kind).map_err(|_| {
        Failure::Event(nostrwire_event::Error::new(
            nostrwire_event::ErrorKind::KindOutOfRange,
        ))
        .to_py()
    })
}

fn tags(tags: Option<Vec<Vec<String>>>) -> PyResult<Vec<Tag>> {
    tags.unwrap_or_default()
        .into_iter()
        .map(|t| {
            Tag::new(t).ok_or_else(|| {
                Failure::Event(nostrwire_event::Error::new(
                    nostrwire_event::ErrorKind::EmptyTag,
                ))
                .to_py()
            })
        })
        .collect()
}

fn hex32(text: &str) -> PyResult<[u8; 32]> {
    nostrwire_event::hex::decode_array(text.as_bytes())
        .map_err(|k| Failure::Event(nostrwire_event::Error::new(k)).to_py())
}

/// The NIP-01 id of an event's fields: sha256 of the canonical
/// `[0,pubkey,created_at,kind,tags,content]`, as lowercase hex.
#[pyfunction]
#[pyo3(signature = (pubkey, created_at, kind, tags, content))]
fn event_id(
    pubkey: &str,
    created_at: u64,
    kind: u64,
    tags: Vec<Vec<String>>,
    content: String,
) -> PyResult<String> {
    let unsigned = UnsignedEvent {
        pubkey: PublicKey::from_bytes(hex32(pubkey)?),
        created_at: timestamp(created_at)?,
        kind: self::kind(kind)?,
        tags: self::tags(Some(tags))?,
        content,
    };
    Ok(unsigned.compute_id().to_hex())
}

/// One item of `verify_many`.
enum Item {
    Event(Py<PyEvent>),
    Json(Input),
    Other,
}

fn verify_item(item: &Item) -> bool {
    match item {
        Item::Event(e) => e.get().check().is_ok(),
        Item::Json(input) => EventRef::parse(input.as_bytes())
            .and_then(|e| e.verify())
            .is_ok(),
        Item::Other => false,
    }
}

/// For each item (an `Event`, or event JSON as `str` or bytes-like), whether
/// it parses strictly and its id and signature verify. Runs with the GIL
/// released on `threads` threads (default: every core).
#[pyfunction]
#[pyo3(signature = (events, threads = None))]
fn verify_many(
    py: Python<'_>,
    events: &Bound<'_, PyAny>,
    threads: Option<usize>,
) -> PyResult<Vec<bool>> {
    let mut items = Vec::with_capacity(events.len().unwrap_or(0));
    for obj in events.try_iter()? {
        let obj = obj?;
        items.push(if let Ok(e) = obj.cast::<PyEvent>() {
            Item::Event(e.clone().unbind())
        } else if let Ok(input) = obj.extract::<Input>() {
            Item::Json(input)
        } else {
            Item::Other
        });
    }
    let threads = par::threads(threads);
    Ok(py.detach(|| {
        par::map_blocks(&items, threads, 64, |block| {
            block.iter().map(verify_item).collect()
        })
    }))
}

/// A signing key (BIP-340). The secret never appears in `repr`.
#[pyclass(module = "nostrwire", name = "Keys", frozen)]
#[derive(Debug)]
pub(crate) struct PyKeys {
    pub(crate) inner: Keys,
}

#[pymethods]
impl PyKeys {
    /// Keys from a 32-byte secret, as bytes or 64 hex characters.
    #[new]
    fn new(secret: &Bound<'_, PyAny>) -> PyResult<PyKeys> {
        let bytes: [u8; 32] = if let Ok(text) = secret.extract::<String>() {
            hex32(&text)?
        } else {
            let raw: Vec<u8> = secret.extract()?;
            raw.try_into()
                .map_err(|_| pyo3::exceptions::PyValueError::new_err("a secret key is 32 bytes"))?
        };
        Keys::from_secret_bytes(bytes)
            .map(|inner| PyKeys { inner })
            .ok_or_else(|| {
                pyo3::exceptions::PyValueError::new_err(
                    "secret is zero or not below the curve order",
                )
            })
    }

    /// Fresh keys from the operating system's random source.
    #[staticmethod]
    fn generate(py: Python<'_>) -> PyResult<PyKeys> {
        let urandom = py.import("os")?.getattr("urandom")?;
        loop {
            let raw: Vec<u8> = urandom.call1((32,))?.extract()?;
            let bytes: [u8; 32] = raw.try_into().expect("32 bytes");
            if let Some(inner) = Keys::from_secret_bytes(bytes) {
                return Ok(PyKeys { inner });
            }
        }
    }

    /// The x-only public key, 64 lowercase hex characters.
    #[getter]
    fn public_key(&self) -> String {
        self.inner.public_key().to_hex()
    }

    /// Signs a new event; `created_at` defaults to now.
    #[pyo3(signature = (kind, content, tags = None, created_at = None))]
    fn sign(
        &self,
        py: Python<'_>,
        kind: u64,
        content: String,
        tags: Option<Vec<Vec<String>>>,
        created_at: Option<u64>,
    ) -> PyResult<PyEvent> {
        let created_at = match created_at {
            Some(t) => timestamp(t)?,
            None => Timestamp::now(),
        };
        let unsigned = UnsignedEvent::new(
            &self.inner,
            created_at,
            self::kind(kind)?,
            self::tags(tags)?,
            content,
        );
        Ok(PyEvent::new(py.detach(|| unsigned.sign(&self.inner))))
    }

    fn __repr__(&self) -> String {
        format!("Keys(public_key='{}')", self.public_key())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEvent>()?;
    m.add_class::<PyKeys>()?;
    m.add_function(wrap_pyfunction!(event_id, m)?)?;
    m.add_function(wrap_pyfunction!(verify_many, m)?)?;
    Ok(())
}
