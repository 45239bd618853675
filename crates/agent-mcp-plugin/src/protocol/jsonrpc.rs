//! JSON-RPC 2.0 framing: ids and incoming messages (the error objects are [`super::error`]'s).
//!
//! Parsing is deliberately strict about the envelope (one object, `"jsonrpc": "2.0"`, a string
//! or number id) and lenient about nothing else: a batch array or a malformed envelope becomes
//! a JSON-RPC error the caller can read, never a panic.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use super::error::{ErrorObject, code};
use super::method::Method;

/// A JSON-RPC request id: a string or a number, echoed back unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s}"),
        }
    }
}

/// One incoming JSON-RPC message, as far as the envelope goes: its `params` as a JSON object
/// ([`Incoming::from_slice`]), or as [`ReadParams`] ([`Incoming::read`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming<P = Map<String, Value>> {
    Request {
        id: RequestId,
        method: Method,
        params: P,
    },
    Notification {
        method: Method,
        params: P,
    },
    /// A response or error object sent by the peer (legacy clients may POST these).
    Response {
        id: Option<RequestId>,
    },
}

/// A message's `params` as [`Incoming::read`] gives them: a `tools/call`'s read straight into
/// their typed fields, any other method's as a JSON object.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadParams {
    /// The params object (absent or `null`: empty).
    Map(Map<String, Value>),
    /// The params of a `tools/call`.
    ToolsCall(Box<ToolsCallRead>),
}

/// The params of a `tools/call` as [`Incoming::read`] reads them: what
/// [`Params::parse`](super::Params::parse) keeps of them, and `_meta`, which the era
/// classification, the routing headers' check and the server span read; any other member is
/// parsed (so refused for what a `Value` parse refuses) and dropped, as `Params::parse` drops it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolsCallRead {
    pub params: super::ToolsCallParams,
    /// `_meta`, if present.
    pub meta: Option<MetaRead>,
}

/// A `tools/call`'s `_meta` as [`Incoming::read`] reads it.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaRead {
    /// An object: the members that classify the request (as sent), and the others.
    Object {
        protocol_version: Option<Value>,
        client_capabilities: Option<Value>,
        client_info: Option<Value>,
        /// Every other member (the caller's trace context, …).
        other: Map<String, Value>,
    },
    /// Anything but an object: nothing in it is read.
    NotAnObject,
}

impl ReadParams {
    /// The members of `_meta` that classify the request, when `_meta` is an object.
    pub fn meta_fields(&self) -> Option<super::MetaFields<'_>> {
        match self {
            ReadParams::Map(map) => match map.get("_meta") {
                Some(Value::Object(meta)) => Some(super::MetaFields::of(meta)),
                _ => None,
            },
            ReadParams::ToolsCall(call) => match &call.meta {
                Some(MetaRead::Object {
                    protocol_version,
                    client_capabilities,
                    client_info,
                    ..
                }) => Some(super::MetaFields {
                    protocol_version: protocol_version.as_ref(),
                    client_capabilities: client_capabilities.as_ref(),
                    client_info: client_info.as_ref(),
                }),
                _ => None,
            },
        }
    }

    /// When `_meta` is an object, its members besides (maybe with) the three of
    /// [`Self::meta_fields`]: what the caller's trace context is read from.
    pub fn meta_others(&self) -> Option<&Map<String, Value>> {
        match self {
            ReadParams::Map(map) => match map.get("_meta") {
                Some(Value::Object(meta)) => Some(meta),
                _ => None,
            },
            ReadParams::ToolsCall(call) => match &call.meta {
                Some(MetaRead::Object { other, .. }) => Some(other),
                _ => None,
            },
        }
    }

    /// The member `key` when it is a string (of a `tools/call`: its `name`; the typed read
    /// keeps no other string).
    pub fn str(&self, key: &str) -> Option<&str> {
        match self {
            ReadParams::Map(map) => map.get(key).and_then(Value::as_str),
            ReadParams::ToolsCall(call) if key == "name" => call.params.name.as_deref(),
            ReadParams::ToolsCall(_) => None,
        }
    }

    /// The typed [`Params`](super::Params) of `method`, the method these params came with.
    pub fn into_params(self, method: &Method) -> super::Params {
        match self {
            ReadParams::Map(map) => super::Params::parse(method, map),
            ReadParams::ToolsCall(call) => super::Params::ToolsCall(call.params),
        }
    }

    /// As a JSON object again: for the object parses, which never read typed.
    fn into_map(self) -> Map<String, Value> {
        match self {
            ReadParams::Map(map) => map,
            ReadParams::ToolsCall(_) => Map::new(),
        }
    }
}

impl Incoming<ReadParams> {
    /// [`Incoming::from_slice`], but a `tools/call`'s params are read straight into their
    /// typed fields ([`ReadParams::ToolsCall`]) instead of a JSON object first: no map of the
    /// params to build and take apart again. The same answers, errors included: the same
    /// parser reads every part, whatever is not kept is parsed as a `Value`; `params` that come
    /// before `method` are read as an object.
    pub fn read(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let message = Fields::read(bytes, true)?.into_incoming()?;
        if let Incoming::Request { method, params, .. } | Incoming::Notification { method, params } =
            &message
            && *method != Method::ToolsCall
            && matches!(params, ReadParams::ToolsCall(_))
        {
            // A later `method` member replaced the `tools/call` the params were read for
            // (the last of a repeated key counts): read the message again, params as an object.
            return Incoming::from_slice(bytes).map(Incoming::map_params(ReadParams::Map));
        }
        Ok(message)
    }
}

impl<P> Incoming<P> {
    /// The same message with its params turned by `f`.
    fn map_params<Q>(f: impl FnOnce(P) -> Q) -> impl FnOnce(Incoming<P>) -> Incoming<Q> {
        move |message| match message {
            Incoming::Request { id, method, params } => Incoming::Request {
                id,
                method,
                params: f(params),
            },
            Incoming::Notification { method, params } => Incoming::Notification {
                method,
                params: f(params),
            },
            Incoming::Response { id } => Incoming::Response { id },
        }
    }
}

/// Why an incoming message could not be read; carries the id when one was readable so the
/// error response can echo it.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvelopeError {
    pub id: Option<RequestId>,
    pub error: ErrorObject,
}

impl Incoming {
    /// Parses one message from raw bytes, straight into the envelope's fields: no `Value` tree
    /// for the envelope itself, a known method matched without a copy, only `params` (and keys
    /// the envelope does not use) parsed as values. The same answer, errors and messages
    /// included, as parsing a `Value` and [`Incoming::from_value`]: every part is read by the
    /// same parser, so what does not parse fails at the same place.
    pub fn from_slice(bytes: &[u8]) -> Result<Incoming, EnvelopeError> {
        Fields::read(bytes, false)?
            .into_incoming()
            .map(Incoming::map_params(ReadParams::into_map))
    }

    /// Classifies an already-parsed JSON value.
    pub fn from_value(value: Value) -> Result<Incoming, EnvelopeError> {
        let mut obj = match value {
            Value::Object(obj) => obj,
            Value::Array(_) => {
                return Err(fail(None, BATCHES_UNSUPPORTED));
            }
            _ => {
                return Err(fail(None, NOT_AN_OBJECT));
            }
        };
        let id = match obj.remove("id") {
            None => None,
            Some(Value::Null) => None,
            Some(Value::String(s)) => Some(RequestId::String(s)),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(i) => Some(RequestId::Number(i)),
                None => return Err(fail(None, BAD_ID)),
            },
            Some(_) => return Err(fail(None, BAD_ID)),
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(fail(id, BAD_JSONRPC));
        }
        let Some(method) = obj.remove("method") else {
            if obj.contains_key("result") || obj.contains_key("error") {
                return Ok(Incoming::Response { id });
            }
            return Err(fail(id, NO_METHOD));
        };
        let Value::String(method) = method else {
            return Err(fail(id, BAD_METHOD));
        };
        let method = Method::from(method);
        let params = obj.remove("params").map(ParamsField::Value);
        request_or_notification(id, method, params).map(Incoming::map_params(ReadParams::into_map))
    }
}

/// An invalid-request refusal of the message with `id`.
fn fail(id: Option<RequestId>, msg: &str) -> EnvelopeError {
    EnvelopeError {
        id,
        error: ErrorObject::invalid_request(msg.to_owned()),
    }
}

/// The last check of every parse, `params` (absent, `null` or an object), and the message
/// that `id` makes of the rest: a request with one, a notification without.
fn request_or_notification(
    id: Option<RequestId>,
    method: Method,
    params: Option<ParamsField>,
) -> Result<Incoming<ReadParams>, EnvelopeError> {
    let params = match params {
        None | Some(ParamsField::Value(Value::Null)) => ReadParams::Map(Map::new()),
        Some(ParamsField::Value(Value::Object(p))) => ReadParams::Map(p),
        Some(ParamsField::ToolsCall(call)) => ReadParams::ToolsCall(call),
        Some(ParamsField::Value(_) | ParamsField::NotAnObject) => {
            return Err(EnvelopeError {
                id,
                error: ErrorObject::invalid_params(BAD_PARAMS),
            });
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

const BATCHES_UNSUPPORTED: &str =
    "JSON-RPC batches are not supported; send one message per request";
const NOT_AN_OBJECT: &str = "a JSON-RPC message must be a JSON object";
const BAD_ID: &str = "`id` must be a string or an integer";
const BAD_JSONRPC: &str = "`jsonrpc` must be \"2.0\"";
const NO_METHOD: &str = "a request needs a `method`";
const BAD_METHOD: &str = "`method` must be a string";
const BAD_PARAMS: &str = "`params` must be an object";

/// A message's top level as [`Incoming::from_slice`] reads it.
enum Top {
    Object(Fields),
    Array,
    /// A string, number, boolean or null.
    Other,
}

/// The envelope's members (a repeated key: the last one counts, as in a `Value` map).
#[derive(Default)]
struct Fields {
    id: IdField,
    /// `jsonrpc` is the string `"2.0"`.
    jsonrpc_2_0: bool,
    method: MethodField,
    params: Option<ParamsField>,
    /// `result` or `error` is present (a response sent by the peer).
    reply: bool,
}

/// `params` as read from the body.
enum ParamsField {
    Value(Value),
    /// An object read as a `tools/call`'s params (the method came first).
    ToolsCall(Box<ToolsCallRead>),
    /// Neither an object nor `null`, read for a `tools/call`.
    NotAnObject,
}

/// `id` as read from the body.
#[derive(Default)]
enum IdField {
    /// Absent or `null`.
    #[default]
    None,
    Id(RequestId),
    /// Anything but a string or an integer that fits an `i64`.
    Invalid,
}

/// `method` as read from the body.
#[derive(Default)]
enum MethodField {
    #[default]
    Absent,
    Method(Method),
    NotAString,
}

impl Fields {
    /// The envelope's members of `bytes`; `typed`: a `tools/call`'s params as their typed fields
    /// when the method comes before them.
    fn read(bytes: &[u8], typed: bool) -> Result<Fields, EnvelopeError> {
        use serde::de::DeserializeSeed;
        // A body that is valid UTF-8 as a whole (every one we answer) is read as a `str`, so
        // the parser does not check each string again; any other gets the byte parser and
        // its error, at the very place a `Value` parse reports it.
        let seed = envelope_de::TopSeed { typed };
        let top = match std::str::from_utf8(bytes) {
            Ok(text) => {
                let mut de = serde_json::Deserializer::from_str(text);
                seed.deserialize(&mut de)
                    .and_then(|top| de.end().map(|()| top))
            }
            Err(_) => {
                let mut de = serde_json::Deserializer::from_slice(bytes);
                seed.deserialize(&mut de)
                    .and_then(|top| de.end().map(|()| top))
            }
        };
        let top = top.map_err(|e| EnvelopeError {
            id: None,
            error: ErrorObject::parse_error(e),
        })?;
        match top {
            Top::Object(fields) => Ok(fields),
            Top::Array => Err(fail(None, BATCHES_UNSUPPORTED)),
            Top::Other => Err(fail(None, NOT_AN_OBJECT)),
        }
    }

    /// The checks of [`Incoming::from_value`], in the same order, with the same errors.
    fn into_incoming(self) -> Result<Incoming<ReadParams>, EnvelopeError> {
        let id = match self.id {
            IdField::None => None,
            IdField::Id(id) => Some(id),
            IdField::Invalid => return Err(fail(None, BAD_ID)),
        };
        if !self.jsonrpc_2_0 {
            return Err(fail(id, BAD_JSONRPC));
        }
        let method = match self.method {
            MethodField::Method(method) => method,
            MethodField::NotAString => return Err(fail(id, BAD_METHOD)),
            MethodField::Absent if self.reply => return Ok(Incoming::Response { id }),
            MethodField::Absent => return Err(fail(id, NO_METHOD)),
        };
        request_or_notification(id, method, self.params)
    }
}

mod envelope_de {
    //! The visitors behind [`Incoming::from_slice`](super::Incoming::from_slice). Whatever
    //! they do not keep is still parsed as a `Value` (and dropped), so a body is refused for
    //! exactly what a `Value` parse refuses (a number out of range, a lone surrogate, …).

    use std::fmt;

    use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::Value;

    use super::{
        Fields, IdField, MetaRead, MethodField, ParamsField, RequestId, ToolsCallRead, Top,
    };
    use crate::protocol::Method;
    use crate::protocol::era::{META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION};

    fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<Value>()?.is_some() {}
        Ok(())
    }

    fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<String, Value>()?.is_some() {}
        Ok(())
    }

    /// The visits of a boolean, a non-integer number (giving `$other`) and an array (parsed
    /// through first, giving `$seq`).
    macro_rules! leaves {
        ($ty:ty, seq: $seq:expr, other: $other:expr) => {
            fn visit_bool<E>(self, _: bool) -> Result<$ty, E> {
                Ok($other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<$ty, E> {
                Ok($other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<$ty, A::Error> {
                drain_seq(seq).map(|()| $seq)
            }
        };
    }

    /// The visits that map a member to `other`: a boolean, a non-integer number, and an array
    /// or object (parsed through first).
    macro_rules! scalars {
        ($ty:ty, other: $other:expr) => {
            leaves!($ty, seq: $other, other: $other);
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<$ty, A::Error> {
                drain_map(map).map(|()| $other)
            }
        };
    }

    /// The visits of everything but an object (for a visitor of one): `null` gives `$unit`,
    /// an array (parsed through) `$seq`, any other value `$other`.
    macro_rules! non_objects {
        ($ty:ty, unit: $unit:expr, seq: $seq:expr, other: $other:expr) => {
            null_and_integers!($ty, null: $unit, other: $other);
            leaves!($ty, seq: $seq, other: $other);
            fn visit_str<E>(self, _: &str) -> Result<$ty, E> {
                Ok($other)
            }
        };
    }

    /// The visits of `null` and an integer, for a member that keeps neither (`null` gives
    /// `$null` when given).
    macro_rules! null_and_integers {
        ($ty:ty, other: $other:expr) => {
            null_and_integers!($ty, null: $other, other: $other);
        };
        ($ty:ty, null: $null:expr, other: $other:expr) => {
            fn visit_unit<E>(self) -> Result<$ty, E> {
                Ok($null)
            }
            fn visit_i64<E>(self, _: i64) -> Result<$ty, E> {
                Ok($other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<$ty, E> {
                Ok($other)
            }
        };
    }

    /// Reads a message's top level; `typed`: a `tools/call`'s params as their typed fields
    /// when `method` came before them.
    pub(super) struct TopSeed {
        pub(super) typed: bool,
    }

    impl<'de> de::DeserializeSeed<'de> for TopSeed {
        type Value = Top;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Top, D::Error> {
            deserializer.deserialize_any(TopVisitor { typed: self.typed })
        }
    }

    struct TopVisitor {
        typed: bool,
    }

    impl<'de> Visitor<'de> for TopVisitor {
        type Value = Top;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON-RPC message")
        }

        non_objects!(Top, unit: Top::Other, seq: Top::Array, other: Top::Other);
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
            let mut fields = Fields::default();
            while let Some(key) = map.next_key::<Key>()? {
                match key {
                    Key::Id => fields.id = map.next_value::<IdDe>()?.0,
                    Key::Jsonrpc => fields.jsonrpc_2_0 = map.next_value::<Jsonrpc>()?.0,
                    Key::Method => fields.method = map.next_value::<MethodDe>()?.0,
                    Key::Params => {
                        let tools_call = self.typed
                            && matches!(fields.method, MethodField::Method(Method::ToolsCall));
                        fields.params = Some(if tools_call {
                            map.next_value::<ToolsCallDe>()?.0
                        } else {
                            ParamsField::Value(map.next_value::<Value>()?)
                        });
                    }
                    Key::Result | Key::Error => {
                        map.next_value::<Value>()?;
                        fields.reply = true;
                    }
                    Key::Other => {
                        map.next_value::<Value>()?;
                    }
                }
            }
            Ok(Top::Object(fields))
        }
    }

    /// A member name read as `$name`: each listed name one variant, any other `$other`.
    macro_rules! member_names {
        (
            $(#[$doc:meta])*
            $name:ident via $visitor:ident {
                $($wire:literal => $variant:ident,)*
                _ => $other:ident
            }
        ) => {
            $(#[$doc])*
            enum $name {
                $($variant,)*
                $other,
            }

            impl<'de> de::Deserialize<'de> for $name {
                fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    deserializer.deserialize_str($visitor)
                }
            }

            struct $visitor;

            impl Visitor<'_> for $visitor {
                type Value = $name;

                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a member name")
                }

                fn visit_str<E>(self, key: &str) -> Result<$name, E> {
                    Ok(match key {
                        $($wire => $name::$variant,)*
                        _ => $name::$other,
                    })
                }
            }
        };
    }

    member_names! {
        /// A member name of the envelope.
        Key via KeyVisitor {
            "id" => Id,
            "jsonrpc" => Jsonrpc,
            "method" => Method,
            "params" => Params,
            "result" => Result,
            "error" => Error,
            _ => Other
        }
    }

    /// A member the envelope keeps: the newtype `$wrapper` read through `$visitor`, with the
    /// visits in braces (`scalars!` for the values a member does not keep, `non_objects!` and
    /// a `visit_map` for one read as an object).
    macro_rules! member {
        (
            $(#[$doc:meta])*
            $wrapper:ident($ty:ty) via $visitor:ident,
            expecting $expecting:literal,
            { $($visits:tt)* }
        ) => {
            $(#[$doc])*
            struct $wrapper($ty);

            impl<'de> de::Deserialize<'de> for $wrapper {
                fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    deserializer.deserialize_any($visitor).map($wrapper)
                }
            }

            struct $visitor;

            impl<'de> Visitor<'de> for $visitor {
                type Value = $ty;

                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str($expecting)
                }

                $($visits)*
            }
        };
    }

    member! {
        /// `id`: kept if a string or an `i64`, else marked invalid (after parsing it through).
        IdDe(IdField) via IdVisitor,
        expecting "a request id",
        {
            scalars!(IdField, other: IdField::Invalid);
            /// `null`: no id.
            fn visit_unit<E>(self) -> Result<IdField, E> {
                Ok(IdField::None)
            }
            fn visit_i64<E>(self, n: i64) -> Result<IdField, E> {
                Ok(IdField::Id(RequestId::Number(n)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<IdField, E> {
                Ok(i64::try_from(n).map_or(IdField::Invalid, |n| IdField::Id(RequestId::Number(n))))
            }
            fn visit_str<E>(self, s: &str) -> Result<IdField, E> {
                Ok(IdField::Id(RequestId::String(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<IdField, E> {
                Ok(IdField::Id(RequestId::String(s)))
            }
        }
    }

    member! {
        /// `jsonrpc`: is it the string `"2.0"`?
        Jsonrpc(bool) via JsonrpcVisitor,
        expecting "\"2.0\"",
        {
            scalars!(bool, other: false);
            null_and_integers!(bool, other: false);
            fn visit_str<E>(self, s: &str) -> Result<bool, E> {
                Ok(s == "2.0")
            }
        }
    }

    member! {
        /// `method`: a known name without a copy, any other string kept, anything else marked.
        MethodDe(MethodField) via MethodVisitor,
        expecting "a method name",
        {
            scalars!(MethodField, other: MethodField::NotAString);
            null_and_integers!(MethodField, other: MethodField::NotAString);
            fn visit_str<E>(self, s: &str) -> Result<MethodField, E> {
                Ok(MethodField::Method(Method::from(s)))
            }
            fn visit_string<E>(self, s: String) -> Result<MethodField, E> {
                Ok(MethodField::Method(Method::from(s)))
            }
        }
    }

    member! {
        /// The params of a `tools/call`: an object read into its typed fields, `null` kept as
        /// it is, anything else marked (after parsing it through).
        ToolsCallDe(ParamsField) via ToolsCallVisitor,
        expecting "the params of a tools/call",
        {
            non_objects!(
                ParamsField,
                unit: ParamsField::Value(Value::Null),
                seq: ParamsField::NotAnObject,
                other: ParamsField::NotAnObject
            );
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ParamsField, A::Error> {
                // What `Params::parse` keeps, and `_meta`; a repeated key's last value counts.
                let mut call = ToolsCallRead::default();
                let params = &mut call.params;
                while let Some(key) = map.next_key::<ParamKey>()? {
                    match key {
                        ParamKey::Name => params.name = map.next_value::<NameDe>()?.0,
                        ParamKey::Arguments => params.arguments = Some(map.next_value()?),
                        ParamKey::Task => params.task = Some(map.next_value()?),
                        ParamKey::InputResponses => {
                            params.input_responses = Some(map.next_value()?)
                        }
                        ParamKey::RequestState => params.request_state = Some(map.next_value()?),
                        ParamKey::Meta => call.meta = Some(map.next_value::<MetaDe>()?.0),
                        ParamKey::Other => {
                            map.next_value::<Value>()?;
                        }
                    }
                }
                Ok(ParamsField::ToolsCall(Box::new(call)))
            }
        }
    }

    member! {
        /// A `tools/call`'s `_meta`: an object read into [`MetaRead::Object`], anything else
        /// marked (after parsing it through).
        MetaDe(MetaRead) via MetaVisitor,
        expecting "a _meta object",
        {
            non_objects!(
                MetaRead,
                unit: MetaRead::NotAnObject,
                seq: MetaRead::NotAnObject,
                other: MetaRead::NotAnObject
            );
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetaRead, A::Error> {
                // A repeated key's last value counts, as in a `Value` map.
                let (mut protocol_version, mut client_capabilities, mut client_info) =
                    (None, None, None);
                let mut other = serde_json::Map::new();
                while let Some(key) = map.next_key::<MetaKey>()? {
                    match key {
                        MetaKey::ProtocolVersion => protocol_version = Some(map.next_value()?),
                        MetaKey::ClientCapabilities => {
                            client_capabilities = Some(map.next_value()?)
                        }
                        MetaKey::ClientInfo => client_info = Some(map.next_value()?),
                        MetaKey::Other(key) => {
                            other.insert(key, map.next_value()?);
                        }
                    }
                }
                Ok(MetaRead::Object {
                    protocol_version,
                    client_capabilities,
                    client_info,
                    other,
                })
            }
        }
    }

    /// A member name of `_meta`.
    enum MetaKey {
        ProtocolVersion,
        ClientCapabilities,
        ClientInfo,
        Other(String),
    }

    impl<'de> de::Deserialize<'de> for MetaKey {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_str(MetaKeyVisitor)
        }
    }

    struct MetaKeyVisitor;

    impl Visitor<'_> for MetaKeyVisitor {
        type Value = MetaKey;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a member name")
        }

        fn visit_str<E>(self, key: &str) -> Result<MetaKey, E> {
            Ok(MetaKey::known(key).unwrap_or_else(|| MetaKey::Other(key.to_owned())))
        }

        fn visit_string<E>(self, key: String) -> Result<MetaKey, E> {
            Ok(MetaKey::known(&key).unwrap_or(MetaKey::Other(key)))
        }
    }

    impl MetaKey {
        fn known(key: &str) -> Option<MetaKey> {
            match key {
                META_PROTOCOL_VERSION => Some(MetaKey::ProtocolVersion),
                META_CLIENT_CAPABILITIES => Some(MetaKey::ClientCapabilities),
                META_CLIENT_INFO => Some(MetaKey::ClientInfo),
                _ => None,
            }
        }
    }

    member! {
        /// A `tools/call`'s `name`: kept if a string (as `Params::parse` keeps it).
        NameDe(Option<String>) via NameVisitor,
        expecting "a tool name",
        {
            scalars!(Option<String>, other: None);
            null_and_integers!(Option<String>, other: None);
            fn visit_str<E>(self, s: &str) -> Result<Option<String>, E> {
                Ok(Some(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Option<String>, E> {
                Ok(Some(s))
            }
        }
    }

    member_names! {
        /// A member name of a `tools/call`'s params.
        ParamKey via ParamKeyVisitor {
            "name" => Name,
            "arguments" => Arguments,
            "task" => Task,
            "inputResponses" => InputResponses,
            "requestState" => RequestState,
            "_meta" => Meta,
            _ => Other
        }
    }
}

/// Serialises a response envelope (result or error) with the given id.
pub fn response_json(id: Option<&RequestId>, outcome: Result<Value, &ErrorObject>) -> Value {
    let mut obj = Map::with_capacity(3);
    obj.insert("jsonrpc".into(), Value::from("2.0"));
    obj.insert(
        "id".into(),
        match id {
            Some(id) => serde_json::to_value(id).unwrap_or(Value::Null),
            None => Value::Null,
        },
    );
    match outcome {
        Ok(result) => obj.insert("result".into(), result),
        Err(error) => obj.insert(
            "error".into(),
            serde_json::to_value(error).unwrap_or(Value::Null),
        ),
    };
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_notification_and_response_are_told_apart() {
        let req =
            Incoming::from_slice(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).unwrap();
        assert_eq!(
            req,
            Incoming::Request {
                id: RequestId::Number(7),
                method: "tools/list".into(),
                params: Map::new()
            }
        );
        let note =
            Incoming::from_slice(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .unwrap();
        assert!(matches!(note, Incoming::Notification { .. }));
        let resp = Incoming::from_slice(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(
            resp,
            Incoming::Response {
                id: Some(RequestId::String("a".into()))
            }
        );
    }

    #[test]
    fn bad_envelopes_are_errors_with_the_id_when_readable() {
        let e = Incoming::from_slice(b"{nope").unwrap_err();
        assert_eq!(e.error.code, code::PARSE_ERROR);
        let e = Incoming::from_slice(b"[]").unwrap_err();
        assert_eq!(e.error.code, code::INVALID_REQUEST);
        assert!(e.error.message.contains("batches"));
        let e = Incoming::from_slice(br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).unwrap_err();
        assert_eq!(e.id, Some(RequestId::Number(3)));
        let e = Incoming::from_slice(br#"{"jsonrpc":"2.0","id":3,"method":"x","params":[1]}"#)
            .unwrap_err();
        assert_eq!(e.error.code, code::INVALID_PARAMS);
        let e = Incoming::from_slice(br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#).unwrap_err();
        assert_eq!(e.error.code, code::INVALID_REQUEST);
    }

    /// The envelope as [`Incoming::from_value`] reads it from a parsed `Value`: what
    /// [`Incoming::from_slice`] did before it parsed the envelope straight from the bytes.
    fn through_a_value(bytes: &[u8]) -> Result<Incoming, EnvelopeError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| EnvelopeError {
            id: None,
            error: ErrorObject::parse_error(e),
        })?;
        Incoming::from_value(value)
    }

    /// What the edge reads of a message: the envelope, the typed params, and the `_meta` object
    /// and `name` string the era classification, the routing headers and the span read.
    type Seen = (
        Option<RequestId>,
        Option<Method>,
        Option<super::super::Params>,
        Option<[Option<Value>; 3]>,
        Option<Map<String, Value>>,
        Option<String>,
    );

    fn seen(message: Incoming<ReadParams>) -> Seen {
        use crate::protocol::era::{
            META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION,
        };
        let (id, method, params) = match message {
            Incoming::Request { id, method, params } => (Some(id), method, params),
            Incoming::Notification { method, params } => (None, method, params),
            Incoming::Response { id } => return (id, None, None, None, None, None),
        };
        let fields = params.meta_fields().map(|m| {
            [m.protocol_version, m.client_capabilities, m.client_info].map(|v| v.cloned())
        });
        let mut others = params.meta_others().cloned();
        for key in [
            META_PROTOCOL_VERSION,
            META_CLIENT_CAPABILITIES,
            META_CLIENT_INFO,
        ] {
            others.as_mut().map(|o| o.remove(key));
        }
        let name = params.str("name").map(str::to_owned);
        let params = params.into_params(&method);
        (id, Some(method), Some(params), fields, others, name)
    }

    /// [`Incoming::read`] as the edge sees it, against the object parse of the same body.
    fn read_and_parse(body: &[u8]) -> (Result<Seen, EnvelopeError>, Result<Seen, EnvelopeError>) {
        let as_map = |message: Incoming| match message {
            Incoming::Request { id, method, params } => Incoming::Request {
                id,
                method,
                params: ReadParams::Map(params),
            },
            Incoming::Notification { method, params } => Incoming::Notification {
                method,
                params: ReadParams::Map(params),
            },
            Incoming::Response { id } => Incoming::Response { id },
        };
        (
            Incoming::read(body).map(seen),
            through_a_value(body).map(as_map).map(seen),
        )
    }

    #[test]
    fn the_typed_read_of_a_tools_call_is_typed() {
        let body = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_status","arguments":{"task_id":"t"},"_meta":{"a":1}}}"#;
        let Ok(Incoming::Request {
            params: ReadParams::ToolsCall(call),
            ..
        }) = Incoming::read(body)
        else {
            panic!("a typed tools/call");
        };
        assert_eq!(call.params.name.as_deref(), Some("agent_status"));
        assert_eq!(call.params.arguments, Some(json!({"task_id": "t"})));
        let Some(MetaRead::Object { other, .. }) = call.meta else {
            panic!("_meta is an object");
        };
        assert_eq!(Value::Object(other), json!({"a": 1}));
    }

    #[test]
    fn the_typed_read_answers_as_the_object_parse_on_awkward_tools_calls() {
        let bodies: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_status","arguments":{"task_id":"t"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            br#"{"params":{"name":"agent_status"},"jsonrpc":"2.0","id":2,"method":"tools/call"}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_status"},"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"},"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a"},"params":null}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":null,"params":{"name":"a"}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":7,"name":"b"}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b","name":[1]}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"n\u0061me":"b","_meta":7}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"x":[]},"_meta":"s"}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":null}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":[{"a":1e999}]}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"a":1e999}}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"traceparent":"00-x","io.modelcontextprotocol/protocolVersion":2026,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[],"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol\/clientInfo":{"name":"d"},"traceparent":"00-y"}}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":{"v":1},"x\u0041":7}}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"task":{"ttl":1},"inputResponses":{"k":{}},"requestState":"s","other":{"deep":[1,2]}}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":null,"arguments":[1]}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"other":1e999}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"\ud800"}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{"a":1e999}}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[1,{"a":1e999}]}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[1]}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"x"}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":1.5}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":true}"#,
            br#"{"jsonrpc":"2.0","method":"tools/call","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a",}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a"}"#,
            br#"{"jsonrpc":"1.0","id":2,"method":"tools/call","params":{"name":"a"}}"#,
            br#"{"jsonrpc":"2.0","id":2.5,"method":"tools/call","params":{"name":"a"}}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools\/call","params":{"name":"a"}}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}",
        ];
        for body in bodies {
            let (read, parsed) = read_and_parse(body);
            assert_eq!(read, parsed, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn the_direct_parse_answers_as_the_value_parse_on_awkward_bodies() {
        let bodies: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agent_status","arguments":{"task_id":"x"}}}"#,
            br#"{"jsonrpc":"2.0","id":"s\u00e9","method":"unknown/thing","params":null}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1,"id":"later","method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"id":2,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":-0,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            br#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#,
            br#"{"jsonrpc":"2.00","id":1,"method":"ping"}"#,
            br#"{"jsonrpc":["2.0"],"id":1,"method":"ping"}"#,
            br#"{"jsonrpc":null,"id":1,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}"#,
            br#"{"id":1,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":null}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":{"x":[]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0","error":{"code":1},"id":1}"#,
            br#"{"jsonrpc":"2.0","result":null}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":[1]}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","extra":1e999}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","extra":"\ud800"}"#,
            br#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1e999}}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffng\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xff\"}",
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping",}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            b"[1,]",
            b"[1e999]",
            b"[]",
            b"\"2.0\"",
            b"12",
            b"null",
            b"",
            b"   ",
            b"{",
            b"{}",
            b"{\"a\"}",
            b"{1:2}",
            b"\xef\xbb\xbf{}",
        ];
        for body in bodies {
            assert_eq!(
                Incoming::from_slice(body),
                through_a_value(body),
                "{}",
                String::from_utf8_lossy(body)
            );
            let (read, parsed) = read_and_parse(body);
            assert_eq!(read, parsed, "{}", String::from_utf8_lossy(body));
        }
        // Past serde_json's nesting limit, inside a member the envelope does not use.
        let deep = format!(r#"{{"x":{}{}}}"#, "[".repeat(200), "]".repeat(200));
        let answer = Incoming::from_slice(deep.as_bytes());
        assert!(answer.is_err(), "{answer:?}");
        assert_eq!(answer, through_a_value(deep.as_bytes()));
    }

    /// A JSON-ish body from a few envelope keys and values, in any order, repeats allowed,
    /// sometimes cut short or with a stray token.
    fn bodies() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let key = prop::sample::select(vec![
            r#""id""#,
            r#""jsonrpc""#,
            r#""method""#,
            r#""params""#,
            r#""result""#,
            r#""error""#,
            r#""other""#,
            r#""\u0069d""#,
        ]);
        let value = prop::sample::select(vec![
            r#""2.0""#,
            r#""2.00""#,
            "2.0",
            "1",
            "-1",
            "0",
            "-0",
            "1.5",
            "1e2",
            "1e999",
            "18446744073709551616",
            "9223372036854775808",
            "null",
            "true",
            "false",
            r#""x""#,
            r#""tools/call""#,
            r#""ping""#,
            r#""\ud800""#,
            r#""\n""#,
            "{}",
            "[]",
            "[1,{}]",
            r#"{"name":"agent_status","arguments":{"task_id":"t"}}"#,
            r#"{"a":1e999}"#,
        ]);
        let stray = prop::sample::select(vec!["", "", "", ",", "}", "]", "x", " ", "{", "\""]);
        (
            prop::collection::vec((key, value), 0..7),
            stray,
            any::<bool>(),
            any::<prop::sample::Index>(),
            prop::sample::select(vec!["{", "{", "{", "[", ""]),
        )
            .prop_map(|(members, stray, cut, at, open)| {
                let inner: Vec<String> = members.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                let close = match open {
                    "{" => "}",
                    "[" => "]",
                    _ => "",
                };
                let mut body = format!("{open}{}{stray}{close}", inner.join(",")).into_bytes();
                if cut && !body.is_empty() {
                    body.truncate(at.index(body.len()));
                }
                body
            })
    }

    /// A valid request (`jsonrpc`, `id`, `method`, `params` in any order) with one member's
    /// value replaced, one member left out or one added: each check of the envelope alone.
    fn one_member_off() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let value = prop::sample::select(vec![
            r#""2.0""#,
            r#""2.00""#,
            r#"" 2.0""#,
            "2.0",
            "2",
            "1",
            "-0",
            "1.5",
            "1e999",
            "9223372036854775808",
            "null",
            "true",
            r#""x""#,
            r#""tools/call""#,
            r#""\ud800""#,
            "{}",
            "[]",
            r#"{"a":1}"#,
            "[1e999]",
        ]);
        let members = vec![
            (r#""jsonrpc""#, r#""2.0""#),
            (r#""id""#, "7"),
            (r#""method""#, r#""ping""#),
            (r#""params""#, r#"{"name":"agent_status"}"#),
        ];
        (
            Just(members).prop_shuffle(),
            0usize..4,
            0usize..3,
            value,
            prop::sample::select(vec![r#""result""#, r#""error""#, r#""other""#, r#""id""#]),
        )
            .prop_map(|(members, at, how, value, extra)| {
                let mut parts: Vec<String> =
                    members.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                match how {
                    0 => parts[at] = format!("{}:{value}", members[at].0),
                    1 => {
                        parts.remove(at);
                    }
                    _ => parts.insert(at, format!("{extra}:{value}")),
                }
                format!("{{{}}}", parts.join(",")).into_bytes()
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2048, ..Default::default() })]

        /// Each envelope check on its own, against the `Value` path.
        #[test]
        fn one_member_off_answers_as_the_value_parse(body in one_member_off()) {
            proptest::prop_assert_eq!(Incoming::from_slice(&body), through_a_value(&body));
            let (read, parsed) = read_and_parse(&body);
            proptest::prop_assert_eq!(read, parsed);
        }

        /// The direct parse answers every body exactly as the `Value` parse did: the same
        /// message, or the same error with the same id and text.
        #[test]
        fn the_direct_parse_answers_as_the_value_parse(body in bodies()) {
            proptest::prop_assert_eq!(Incoming::from_slice(&body), through_a_value(&body));
            let (read, parsed) = read_and_parse(&body);
            proptest::prop_assert_eq!(read, parsed);
        }
    }

    #[test]
    fn response_envelope_echoes_the_id() {
        let v = response_json(Some(&RequestId::String("x".into())), Ok(json!({})));
        assert_eq!(v, json!({"jsonrpc":"2.0","id":"x","result":{}}));
        let err = ErrorObject::method_not_found("ping");
        let v = response_json(None, Err(&err));
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["code"], -32601);
    }
}
