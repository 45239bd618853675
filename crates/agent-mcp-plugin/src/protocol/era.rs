//! Which protocol era a message belongs to, decided by the protocol-version *value*.
//!
//! Per the MCP 2026-07-28 revision's version rules, the version comes from the body's
//! `_meta["io.modelcontextprotocol/protocolVersion"]`, then the `MCP-Protocol-Version` header,
//! else `2025-03-26`. A version of 2026-07-28 or later is served statelessly (modern); anything
//! earlier is served with the 2025 lifecycle (`initialize`, legacy-shaped results).

use serde_json::{Map, Value};

use super::error::{ErrorObject, code};
use super::method::Method;

/// `_meta` key carrying the per-request protocol version (2026-07-28).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the per-request client capabilities (2026-07-28).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key carrying the client's `Implementation` (optional).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key carrying the server's `Implementation` on modern results.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// A protocol revision this server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

/// The two eras: stateless per-request metadata, or the 2025 `initialize` lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    Modern,
    Legacy,
}

impl ProtocolVersion {
    /// Every version we serve, newest first (the order `server/discover` advertises).
    pub const SUPPORTED: [ProtocolVersion; 4] = [
        ProtocolVersion::V2026_07_28,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
    ];
    /// The newest 2025-era version, offered when an `initialize` asks for one we do not know.
    pub const LATEST_LEGACY: ProtocolVersion = ProtocolVersion::V2025_11_25;
    /// What a legacy HTTP request without a version header speaks.
    pub const LEGACY_DEFAULT: ProtocolVersion = ProtocolVersion::V2025_03_26;

    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        Self::SUPPORTED.into_iter().find(|v| v.as_str() == s)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    pub const fn era(self) -> Era {
        match self {
            ProtocolVersion::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    pub fn supported_strings() -> Vec<&'static str> {
        Self::SUPPORTED.iter().map(|v| v.as_str()).collect()
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Is a raw version string of the modern era? Unknown strings compare as dates, so a future
/// `2027-…` is modern (and then rejected as unsupported with -32022).
pub fn is_modern_str(version: &str) -> bool {
    version >= ProtocolVersion::V2026_07_28.as_str()
}

/// -32022 with `data {supported, requested}`.
pub fn unsupported_version(requested: &str) -> ErrorObject {
    ErrorObject::new(
        code::UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Unsupported protocol version \"{requested}\"; use one of: {}",
            ProtocolVersion::supported_strings().join(", ")
        ),
    )
    .with_data(serde_json::json!({
        "supported": ProtocolVersion::supported_strings(),
        "requested": requested,
    }))
}

/// What the per-request `_meta` of a modern request says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestMeta {
    pub protocol_version: Option<String>,
    pub client_capabilities: Option<Value>,
    pub client_info: Option<Value>,
}

impl RequestMeta {
    /// Reads the `_meta` object of `params`, if any.
    pub fn from_params(params: &Map<String, Value>) -> RequestMeta {
        let Some(Value::Object(meta)) = params.get("_meta") else {
            return RequestMeta::default();
        };
        RequestMeta {
            protocol_version: meta.get(META_PROTOCOL_VERSION).map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
            }),
            client_capabilities: meta.get(META_CLIENT_CAPABILITIES).cloned(),
            client_info: meta.get(META_CLIENT_INFO).cloned(),
        }
    }
}

/// The result of classifying one message.
#[derive(Clone, Debug, PartialEq)]
pub struct Classified {
    pub version: ProtocolVersion,
    /// The client's capabilities declared on *this* request (modern), or `{}`.
    pub client_capabilities: Value,
    pub client_info: Option<Value>,
}

/// Where the protocol version may come from besides the body.
#[derive(Clone, Copy, Debug, Default)]
pub struct VersionHints<'a> {
    /// The `MCP-Protocol-Version` header (HTTP), trimmed.
    pub header: Option<&'a str>,
    /// The version a stdio process negotiated with `initialize`, if it did.
    pub negotiated: Option<ProtocolVersion>,
    /// True on HTTP: a legacy request without any version means 2025-03-26 (transports.mdx).
    /// On stdio a request without `_meta` before any `initialize` is ambiguous and gets -32602.
    pub default_legacy: bool,
}

/// Classifies a request or notification into its era and version, enforcing the modern
/// `_meta` rules. Errors are the JSON-RPC errors to answer with.
pub fn classify(
    method: &Method,
    params: &Map<String, Value>,
    hints: VersionHints<'_>,
) -> Result<Classified, ErrorObject> {
    let meta = match params.get("_meta") {
        Some(Value::Object(meta)) => Some(MetaFields::of(meta)),
        _ => None,
    };
    classify_meta(method, meta, hints)
}

/// The members of a request's `_meta` object that [`classify_meta`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MetaFields<'a> {
    pub protocol_version: Option<&'a Value>,
    pub client_capabilities: Option<&'a Value>,
    pub client_info: Option<&'a Value>,
}

impl<'a> MetaFields<'a> {
    /// The members of the `_meta` object `meta`.
    pub fn of(meta: &'a Map<String, Value>) -> Self {
        Self {
            protocol_version: meta.get(META_PROTOCOL_VERSION),
            client_capabilities: meta.get(META_CLIENT_CAPABILITIES),
            client_info: meta.get(META_CLIENT_INFO),
        }
    }
}

/// [`classify`] of a message whose params' `_meta` is an object with these members (`None`:
/// absent, or not an object).
pub fn classify_meta(
    method: &Method,
    meta: Option<MetaFields<'_>>,
    hints: VersionHints<'_>,
) -> Result<Classified, ErrorObject> {
    // Read in place: only what the answer keeps is copied (the capabilities, the client info).
    let body_version = meta.and_then(|m| m.protocol_version).map(|v| match v {
        Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
        other => std::borrow::Cow::Owned(other.to_string()),
    });
    if let Some(body_version) = body_version.as_deref() {
        if let Some(header) = hints.header
            && header != body_version
        {
            return Err(ErrorObject::new(
                code::HEADER_MISMATCH,
                format!(
                    "Header mismatch: MCP-Protocol-Version is \"{header}\" but _meta says \"{body_version}\"; send the same version in both"
                ),
            ));
        }
        let Some(version) = ProtocolVersion::parse(body_version) else {
            return Err(unsupported_version(body_version));
        };
        if version.era() == Era::Modern {
            let Some(caps) = meta.and_then(|m| m.client_capabilities) else {
                return Err(missing_meta(META_CLIENT_CAPABILITIES));
            };
            if !caps.is_object() {
                return Err(ErrorObject::invalid_params(format!(
                    "_meta[\"{META_CLIENT_CAPABILITIES}\"] must be an object (use {{}} for none)"
                )));
            }
            return Ok(Classified {
                version,
                client_capabilities: caps.clone(),
                client_info: meta.and_then(|m| m.client_info).cloned(),
            });
        }
        return Ok(legacy(version));
    }
    // No version in the body.
    if *method == Method::Initialize {
        // A legacy handshake; the version it asks for is negotiated by the service.
        let version = hints
            .header
            .and_then(ProtocolVersion::parse)
            .filter(|v| v.era() == Era::Legacy)
            .unwrap_or(ProtocolVersion::LEGACY_DEFAULT);
        return Ok(legacy(version));
    }
    if let Some(header) = hints.header {
        if is_modern_str(header) || *method == Method::ServerDiscover {
            return Err(missing_meta(META_PROTOCOL_VERSION));
        }
        return match ProtocolVersion::parse(header) {
            Some(v) => Ok(legacy(v)),
            None => Err(unsupported_version(header)),
        };
    }
    if *method == Method::ServerDiscover {
        return Err(missing_meta(META_PROTOCOL_VERSION));
    }
    if let Some(v) = hints.negotiated {
        return Ok(legacy(v));
    }
    if hints.default_legacy {
        return Ok(legacy(ProtocolVersion::LEGACY_DEFAULT));
    }
    Err(missing_meta(META_PROTOCOL_VERSION))
}

fn legacy(version: ProtocolVersion) -> Classified {
    Classified {
        version,
        client_capabilities: Value::Object(Map::new()),
        client_info: None,
    }
}

fn missing_meta(key: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!(
        "Missing required _meta[\"{key}\"]: every 2026-07-28 request carries \
         {META_PROTOCOL_VERSION} and {META_CLIENT_CAPABILITIES} in params._meta \
         (2025-era clients call initialize first)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    /// [`classify`] of a `method` that has no params.
    fn without_params(method: &str, hints: VersionHints<'_>) -> Result<Classified, ErrorObject> {
        classify(&Method::from(method), &Map::new(), hints)
    }

    fn modern_meta() -> Value {
        json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}})
    }

    #[test]
    fn body_meta_decides_first() {
        let c = classify(
            &Method::from("tools/list"),
            &params(modern_meta()),
            VersionHints::default(),
        )
        .unwrap();
        assert_eq!(c.version, ProtocolVersion::V2026_07_28);
        assert_eq!(c.client_capabilities, json!({}));
    }

    #[test]
    fn header_must_equal_body_version() {
        let hints = VersionHints {
            header: Some("2025-11-25"),
            ..Default::default()
        };
        let e = classify(&Method::from("tools/list"), &params(modern_meta()), hints).unwrap_err();
        assert_eq!(e.code, code::HEADER_MISMATCH);
    }

    #[test]
    fn missing_capabilities_is_invalid_params() {
        let p = params(json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}));
        let e = classify(&Method::from("tools/list"), &p, VersionHints::default()).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        assert!(e.message.contains(META_CLIENT_CAPABILITIES));
    }

    #[test]
    fn unsupported_body_version_is_32022_with_data() {
        let p = params(
            json!({"_meta": {META_PROTOCOL_VERSION: "1900-01-01", META_CLIENT_CAPABILITIES: {}}}),
        );
        let e = classify(&Method::from("tools/list"), &p, VersionHints::default()).unwrap_err();
        assert_eq!(e.code, code::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(e.data.unwrap()["requested"], "1900-01-01");
    }

    #[test]
    fn modern_header_without_meta_is_missing_meta() {
        let hints = VersionHints {
            header: Some("2026-07-28"),
            default_legacy: true,
            ..Default::default()
        };
        let e = without_params("tools/list", hints).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        let no_header = VersionHints {
            header: None,
            ..hints
        };
        let e = without_params("server/discover", no_header).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
    }

    #[test]
    fn legacy_defaults() {
        let http = VersionHints {
            default_legacy: true,
            ..Default::default()
        };
        let with_header = |method, header| without_params(method, VersionHints { header, ..http });
        let c = with_header("tools/list", None).unwrap();
        assert_eq!(c.version, ProtocolVersion::V2025_03_26);
        let c = with_header("tools/list", Some("2025-06-18")).unwrap();
        assert_eq!(c.version, ProtocolVersion::V2025_06_18);
        let e = with_header("tools/list", Some("2024-01-01")).unwrap_err();
        assert_eq!(e.code, code::UNSUPPORTED_PROTOCOL_VERSION);
        // An initialize is legacy whatever header it carries.
        let c = with_header("initialize", Some("2025-11-25")).unwrap();
        assert_eq!(c.version, ProtocolVersion::V2025_11_25);
    }

    #[test]
    fn stdio_without_meta_needs_a_prior_initialize() {
        let e = without_params("tools/list", VersionHints::default()).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        let negotiated = VersionHints {
            negotiated: Some(ProtocolVersion::V2025_11_25),
            ..Default::default()
        };
        let c = without_params("tools/list", negotiated).unwrap();
        assert_eq!(c.version, ProtocolVersion::V2025_11_25);
    }
}
