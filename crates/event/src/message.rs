//! NIP-01 messages between clients and relays: strict parsing, and writers
//! that produce the exact JSON text for each message.

use std::borrow::Cow;

use crate::canonical::{put_u64, SignedFields};
use crate::error::{Error, ErrorKind};
use crate::event::{read_event, EventRef};
use crate::filter::{read_filter, Filter};
use crate::json::{write_quoted, JsonStr, Sink};
use crate::limits::Limits;
use crate::reader::Reader;
use crate::types::EventId;

/// Longest subscription id NIP-01 allows, in characters.
pub const MAX_SUBSCRIPTION_ID_CHARS: usize = 64;

/// A message from a client to a relay.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ClientMessage<'a> {
    /// `["EVENT", <event>]`: publish an event.
    Event(EventRef<'a>),
    /// `["REQ", <subscription id>, <filter>...]`: query and subscribe.
    Req {
        /// Subscription id, unique per connection.
        subscription_id: Cow<'a, str>,
        /// One or more filters (OR).
        filters: Vec<Filter>,
    },
    /// `["COUNT", <subscription id>, <filter>...]`: NIP-45 count.
    Count {
        /// Query id.
        subscription_id: Cow<'a, str>,
        /// One or more filters (OR).
        filters: Vec<Filter>,
    },
    /// `["CLOSE", <subscription id>]`: end a subscription.
    Close(Cow<'a, str>),
    /// `["AUTH", <event>]`: NIP-42 authentication.
    Auth(EventRef<'a>),
    /// `["NEG-OPEN", <subscription id>, <filter>, <hex message>]`: NIP-77
    /// negentropy sync over the events matching one filter.
    NegOpen {
        /// Sync session id, in the subscription id namespace.
        subscription_id: Cow<'a, str>,
        /// The events to reconcile.
        filter: Box<Filter>,
        /// The initial negentropy message, hex-decoded.
        message: Vec<u8>,
    },
    /// `["NEG-MSG", <subscription id>, <hex message>]`: the next round.
    NegMsg {
        /// Sync session id.
        subscription_id: Cow<'a, str>,
        /// The negentropy message, hex-decoded.
        message: Vec<u8>,
    },
    /// `["NEG-CLOSE", <subscription id>]`: end a sync session.
    NegClose(Cow<'a, str>),
}

/// A message from a relay to a client.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RelayMessage<'a> {
    /// `["EVENT", <subscription id>, <event>]`.
    Event {
        /// The subscription the event answers.
        subscription_id: Cow<'a, str>,
        /// The event.
        event: EventRef<'a>,
    },
    /// `["OK", <event id>, <accepted>, <message>]`.
    Ok {
        /// The event this answers.
        event_id: EventId,
        /// Whether the event was accepted.
        accepted: bool,
        /// Reason, with a machine-readable prefix when refused.
        message: Cow<'a, str>,
    },
    /// `["EOSE", <subscription id>]`: end of stored events.
    Eose(Cow<'a, str>),
    /// `["CLOSED", <subscription id>, <message>]`: the relay ended a subscription.
    Closed {
        /// The subscription.
        subscription_id: Cow<'a, str>,
        /// Reason, with a machine-readable prefix.
        message: Cow<'a, str>,
    },
    /// `["NOTICE", <message>]`.
    Notice(Cow<'a, str>),
    /// `["AUTH", <challenge>]`.
    Auth(Cow<'a, str>),
    /// `["COUNT", <subscription id>, {"count": n}]`.
    Count {
        /// The query id.
        subscription_id: Cow<'a, str>,
        /// The count.
        count: u64,
    },
    /// `["NEG-MSG", <subscription id>, <hex message>]`: NIP-77, relay side.
    NegMsg {
        /// Sync session id.
        subscription_id: Cow<'a, str>,
        /// The negentropy message, hex-decoded.
        message: Vec<u8>,
    },
    /// `["NEG-ERR", <subscription id>, <reason>]`: the relay ended a sync session.
    NegErr {
        /// Sync session id.
        subscription_id: Cow<'a, str>,
        /// Reason, with a machine-readable prefix.
        message: Cow<'a, str>,
    },
}

fn message_type<'a>(r: &mut Reader<'a>) -> Result<JsonStr<'a>, Error> {
    if r.peek() != Some(b'[') {
        return Err(Error::at(ErrorKind::InvalidMessage, r.pos()));
    }
    r.bump();
    r.string_max(16)
        .map_err(|e| Error::at(ErrorKind::InvalidMessage, e.offset().unwrap_or(0)))
}

fn next_element(r: &mut Reader<'_>) -> Result<(), Error> {
    if r.eat(b',') {
        Ok(())
    } else if r.peek() == Some(b']') {
        Err(Error::at(ErrorKind::InvalidMessage, r.pos()))
    } else {
        Err(r.syntax())
    }
}

fn end_message(r: &mut Reader<'_>) -> Result<(), Error> {
    match r.peek() {
        Some(b']') => {
            r.bump();
            r.finish()
        }
        Some(b',') => Err(Error::at(ErrorKind::InvalidMessage, r.pos())),
        _ => Err(r.syntax()),
    }
}

fn subscription_id<'a>(r: &mut Reader<'a>) -> Result<Cow<'a, str>, Error> {
    let at = r.peek().map(|_| r.pos()).unwrap_or(0);
    let value = r.string_max(4 * 6 * MAX_SUBSCRIPTION_ID_CHARS)?.value();
    let chars = value.chars().count();
    if chars == 0 || chars > MAX_SUBSCRIPTION_ID_CHARS {
        return Err(Error::at(ErrorKind::InvalidSubscriptionId, at));
    }
    Ok(value)
}

fn filters(r: &mut Reader<'_>) -> Result<Vec<Filter>, Error> {
    let mut out = Vec::new();
    while r.eat(b',') {
        if out.len() >= r.limits.max_filters {
            return Err(Error::at(ErrorKind::TooManyFilters, r.pos()));
        }
        out.push(read_filter(r).map_err(|e| e.with_field("filter"))?);
    }
    if out.is_empty() {
        return Err(Error::at(ErrorKind::InvalidMessage, r.pos()));
    }
    Ok(out)
}

/// The id an `EVENT` or `AUTH` message claims for its event, read without the
/// parser's limits and checks of the other fields, so that a refused event
/// can still be answered with `OK false` under its id (NIP-01 answers every
/// `EVENT` with an `OK`).
///
/// Reads the message's JSON up to the event's top-level `id` member,
/// skipping whatever comes before it (a tag list of any length, say) in one
/// pass: linear in the input. `None` when the message is not an `EVENT` or
/// `AUTH`, is not well-formed JSON before the id, or the id is not 64
/// lowercase hex characters.
///
/// ```
/// use nostrwire_event::message::claimed_event_id;
///
/// let id = "29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a";
/// let refused = format!(r#"["EVENT",{{"kind":-1,"id":"{id}"}}]"#);
/// assert_eq!(claimed_event_id(refused.as_bytes()).unwrap().to_hex(), id);
/// assert_eq!(claimed_event_id(br#"["REQ","s",{}]"#), None);
/// ```
pub fn claimed_event_id(input: &[u8]) -> Option<EventId> {
    let limits = Limits {
        max_string_bytes: usize::MAX,
        ..Limits::DEFAULT
    };
    let mut r = Reader::new(input, usize::MAX, &limits).ok()?;
    let kind = message_type(&mut r).ok()?;
    if !matches!(kind.raw(), "EVENT" | "AUTH") || !r.eat(b',') {
        return None;
    }
    let mut id = None;
    // Stops at the id by returning an error; any other error ends the search too.
    let _ = r.object(|r, key| {
        if key.eq_str("id") {
            let text = r.string()?;
            id = crate::hex::decode_array::<32>(text.value().as_bytes())
                .ok()
                .map(EventId::from_bytes);
            Err(Error::new(ErrorKind::DuplicateKey))
        } else {
            r.skip_value(1)
        }
    });
    id
}

/// A NIP-77 message: lowercase hex of even length, decoded.
fn hex_message(r: &mut Reader<'_>) -> Result<Vec<u8>, Error> {
    let at = r.pos();
    let text = r.string()?.value();
    let mut out = Vec::new();
    crate::hex::decode_into(text.as_bytes(), &mut out).map_err(|k| Error::at(k, at))?;
    Ok(out)
}

impl<'a> ClientMessage<'a> {
    /// Parses a client message with the default limits.
    pub fn parse(input: &'a [u8]) -> Result<ClientMessage<'a>, Error> {
        Self::parse_with(input, &Limits::DEFAULT)
    }

    /// Parses a client message.
    pub fn parse_with(input: &'a [u8], limits: &Limits) -> Result<ClientMessage<'a>, Error> {
        let mut r = Reader::new(input, limits.max_message_bytes, limits)?;
        let kind = message_type(&mut r)?;
        let message = match kind.raw() {
            "EVENT" | "AUTH" => {
                next_element(&mut r)?;
                let event = read_event(&mut r)?;
                if kind.raw() == "EVENT" {
                    ClientMessage::Event(event)
                } else {
                    ClientMessage::Auth(event)
                }
            }
            "REQ" | "COUNT" => {
                next_element(&mut r)?;
                let subscription_id = subscription_id(&mut r)?;
                let filters = filters(&mut r)?;
                if kind.raw() == "REQ" {
                    ClientMessage::Req {
                        subscription_id,
                        filters,
                    }
                } else {
                    ClientMessage::Count {
                        subscription_id,
                        filters,
                    }
                }
            }
            "CLOSE" => {
                next_element(&mut r)?;
                ClientMessage::Close(subscription_id(&mut r)?)
            }
            "NEG-OPEN" => {
                next_element(&mut r)?;
                let subscription_id = subscription_id(&mut r)?;
                next_element(&mut r)?;
                let filter = read_filter(&mut r).map_err(|e| e.with_field("filter"))?;
                next_element(&mut r)?;
                ClientMessage::NegOpen {
                    subscription_id,
                    filter: Box::new(filter),
                    message: hex_message(&mut r)?,
                }
            }
            "NEG-MSG" => {
                next_element(&mut r)?;
                let subscription_id = subscription_id(&mut r)?;
                next_element(&mut r)?;
                ClientMessage::NegMsg {
                    subscription_id,
                    message: hex_message(&mut r)?,
                }
            }
            "NEG-CLOSE" => {
                next_element(&mut r)?;
                ClientMessage::NegClose(subscription_id(&mut r)?)
            }
            _ => return Err(Error::at(ErrorKind::UnknownMessage, 1)),
        };
        end_message(&mut r)?;
        Ok(message)
    }

    /// The message's type name (`"EVENT"`, `"REQ"`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            ClientMessage::Event(_) => "EVENT",
            ClientMessage::Req { .. } => "REQ",
            ClientMessage::Count { .. } => "COUNT",
            ClientMessage::Close(_) => "CLOSE",
            ClientMessage::Auth(_) => "AUTH",
            ClientMessage::NegOpen { .. } => "NEG-OPEN",
            ClientMessage::NegMsg { .. } => "NEG-MSG",
            ClientMessage::NegClose(_) => "NEG-CLOSE",
        }
    }

    /// Writes the message as compact JSON.
    pub fn write_json<S: Sink + ?Sized>(&self, out: &mut S) {
        match self {
            ClientMessage::Event(e) => write::client_event(out, e),
            ClientMessage::Req {
                subscription_id,
                filters,
            } => write::req(out, subscription_id, filters),
            ClientMessage::Count {
                subscription_id,
                filters,
            } => write::count_request(out, subscription_id, filters),
            ClientMessage::Close(id) => write::close(out, id),
            ClientMessage::Auth(e) => write::client_auth(out, e),
            ClientMessage::NegOpen {
                subscription_id,
                filter,
                message,
            } => write::neg_open(out, subscription_id, filter, message),
            ClientMessage::NegMsg {
                subscription_id,
                message,
            } => write::neg_msg(out, subscription_id, message),
            ClientMessage::NegClose(id) => write::neg_close(out, id),
        }
    }
}

impl<'a> RelayMessage<'a> {
    /// Parses a relay message with the default limits.
    pub fn parse(input: &'a [u8]) -> Result<RelayMessage<'a>, Error> {
        Self::parse_with(input, &Limits::DEFAULT)
    }

    /// Parses a relay message.
    pub fn parse_with(input: &'a [u8], limits: &Limits) -> Result<RelayMessage<'a>, Error> {
        let mut r = Reader::new(input, limits.max_message_bytes, limits)?;
        let kind = message_type(&mut r)?;
        next_element(&mut r)?;
        let message = match kind.raw() {
            "EVENT" => {
                let subscription_id = subscription_id(&mut r)?;
                next_element(&mut r)?;
                RelayMessage::Event {
                    subscription_id,
                    event: read_event(&mut r)?,
                }
            }
            "OK" => {
                let at = r.pos();
                let id = r.string()?;
                let event_id =
                    EventId::from_hex(&id.value()).map_err(|e| Error::at(e.kind(), at))?;
                next_element(&mut r)?;
                let accepted = r.boolean()?;
                next_element(&mut r)?;
                RelayMessage::Ok {
                    event_id,
                    accepted,
                    message: r.string()?.value(),
                }
            }
            "EOSE" => RelayMessage::Eose(subscription_id(&mut r)?),
            "CLOSED" => {
                let subscription_id = subscription_id(&mut r)?;
                next_element(&mut r)?;
                RelayMessage::Closed {
                    subscription_id,
                    message: r.string()?.value(),
                }
            }
            "NOTICE" => RelayMessage::Notice(r.string()?.value()),
            "NEG-MSG" => {
                let subscription_id = subscription_id(&mut r)?;
                next_element(&mut r)?;
                RelayMessage::NegMsg {
                    subscription_id,
                    message: hex_message(&mut r)?,
                }
            }
            "NEG-ERR" => {
                let subscription_id = subscription_id(&mut r)?;
                next_element(&mut r)?;
                RelayMessage::NegErr {
                    subscription_id,
                    message: r.string()?.value(),
                }
            }
            "AUTH" => RelayMessage::Auth(r.string()?.value()),
            "COUNT" => {
                let subscription_id = subscription_id(&mut r)?;
                next_element(&mut r)?;
                let mut count = None;
                r.object(|r, key| match key.value().as_ref() {
                    "count" if count.is_none() => {
                        count = Some(r.integer(ErrorKind::InvalidNumber)?);
                        Ok(())
                    }
                    "count" => Err(Error::at(ErrorKind::DuplicateKey, r.pos())),
                    _ => r.skip_value(1),
                })?;
                RelayMessage::Count {
                    subscription_id,
                    count: count
                        .ok_or(Error::at(ErrorKind::MissingField, r.pos()).with_field("count"))?,
                }
            }
            _ => return Err(Error::at(ErrorKind::UnknownMessage, 1)),
        };
        end_message(&mut r)?;
        Ok(message)
    }
}

/// Writers for every message, usable with any event representation.
pub mod write {
    use super::*;

    /// `["EVENT",<event>]`
    pub fn client_event<S: Sink + ?Sized, E: SignedFields + ?Sized>(out: &mut S, event: &E) {
        out.put(b"[\"EVENT\",");
        event.write_json(out);
        out.put(b"]");
    }

    /// `["AUTH",<event>]`
    pub fn client_auth<S: Sink + ?Sized, E: SignedFields + ?Sized>(out: &mut S, event: &E) {
        out.put(b"[\"AUTH\",");
        event.write_json(out);
        out.put(b"]");
    }

    fn with_filters<S: Sink + ?Sized>(out: &mut S, name: &[u8], id: &str, filters: &[Filter]) {
        out.put(b"[\"");
        out.put(name);
        out.put(b"\",");
        write_quoted(out, id);
        for f in filters {
            out.put(b",");
            f.write_json(out);
        }
        out.put(b"]");
    }

    /// `["REQ",<id>,<filter>...]`
    pub fn req<S: Sink + ?Sized>(out: &mut S, subscription_id: &str, filters: &[Filter]) {
        with_filters(out, b"REQ", subscription_id, filters);
    }

    /// `["COUNT",<id>,<filter>...]` (client side)
    pub fn count_request<S: Sink + ?Sized>(out: &mut S, subscription_id: &str, filters: &[Filter]) {
        with_filters(out, b"COUNT", subscription_id, filters);
    }

    /// `["CLOSE",<id>]`
    pub fn close<S: Sink + ?Sized>(out: &mut S, subscription_id: &str) {
        out.put(b"[\"CLOSE\",");
        write_quoted(out, subscription_id);
        out.put(b"]");
    }

    /// `["EVENT",<id>,<event>]`
    pub fn relay_event<S: Sink + ?Sized, E: SignedFields + ?Sized>(
        out: &mut S,
        subscription_id: &str,
        event: &E,
    ) {
        relay_event_json(out, subscription_id, |out| event.write_json(out));
    }

    /// `["EVENT",<id>,<event JSON written by write_event>]`, for events kept as JSON text.
    pub fn relay_event_json<S: Sink + ?Sized>(
        out: &mut S,
        subscription_id: &str,
        write_event: impl FnOnce(&mut S),
    ) {
        out.put(b"[\"EVENT\",");
        write_quoted(out, subscription_id);
        out.put(b",");
        write_event(out);
        out.put(b"]");
    }

    /// `["OK",<event id>,<accepted>,<message>]`
    pub fn ok<S: Sink + ?Sized>(out: &mut S, event_id: &EventId, accepted: bool, message: &str) {
        out.put(b"[\"OK\",\"");
        out.put(&event_id.to_hex_bytes());
        out.put(if accepted { b"\",true," } else { b"\",false," });
        write_quoted(out, message);
        out.put(b"]");
    }

    /// `["EOSE",<id>]`
    pub fn eose<S: Sink + ?Sized>(out: &mut S, subscription_id: &str) {
        out.put(b"[\"EOSE\",");
        write_quoted(out, subscription_id);
        out.put(b"]");
    }

    /// `["CLOSED",<id>,<message>]`
    pub fn closed<S: Sink + ?Sized>(out: &mut S, subscription_id: &str, message: &str) {
        out.put(b"[\"CLOSED\",");
        write_quoted(out, subscription_id);
        out.put(b",");
        write_quoted(out, message);
        out.put(b"]");
    }

    /// `["NOTICE",<message>]`
    pub fn notice<S: Sink + ?Sized>(out: &mut S, message: &str) {
        out.put(b"[\"NOTICE\",");
        write_quoted(out, message);
        out.put(b"]");
    }

    /// `["AUTH",<challenge>]`
    pub fn auth_challenge<S: Sink + ?Sized>(out: &mut S, challenge: &str) {
        out.put(b"[\"AUTH\",");
        write_quoted(out, challenge);
        out.put(b"]");
    }

    /// `["NEG-OPEN",<id>,<filter>,<hex message>]`
    pub fn neg_open<S: Sink + ?Sized>(
        out: &mut S,
        subscription_id: &str,
        filter: &Filter,
        message: &[u8],
    ) {
        out.put(b"[\"NEG-OPEN\",");
        write_quoted(out, subscription_id);
        out.put(b",");
        filter.write_json(out);
        out.put(b",\"");
        out.put(crate::hex::encode(message).as_bytes());
        out.put(b"\"]");
    }

    /// `["NEG-MSG",<id>,<hex message>]` (either side)
    pub fn neg_msg<S: Sink + ?Sized>(out: &mut S, subscription_id: &str, message: &[u8]) {
        out.put(b"[\"NEG-MSG\",");
        write_quoted(out, subscription_id);
        out.put(b",\"");
        out.put(crate::hex::encode(message).as_bytes());
        out.put(b"\"]");
    }

    /// `["NEG-CLOSE",<id>]`
    pub fn neg_close<S: Sink + ?Sized>(out: &mut S, subscription_id: &str) {
        out.put(b"[\"NEG-CLOSE\",");
        write_quoted(out, subscription_id);
        out.put(b"]");
    }

    /// `["NEG-ERR",<id>,<reason>]`
    pub fn neg_err<S: Sink + ?Sized>(out: &mut S, subscription_id: &str, message: &str) {
        out.put(b"[\"NEG-ERR\",");
        write_quoted(out, subscription_id);
        out.put(b",");
        write_quoted(out, message);
        out.put(b"]");
    }

    /// `["COUNT",<id>,{"count":<n>}]` (relay side)
    pub fn count_result<S: Sink + ?Sized>(out: &mut S, subscription_id: &str, count: u64) {
        out.put(b"[\"COUNT\",");
        write_quoted(out, subscription_id);
        out.put(b",{\"count\":");
        put_u64(out, count);
        out.put(b"}]");
    }
}

impl RelayMessage<'_> {
    /// Writes the message as compact JSON.
    pub fn write_json<S: Sink + ?Sized>(&self, out: &mut S) {
        match self {
            RelayMessage::Event {
                subscription_id,
                event,
            } => write::relay_event(out, subscription_id, event),
            RelayMessage::Ok {
                event_id,
                accepted,
                message,
            } => write::ok(out, event_id, *accepted, message),
            RelayMessage::Eose(id) => write::eose(out, id),
            RelayMessage::Closed {
                subscription_id,
                message,
            } => write::closed(out, subscription_id, message),
            RelayMessage::Notice(m) => write::notice(out, m),
            RelayMessage::Auth(c) => write::auth_challenge(out, c),
            RelayMessage::Count {
                subscription_id,
                count,
            } => write::count_result(out, subscription_id, *count),
            RelayMessage::NegMsg {
                subscription_id,
                message,
            } => write::neg_msg(out, subscription_id, message),
            RelayMessage::NegErr {
                subscription_id,
                message,
            } => write::neg_err(out, subscription_id, message),
        }
    }
}

/// An event as found on one line of a JSON Lines file: a bare event object,
/// `["EVENT",{...}]` or `["EVENT","<sub>",{...}]`.
pub fn parse_event_line<'a>(input: &'a [u8], limits: &Limits) -> Result<EventRef<'a>, Error> {
    let mut r = Reader::new(input, limits.max_message_bytes, limits)?;
    match r.peek() {
        Some(b'{') => {
            if input.len() > limits.max_event_bytes {
                return Err(Error::at(ErrorKind::TooLarge, limits.max_event_bytes));
            }
            let event = read_event(&mut r)?;
            r.finish()?;
            Ok(event)
        }
        Some(b'[') => {
            let kind = message_type(&mut r)?;
            if kind.raw() != "EVENT" {
                return Err(Error::at(ErrorKind::UnknownMessage, 1));
            }
            next_element(&mut r)?;
            if r.peek() == Some(b'"') {
                subscription_id(&mut r)?;
                next_element(&mut r)?;
            }
            let event = read_event(&mut r)?;
            end_message(&mut r)?;
            Ok(event)
        }
        _ => Err(r.syntax()),
    }
}
