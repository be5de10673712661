//! Sans-IO relay messages: `Decoder` turns what a relay sends (NIP-01 JSON
//! text, or `nostrwire.v1` binary frames) into `RelayMessage`s with verified
//! events; `Encoder` writes what a client sends. No sockets here: the
//! asyncio client in `nostrwire/relay.py` (or any other I/O) feeds them.
//!
//! Each transport is one [`Transport`] variant with its own decode and
//! encode arms, so a later binary version is one more variant beside v1.

use std::borrow::Cow;

use nostrwire_event::message::{write, RelayMessage};
use nostrwire_event::{Error, ErrorKind, Event, Filter, SignedFields};
use nostrwire_wire::compress::RecordDecompressor;
use nostrwire_wire::transport::{self, RelayFrame};
use nostrwire_wire::{EventView, Limits};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors::Failure;
use crate::event::{Borrowed, PyEvent};
use crate::input::Input;
use crate::par;

/// The framing of one connection, chosen by the WebSocket subprotocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// NIP-01: JSON text in text frames.
    Json,
    /// `nostrwire.v1` (`spec/transport.md`): binary frames, events as nwb.
    V1,
    /// `nostrwire.v2`: as v1, but a subscription's events come in batch
    /// frames of records as the relay stores them. This client holds no
    /// dictionary set, so the relay sends it records that need none.
    V2,
}

impl Transport {
    fn from_name(name: &str) -> PyResult<Transport> {
        match name {
            "json" => Ok(Transport::Json),
            transport::SUBPROTOCOL => Ok(Transport::V1),
            transport::SUBPROTOCOL_V2 => Ok(Transport::V2),
            other => Err(PyValueError::new_err(format!(
                "transport must be \"json\", \"{}\" or \"{}\", not {other:?}",
                transport::SUBPROTOCOL,
                transport::SUBPROTOCOL_V2
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Transport::Json => "json",
            Transport::V1 => transport::SUBPROTOCOL,
            Transport::V2 => transport::SUBPROTOCOL_V2,
        }
    }
}

/// A relay message decoded without the GIL, before it becomes Python objects.
/// An event is a view into the received message, joined with it later
/// (`PyEvent::from_borrowed`).
enum Decoded {
    Event(String, Borrowed<'static>),
    /// A v2 batch: the events that decoded and verified, and how many did not.
    Batch(String, Vec<Event>, u64),
    Ok(String, bool, String),
    Eose(String),
    Closed(String, String),
    Notice(String),
    Auth(String),
    Count(String, u64),
    /// NIP-77 and future messages: the type and the raw JSON.
    Other(String, String),
    /// A message that did not decode, or an event that did not verify.
    Invalid {
        subscription_id: Option<String>,
        event_id: Option<String>,
        failure: Failure,
    },
}

fn owned(s: Cow<'_, str>) -> String {
    s.into_owned()
}

/// The event of an `EVENT` message, verified when asked.
fn event_message<E: SignedFields>(
    subscription_id: String,
    event: E,
    verify: bool,
    borrowed: impl FnOnce(E) -> Borrowed<'static>,
) -> Decoded {
    if verify {
        if let Err(e) = event.verify() {
            return Decoded::Invalid {
                subscription_id: Some(subscription_id),
                event_id: Some(event.id().to_hex()),
                failure: Failure::Event(e),
            };
        }
    }
    Decoded::Event(subscription_id, borrowed(event))
}

fn decode_json(text: &'static [u8], verify: bool) -> Decoded {
    let message = match RelayMessage::parse(text) {
        Ok(m) => m,
        Err(e) => {
            return Decoded::Invalid {
                subscription_id: None,
                event_id: None,
                failure: Failure::Message(e),
            }
        }
    };
    match message {
        RelayMessage::Event {
            subscription_id,
            event,
        } => event_message(owned(subscription_id), event, verify, Borrowed::Json),
        RelayMessage::Ok {
            event_id,
            accepted,
            message,
        } => Decoded::Ok(event_id.to_hex(), accepted, owned(message)),
        RelayMessage::Eose(id) => Decoded::Eose(owned(id)),
        RelayMessage::Closed {
            subscription_id,
            message,
        } => Decoded::Closed(owned(subscription_id), owned(message)),
        RelayMessage::Notice(m) => Decoded::Notice(owned(m)),
        RelayMessage::Auth(c) => Decoded::Auth(owned(c)),
        RelayMessage::Count {
            subscription_id,
            count,
        } => Decoded::Count(owned(subscription_id), count),
        other => {
            let name = match &other {
                RelayMessage::NegMsg { .. } => "NEG-MSG",
                RelayMessage::NegErr { .. } => "NEG-ERR",
                _ => "UNKNOWN",
            };
            Decoded::Other(name.to_owned(), String::from_utf8_lossy(text).into_owned())
        }
    }
}

fn decode_v1(frame: &'static [u8], verify: bool) -> Decoded {
    let invalid = |failure| Decoded::Invalid {
        subscription_id: None,
        event_id: None,
        failure,
    };
    match transport::decode_relay(frame, &Limits::DEFAULT) {
        Ok(RelayFrame::Json(text)) => decode_json(text, verify),
        Ok(RelayFrame::Event {
            subscription_id,
            event,
        }) => event_message(subscription_id.to_owned(), event, verify, Borrowed::Nwb),
        Ok(RelayFrame::Ok {
            id,
            accepted,
            message,
        }) => Decoded::Ok(id.to_hex(), accepted, message.to_owned()),
        Ok(RelayFrame::Eose(id)) => Decoded::Eose(id.to_owned()),
        // A nostrwire.v2 frame: not on a v1 connection.
        Ok(_) => invalid(Failure::Nwb(nostrwire_wire::Error::UnknownMessage)),
        Err(e) => invalid(Failure::Nwb(e)),
    }
}

fn decode_v2(frame: &'static [u8], verify: bool) -> Decoded {
    let invalid = |failure| Decoded::Invalid {
        subscription_id: None,
        event_id: None,
        failure,
    };
    match transport::decode_relay_v2(frame, &Limits::DEFAULT) {
        Ok(RelayFrame::Batch {
            subscription_id,
            records,
        }) => {
            let mut decompressor = match RecordDecompressor::new(None) {
                Ok(d) => d,
                Err(e) => return invalid(Failure::Io(e.to_string())),
            };
            let (mut events, mut refused) = (Vec::with_capacity(records.len()), 0);
            for stored in records.records() {
                let event = decompressor
                    .record(stored, &Limits::DEFAULT)
                    .and_then(EventView::decode)
                    .ok()
                    .filter(|view| !verify || view.verify().is_ok())
                    .map(|view| view.to_event());
                match event {
                    Some(event) => events.push(event),
                    None => refused += 1,
                }
            }
            Decoded::Batch(subscription_id.to_owned(), events, refused)
        }
        Ok(RelayFrame::DictionarySet(set)) => Decoded::Other(
            "DICTIONARY_SET".to_owned(),
            set.map(|h| nostrwire_event::hex::encode(&h))
                .unwrap_or_default(),
        ),
        // Every other frame is v1's.
        Ok(_) => decode_v1(frame, verify),
        Err(e) => invalid(Failure::Nwb(e)),
    }
}

/// One message as received: text or binary.
enum Received {
    Text(Input),
    Binary(Input),
}

impl Received {
    fn into_input(self) -> Input {
        match self {
            Received::Text(input) | Received::Binary(input) => input,
        }
    }

    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Received> {
        let text = obj.is_instance_of::<PyString>();
        let input: Input = obj.extract()?;
        Ok(if text {
            Received::Text(input)
        } else {
            Received::Binary(input)
        })
    }
}

/// Decodes one message. An event in the result borrows `received`'s bytes:
/// join it with them (`PyRelayMessage::from_decoded`) or drop it.
fn decode_received(transport: Transport, received: &Received, verify: bool) -> Decoded {
    match (transport, received) {
        // A JSON connection may hand text over as bytes.
        (Transport::Json, Received::Text(t) | Received::Binary(t)) => {
            // SAFETY: see above.
            decode_json(unsafe { t.unbound_bytes() }, verify)
        }
        // SAFETY: see above.
        (Transport::V1, Received::Binary(b)) => decode_v1(unsafe { b.unbound_bytes() }, verify),
        // SAFETY: see above.
        (Transport::V2, Received::Binary(b)) => decode_v2(unsafe { b.unbound_bytes() }, verify),
        (Transport::V1 | Transport::V2, Received::Text(_)) => Decoded::Invalid {
            subscription_id: None,
            event_id: None,
            failure: Failure::Frame("text_frame", "a text frame on a binary connection"),
        },
    }
}

/// A message from a relay. `type` is the NIP-01 message name (`"EVENT"`,
/// `"OK"`, `"EOSE"`, `"CLOSED"`, `"NOTICE"`, `"AUTH"`, `"COUNT"`, NIP-77's
/// `"NEG-MSG"`/`"NEG-ERR"` with the raw JSON in `message`), `"EVENTS"` for a
/// `nostrwire.v2` batch (`events`: those that decoded and verified, `count`:
/// how many did not), `"DICTIONARY_SET"` (v2: the set the relay compresses
/// with, as hex in `message`, empty for none), or `"INVALID"`
/// from `Decoder.decode_many` for a message that did not decode or an event
/// that did not verify (`error` is the stable kind, `message` the reason).
#[pyclass(module = "nostrwire", name = "RelayMessage", frozen, get_all)]
#[derive(Debug)]
pub(crate) struct PyRelayMessage {
    #[pyo3(name = "type")]
    kind: &'static str,
    subscription_id: Option<String>,
    event: Option<Py<PyEvent>>,
    events: Option<Vec<Py<PyEvent>>>,
    event_id: Option<String>,
    accepted: Option<bool>,
    message: Option<String>,
    count: Option<u64>,
    error: Option<&'static str>,
}

#[pymethods]
impl PyRelayMessage {
    fn __repr__(&self) -> String {
        let mut parts = vec![format!("type={:?}", self.kind)];
        if let Some(s) = &self.subscription_id {
            parts.push(format!("subscription_id={s:?}"));
        }
        if let Some(e) = &self.event {
            parts.push(format!("event={}", e.get().id_hex()));
        }
        if let Some(events) = &self.events {
            parts.push(format!("events=[{} events]", events.len()));
        }
        if let Some(s) = &self.event_id {
            parts.push(format!("event_id={s:?}"));
        }
        if let Some(a) = self.accepted {
            parts.push(format!("accepted={}", if a { "True" } else { "False" }));
        }
        if let Some(m) = &self.message {
            parts.push(format!("message={m:?}"));
        }
        if let Some(c) = self.count {
            parts.push(format!("count={c}"));
        }
        if let Some(e) = self.error {
            parts.push(format!("error={e:?}"));
        }
        format!("RelayMessage({})", parts.join(", "))
    }
}

impl PyRelayMessage {
    fn empty(kind: &'static str) -> PyRelayMessage {
        PyRelayMessage {
            kind,
            subscription_id: None,
            event: None,
            events: None,
            event_id: None,
            accepted: None,
            message: None,
            count: None,
            error: None,
        }
    }

    /// The message `d` decoded from `received`.
    fn from_decoded(py: Python<'_>, d: Decoded, received: Received) -> PyResult<PyRelayMessage> {
        let mut m;
        match d {
            Decoded::Event(sub, view) => {
                m = PyRelayMessage::empty("EVENT");
                m.subscription_id = Some(sub);
                // SAFETY: `view` was decoded from `received`'s bytes.
                let event = unsafe { PyEvent::from_borrowed(view, received.into_input()) };
                m.event = Some(Py::new(py, event)?);
            }
            Decoded::Batch(sub, events, refused) => {
                m = PyRelayMessage::empty("EVENTS");
                m.subscription_id = Some(sub);
                m.events = Some(
                    events
                        .into_iter()
                        .map(|e| Py::new(py, PyEvent::new(e)))
                        .collect::<PyResult<_>>()?,
                );
                m.count = Some(refused);
            }
            Decoded::Ok(id, accepted, message) => {
                m = PyRelayMessage::empty("OK");
                m.event_id = Some(id);
                m.accepted = Some(accepted);
                m.message = Some(message);
            }
            Decoded::Eose(sub) => {
                m = PyRelayMessage::empty("EOSE");
                m.subscription_id = Some(sub);
            }
            Decoded::Closed(sub, message) => {
                m = PyRelayMessage::empty("CLOSED");
                m.subscription_id = Some(sub);
                m.message = Some(message);
            }
            Decoded::Notice(message) => {
                m = PyRelayMessage::empty("NOTICE");
                m.message = Some(message);
            }
            Decoded::Auth(challenge) => {
                m = PyRelayMessage::empty("AUTH");
                m.message = Some(challenge);
            }
            Decoded::Count(sub, count) => {
                m = PyRelayMessage::empty("COUNT");
                m.subscription_id = Some(sub);
                m.count = Some(count);
            }
            Decoded::Other(name, json) => {
                m = PyRelayMessage::empty(match name.as_str() {
                    "NEG-MSG" => "NEG-MSG",
                    "NEG-ERR" => "NEG-ERR",
                    "DICTIONARY_SET" => "DICTIONARY_SET",
                    _ => "UNKNOWN",
                });
                m.message = Some(json);
            }
            Decoded::Invalid {
                subscription_id,
                event_id,
                failure,
            } => {
                m = PyRelayMessage::empty("INVALID");
                m.subscription_id = subscription_id;
                m.event_id = event_id;
                m.error = Some(failure.kind());
                m.message = Some(failure.to_py().value(py).to_string());
            }
        }
        Ok(m)
    }
}

/// Decodes what a relay sends on one connection.
#[pyclass(module = "nostrwire", name = "Decoder", frozen)]
#[derive(Debug)]
pub(crate) struct Decoder {
    transport: Transport,
    verify: bool,
    threads: usize,
}

#[pymethods]
impl Decoder {
    /// `transport` is `"json"`, `"nostrwire.v1"` or `"nostrwire.v2"` (the
    /// negotiated subprotocol); events are verified unless `verify=False`.
    #[new]
    #[pyo3(signature = (transport = "json", verify = true, threads = None))]
    fn new(transport: &str, verify: bool, threads: Option<usize>) -> PyResult<Decoder> {
        Ok(Decoder {
            transport: Transport::from_name(transport)?,
            verify,
            threads: par::threads(threads),
        })
    }

    #[getter]
    fn transport(&self) -> &'static str {
        self.transport.name()
    }

    /// One message (`str` for a text frame, bytes for a binary one).
    /// Raises `InvalidMessage`/`NwbError` for one that does not decode and
    /// `InvalidEvent` for an event that does not verify.
    fn decode(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyRelayMessage> {
        let received = Received::from_py(data)?;
        let decoded = py.detach(|| decode_received(self.transport, &received, self.verify));
        if let Decoded::Invalid { failure, .. } = decoded {
            return Err(failure.to_py());
        }
        PyRelayMessage::from_decoded(py, decoded, received)
    }

    /// Many messages at once, in order, with the GIL released and events
    /// verified on the decoder's threads. Never raises for a bad message:
    /// it comes back as `type == "INVALID"`.
    fn decode_many(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<PyRelayMessage>> {
        let received = messages
            .try_iter()?
            .map(|m| Received::from_py(&m?))
            .collect::<PyResult<Vec<_>>>()?;
        let (transport, verify) = (self.transport, self.verify);
        // A v2 batch frame holds up to 64 KiB of events: one is work enough.
        let block = if transport == Transport::V2 { 1 } else { 32 };
        let decoded = py.detach(|| {
            par::map_blocks(&received, self.threads, block, |block| {
                block
                    .iter()
                    .map(|r| decode_received(transport, r, verify))
                    .collect()
            })
        });
        decoded
            .into_iter()
            .zip(received)
            .map(|(d, r)| PyRelayMessage::from_decoded(py, d, r))
            .collect()
    }
}

/// Writes what a client sends on one connection: `str` (text frames) for
/// `"json"`, `bytes` (binary frames) for `"nostrwire.v1"`.
#[pyclass(module = "nostrwire", name = "Encoder", frozen)]
#[derive(Debug)]
pub(crate) struct Encoder {
    transport: Transport,
}

fn check_subscription_id(id: &str) -> PyResult<()> {
    let chars = id.chars().count();
    if chars == 0 || chars > nostrwire_event::message::MAX_SUBSCRIPTION_ID_CHARS {
        return Err(Failure::Message(Error::new(ErrorKind::InvalidSubscriptionId)).to_py());
    }
    Ok(())
}

fn parse_filters(filters: &[String]) -> PyResult<Vec<Filter>> {
    if filters.is_empty() {
        return Err(Failure::Message(Error::new(ErrorKind::InvalidMessage)).to_py());
    }
    filters
        .iter()
        .map(|f| Filter::from_json(f.as_bytes()).map_err(|e| Failure::Filter(e).to_py()))
        .collect()
}

/// The writer of a message with a subscription id and filters.
type WriteWithFilters = fn(&mut Vec<u8>, &str, &[Filter]);

impl Encoder {
    /// A REQ or COUNT: the id and the filters checked, then written.
    fn with_filters<'py>(
        &self,
        py: Python<'py>,
        subscription_id: &str,
        filters: &[String],
        write: WriteWithFilters,
    ) -> PyResult<Bound<'py, PyAny>> {
        check_subscription_id(subscription_id)?;
        let filters = parse_filters(filters)?;
        let mut json = Vec::new();
        write(&mut json, subscription_id, &filters);
        Ok(self.json_frame(py, json))
    }

    /// A NIP-01 JSON message in this transport's frame.
    fn json_frame<'py>(&self, py: Python<'py>, json: Vec<u8>) -> Bound<'py, PyAny> {
        match self.transport {
            Transport::Json => {
                let text = String::from_utf8(json).expect("the writers emit UTF-8");
                PyString::new(py, &text).into_any()
            }
            Transport::V1 | Transport::V2 => {
                let mut frame = Vec::with_capacity(json.len() + 1);
                transport::write_json(&mut frame, &json);
                PyBytes::new(py, &frame).into_any()
            }
        }
    }

    fn event_frame<'py>(
        &self,
        py: Python<'py>,
        event: &PyEvent,
        auth: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.transport {
            Transport::Json => {
                let mut json = Vec::new();
                event.write_message(auth, &mut json);
                Ok(self.json_frame(py, json))
            }
            Transport::V1 | Transport::V2 => {
                let mut record = Vec::new();
                event
                    .record_into(&mut record)
                    .map_err(|e| Failure::Nwb(e).to_py())?;
                let mut frame = Vec::with_capacity(record.len() + 1);
                if auth {
                    transport::write_auth(&mut frame, &record);
                } else {
                    transport::write_event(&mut frame, &record);
                }
                Ok(PyBytes::new(py, &frame).into_any())
            }
        }
    }
}

#[pymethods]
impl Encoder {
    #[new]
    #[pyo3(signature = (transport = "json"))]
    fn new(transport: &str) -> PyResult<Encoder> {
        Ok(Encoder {
            transport: Transport::from_name(transport)?,
        })
    }

    #[getter]
    fn transport(&self) -> &'static str {
        self.transport.name()
    }

    /// `["REQ", id, filter...]`; filters as JSON text, checked strictly.
    fn req<'py>(
        &self,
        py: Python<'py>,
        subscription_id: &str,
        filters: Vec<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.with_filters(py, subscription_id, &filters, write::req)
    }

    /// `["COUNT", id, filter...]` (NIP-45).
    fn count<'py>(
        &self,
        py: Python<'py>,
        subscription_id: &str,
        filters: Vec<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.with_filters(py, subscription_id, &filters, write::count_request)
    }

    /// `["CLOSE", id]`.
    fn close<'py>(&self, py: Python<'py>, subscription_id: &str) -> PyResult<Bound<'py, PyAny>> {
        check_subscription_id(subscription_id)?;
        let mut json = Vec::new();
        write::close(&mut json, subscription_id);
        Ok(self.json_frame(py, json))
    }

    /// `["EVENT", event]`, or a binary `EVENT` frame with its nwb record.
    fn event<'py>(&self, py: Python<'py>, event: &PyEvent) -> PyResult<Bound<'py, PyAny>> {
        self.event_frame(py, event, false)
    }

    /// `["AUTH", event]` (NIP-42), or a binary `AUTH` frame.
    fn auth<'py>(&self, py: Python<'py>, event: &PyEvent) -> PyResult<Bound<'py, PyAny>> {
        self.event_frame(py, event, true)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SUBPROTOCOL_V1", transport::SUBPROTOCOL)?;
    m.add("SUBPROTOCOL_V2", transport::SUBPROTOCOL_V2)?;
    m.add_class::<PyRelayMessage>()?;
    m.add_class::<Decoder>()?;
    m.add_class::<Encoder>()?;
    Ok(())
}
