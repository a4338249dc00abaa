//! The `tools/call` fast path: a tool call that rmcp's stateless service would
//! run without a question is parsed and answered here with rmcp's own model
//! types, without the per-request server rmcp builds (a peer, its channels and
//! three spawned tasks). The tool runs through the same [`super::call`] as on
//! rmcp's path, so both answer the same JSON.
//!
//! A request is taken only when every check rmcp's stateless path makes before
//! it runs a request passes trivially (rmcp 3.9,
//! `StreamableHttpService::handle` and `handle_post`); anything else, and
//! anything in doubt, goes to rmcp unchanged:
//! - `Host`: exactly one, allowed by the same list and the same comparison as
//!   rmcp's (`validate_dns_rebinding_headers`); no `Origin` header at all, so
//!   however rmcp's Origin check is configured it has nothing to refuse;
//! - `Accept`: plain media types, no parameters or quotes, naming both
//!   `application/json` and `text/event-stream` (rmcp honours `q=0` and does not
//!   count wildcards; the gate's own check is looser);
//! - `MCP-Protocol-Version`: absent (rmcp assumes 2025-03-26) or exactly one
//!   known version before 2026-07-28, so `validate_protocol_version_header`
//!   passes and neither the SEP-2243 headers (`validate_standard_headers`) nor
//!   per-request `_meta` (`validate_request_protocol_version_meta`) are required;
//! - no other `Mcp-*` header (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`, a session
//!   id), though rmcp ignores them before 2026-07-28;
//! - the body is what rmcp parses (`ClientJsonRpcMessage`, the same
//!   `serde_json::from_slice`) into a `tools/call` request whose `_meta` names
//!   no protocol version (`message_has_per_request_protocol_version`): such a
//!   request is served by `serve_directly` with the header's version, below
//!   2026-07-28, and not negotiated per request. A call in its plainest form
//!   (see [`Plain`]) is read without rmcp's parse, whose buffering of the
//!   whole message cost a fifth of the path; rmcp reads such a call the same;
//! - rmcp's shutdown token is not cancelled yet.
//!
//! rmcp's stateless JSON response is then what this builds: the handler's
//! result as `ServerResult` without the `resultType: "complete"` of
//! 2026-07-28 (`strip_result_type_for_legacy_peer`), or its error, under the
//! request's id, serialized by serde with status 200 and `application/json`.
//! The `stateless_protocol_metadata_required` checks are off in our
//! configuration (the default), and the tasks guard on `CallToolResponse::Task`
//! has nothing to guard: our tools only answer `CallToolResult`.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use http::uri::Authority;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage, ClientRequest, GetMeta, JsonObject,
    ProtocolVersion, RequestId as JsonRpcId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::http_header::{EVENT_STREAM_MIME_TYPE, HEADER_MCP_PROTOCOL_VERSION, JSON_MIME_TYPE};
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use svc_contract::Problem;
use tokio_util::sync::CancellationToken;

use crate::response::{self, RequestId};

/// What decides whether a request takes the fast path: what rmcp's service
/// was configured with.
pub struct FastPath {
    hosts: AllowedHosts,
    shutdown: CancellationToken,
}

impl FastPath {
    pub fn new(config: &StreamableHttpServerConfig) -> Self {
        Self { hosts: AllowedHosts::new(&config.allowed_hosts), shutdown: config.cancellation_token.clone() }
    }

    /// Whether rmcp's header checks would all pass for a request with these
    /// headers (the gate has already checked the method, `Content-Type` and
    /// the body's size, as rmcp would).
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        !self.shutdown.is_cancelled()
            && self.hosts.admit(headers)
            && !headers.contains_key(header::ORIGIN)
            && accepts_json_and_events_plainly(headers)
            && names_a_settled_version(headers)
            && !headers.keys().any(|name| {
                name.as_str().starts_with("mcp-") && !name.as_str().eq_ignore_ascii_case(HEADER_MCP_PROTOCOL_VERSION)
            })
    }
}

/// `Host` values rmcp allows, compared as rmcp compares them: host names
/// without IPv6 brackets and ignoring ASCII case, and the port when the
/// allowed entry names one.
struct AllowedHosts {
    /// rmcp allows any host when its list is empty.
    any: bool,
    hosts: Vec<(String, Option<u16>)>,
}

impl AllowedHosts {
    fn new(allowed: &[String]) -> Self {
        let hosts = allowed
            .iter()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(|entry| match Authority::try_from(entry) {
                Ok(authority) => (unbracketed(authority.host()).to_ascii_lowercase(), authority.port_u16()),
                Err(_) => (unbracketed(entry).to_ascii_lowercase(), None),
            })
            .collect();
        Self { any: allowed.is_empty(), hosts }
    }

    /// One `Host` header, well formed and allowed. Without one (HTTP/2 puts the
    /// authority in the URI), rmcp decides.
    fn admit(&self, headers: &HeaderMap) -> bool {
        let mut values = headers.get_all(header::HOST).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return false;
        };
        let Some(authority) = value.to_str().ok().and_then(|host| Authority::try_from(host).ok()) else {
            return false;
        };
        let (host, port) = (unbracketed(authority.host()), authority.port_u16());
        self.any
            || self.hosts.iter().any(|(allowed, allowed_port)| {
                allowed.eq_ignore_ascii_case(host) && allowed_port.is_none_or(|allowed| port == Some(allowed))
            })
    }
}

fn unbracketed(host: &str) -> &str {
    host.trim_matches('[').trim_matches(']')
}

/// `Accept` lists both media types by their exact names, with no parameters
/// (so no `q=0`) and no quoted strings.
fn accepts_json_and_events_plainly(headers: &HeaderMap) -> bool {
    let (mut json, mut events) = (false, false);
    for value in &headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains(['"', ';']) {
            return false;
        }
        for essence in value.split(',').map(str::trim) {
            json |= essence.eq_ignore_ascii_case(JSON_MIME_TYPE);
            events |= essence.eq_ignore_ascii_case(EVENT_STREAM_MIME_TYPE);
        }
    }
    json && events
}

/// No `MCP-Protocol-Version`, or one naming a version rmcp knows from before
/// the one that requires SEP-2243 headers and per-request `_meta`.
fn names_a_settled_version(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(HEADER_MCP_PROTOCOL_VERSION).iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(value), None) => value.to_str().is_ok_and(|named| {
            ProtocolVersion::KNOWN_VERSIONS.iter().any(|known| {
                known.as_str() == named
                    && named < ProtocolVersion::STANDARD_HEADERS.as_str()
                    && named < ProtocolVersion::V_2026_07_28.as_str()
            })
        }),
        _ => false,
    }
}

/// The body as rmcp reads it, if it is a `tools/call` request rmcp would run
/// without negotiating a version for it: its id and parameters.
pub fn tool_call(bytes: &[u8]) -> Option<(JsonRpcId, CallToolRequestParams)> {
    plain(bytes).or_else(|| by_rmcp(bytes))
}

/// A tool call in its plainest form: an object of `jsonrpc` ("2.0"), `id`
/// (an integer or a string), `method` ("tools/call") and `params`, an object
/// of `name` and `arguments` (an object, or null or absent for none), each
/// key once, the keys and the values of `jsonrpc` and `method` written
/// without escapes, and nothing else at either level.
/// rmcp reads such a message as a request with that id calling that tool
/// with those arguments, and no `_meta` (the unit tests compare the two
/// reads); any other message (a `_meta`, a float id, an escaped or unknown
/// key, an array where an object stands) is left to rmcp's read. Read by
/// hand, objects only: serde's derived structs also take arrays, which rmcp
/// never reads as a call.
struct Plain<'a> {
    jsonrpc: &'a str,
    id: JsonRpcId,
    method: &'a str,
    params: PlainParams,
}

struct PlainParams {
    name: String,
    arguments: Option<JsonObject>,
}

/// Why a message is not read as plain (never shown: rmcp reads it instead).
const NOT_PLAIN: &str = "not a plain tool call";

impl<'de> Deserialize<'de> for Plain<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Plain<'de>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a plain tool call")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plain<'de>, A::Error> {
                let (mut jsonrpc, mut id, mut method, mut params) = (None, None, None, None);
                while let Some(key) = map.next_key::<&str>()? {
                    match key {
                        "jsonrpc" if jsonrpc.is_none() => jsonrpc = Some(map.next_value()?),
                        "id" if id.is_none() => id = Some(map.next_value::<PlainId>()?.0),
                        "method" if method.is_none() => method = Some(map.next_value()?),
                        "params" if params.is_none() => params = Some(map.next_value()?),
                        _ => return Err(A::Error::custom(NOT_PLAIN)),
                    }
                }
                match (jsonrpc, id, method, params) {
                    (Some(jsonrpc), Some(id), Some(method), Some(params)) => Ok(Plain { jsonrpc, id, method, params }),
                    _ => Err(A::Error::custom(NOT_PLAIN)),
                }
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl<'de> Deserialize<'de> for PlainParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = PlainParams;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("plain tool call parameters")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PlainParams, A::Error> {
                let (mut name, mut arguments) = (None, None);
                while let Some(key) = map.next_key::<&str>()? {
                    match key {
                        "name" if name.is_none() => name = Some(map.next_value()?),
                        "arguments" if arguments.is_none() => arguments = Some(map.next_value()?),
                        _ => return Err(A::Error::custom(NOT_PLAIN)),
                    }
                }
                let name = name.ok_or_else(|| A::Error::custom(NOT_PLAIN))?;
                Ok(PlainParams { name, arguments: arguments.flatten() })
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// An id rmcp reads as it is written: an integer within `i64`, or a string.
struct PlainId(JsonRpcId);

impl<'de> Deserialize<'de> for PlainId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Id;
        impl Visitor<'_> for Id {
            type Value = PlainId;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("an integer or a string")
            }

            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<PlainId, E> {
                Ok(PlainId(JsonRpcId::Number(n)))
            }

            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<PlainId, E> {
                let n = i64::try_from(n).map_err(E::custom)?;
                Ok(PlainId(JsonRpcId::Number(n)))
            }

            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<PlainId, E> {
                Ok(PlainId(JsonRpcId::String(s.into())))
            }
        }
        deserializer.deserialize_any(Id)
    }
}

fn plain(bytes: &[u8]) -> Option<(JsonRpcId, CallToolRequestParams)> {
    let call: Plain = serde_json::from_slice(bytes).ok()?;
    if call.jsonrpc != "2.0" || call.method != "tools/call" {
        return None;
    }
    let mut params = CallToolRequestParams::new(call.params.name);
    params.arguments = call.params.arguments;
    Some((call.id, params))
}

/// rmcp's own read of the body.
fn by_rmcp(bytes: &[u8]) -> Option<(JsonRpcId, CallToolRequestParams)> {
    let ClientJsonRpcMessage::Request(request) = serde_json::from_slice(bytes).ok()? else {
        return None;
    };
    if request.request.get_meta().protocol_version().is_some() {
        return None;
    }
    let ClientRequest::CallToolRequest(call) = request.request else {
        return None;
    };
    Some((request.id, call.params))
}

/// rmcp's stateless JSON response to a tool call that came back `result`.
pub fn answer(id: JsonRpcId, result: Result<CallToolResult, McpError>, request_id: &RequestId) -> Response {
    let message = match result {
        Ok(result) => {
            let mut result = ServerResult::from(CallToolResponse::from(result));
            result.strip_result_type_for_legacy_peer();
            ServerJsonRpcMessage::response(result, id)
        }
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    };
    // The text block and the structured content hold the answer twice.
    let mut body = Vec::with_capacity(2 * response::BODY_CAPACITY);
    match serde_json::to_writer(&mut body, &message) {
        Ok(()) => {
            let mut response = Response::new(Body::from(body));
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_MIME_TYPE));
            response
        }
        // What the gate makes of rmcp's 500 in the same case.
        Err(error) => {
            tracing::error!(%error, "could not serialize a tool call's answer");
            response::problem(&Problem::internal().with_transport_status(500), request_id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    const PLAIN: [(&str, &str); 2] = [("host", "svc.test"), ("accept", "application/json, text/event-stream")];

    fn fast_path() -> FastPath {
        let config = StreamableHttpServerConfig::default().with_allowed_hosts(["localhost", "svc.test", "[::1]:8080"]);
        FastPath::new(&config)
    }

    #[test]
    fn plain_requests_are_admitted() {
        let fast = fast_path();
        assert!(fast.admits(&headers(&PLAIN)));
        for extra in [("mcp-protocol-version", "2025-06-18"), ("mcp-protocol-version", "2024-11-05")] {
            assert!(fast.admits(&headers(&[PLAIN[0], PLAIN[1], extra])), "{extra:?}");
        }
        for host in ["SVC.test", "svc.test:443", "localhost:3000", "[::1]:8080"] {
            assert!(fast.admits(&headers(&[("host", host), PLAIN[1]])), "{host}");
        }
        let split = [PLAIN[0], ("accept", "application/json"), ("accept", "TEXT/event-stream")];
        assert!(fast.admits(&headers(&split)));
    }

    #[test]
    fn anything_rmcp_might_treat_otherwise_is_left_to_it() {
        let fast = fast_path();
        for extra in [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-protocol-version", "1999-01-01"),
            ("mcp-protocol-version", " 2025-06-18"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "svc_agent_list"),
            ("mcp-param-agentid", "agt_1"),
            ("mcp-session-id", "s"),
            ("origin", "https://a.example"),
            ("host", "localhost"),
        ] {
            assert!(!fast.admits(&headers(&[PLAIN[0], PLAIN[1], extra])), "{extra:?}");
        }
        let twice =
            [PLAIN[0], PLAIN[1], ("mcp-protocol-version", "2025-06-18"), ("mcp-protocol-version", "2025-06-18")];
        assert!(!fast.admits(&headers(&twice)));
        for host in ["evil.example", "svc.test.evil.example", "[::1]:9090", "", "a b"] {
            assert!(!fast.admits(&headers(&[("host", host), PLAIN[1]])), "{host}");
        }
        assert!(!fast.admits(&headers(&[PLAIN[1]])), "no Host header");
        for accept in [
            "*/*",
            "application/*, text/*",
            "application/json",
            "application/json;q=0, text/event-stream",
            "application/json, text/event-stream;q=0.9",
            "application/json, \"text/event-stream\"",
        ] {
            assert!(!fast.admits(&headers(&[PLAIN[0], ("accept", accept)])), "{accept}");
        }
        let config = StreamableHttpServerConfig::default().with_allowed_hosts(["svc.test"]);
        let fast = FastPath::new(&config);
        config.cancellation_token.cancel();
        assert!(!fast.admits(&headers(&PLAIN)), "shutting down");
    }

    #[test]
    fn an_empty_host_list_allows_any_well_formed_host() {
        let fast = FastPath::new(&StreamableHttpServerConfig::default().disable_allowed_hosts());
        assert!(fast.admits(&headers(&[("host", "anything.example:1"), PLAIN[1]])));
        assert!(!fast.admits(&headers(&[("host", "a b"), PLAIN[1]])));
    }

    #[test]
    fn only_tool_calls_without_a_per_request_version_are_taken() {
        let call = |message: serde_json::Value| tool_call(message.to_string().as_bytes());
        let (id, params) =
            call(serde_json::json!({ "jsonrpc": "2.0", "id": "a", "method": "tools/call",
                "params": { "name": "svc_agent_list", "arguments": { "pageSize": 1 }, "_meta": { "progressToken": 1 } } }))
            .unwrap();
        assert_eq!(id, JsonRpcId::String("a".into()));
        assert_eq!(params.name, "svc_agent_list");
        assert_eq!(params.arguments.unwrap()["pageSize"], 1);
        for message in [
            serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }),
            serde_json::json!({ "jsonrpc": "2.0", "method": "tools/call", "params": { "name": "svc_agent_list" } }),
            serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "svc_agent_list",
                "_meta": { "io.modelcontextprotocol/protocolVersion": "2025-06-18" } } }),
        ] {
            assert!(call(message.clone()).is_none(), "{message}");
        }
        assert!(tool_call(b"{not json").is_none());
    }

    /// Whatever the plain read takes, rmcp reads the same; what it declines,
    /// rmcp still reads (or refuses) itself.
    #[test]
    fn the_plain_read_is_rmcps() {
        let taken = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"svc_agent_inspect","arguments":{"agentId":"agt_1"}}}"#,
            r#"{"params":{"arguments":{"a":[1,{"b":null}]},"name":"t"},"method":"tools/call","id":"x","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"tools/call","params":{"name":"t","arguments":null}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b\u00e9","method":"tools/call","params":{"name":"t\n","arguments":{}}}"#,
            r#" {"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":""}} "#,
        ];
        for message in taken {
            let plain = plain(message.as_bytes());
            assert!(plain.is_some(), "{message}");
            assert_eq!(plain, by_rmcp(message.as_bytes()), "{message}");
        }
        let declined = [
            // Read by rmcp.
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2\u002e0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"extra":true}"#,
            r#"{"jsonrpc":"2.0","\u0069d":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"t"}}"#,
            // Refused by rmcp, or not a call it runs here.
            r#"["2.0",1,"tools/call",{"name":"t","arguments":{}}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["t",{"x":1}]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null,"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}} x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","result":{},"params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        ];
        for message in declined {
            assert!(plain(message.as_bytes()).is_none(), "{message}");
        }
        // rmcp itself reads the first of them as calls, and none of the rest.
        for message in &declined[..8] {
            assert!(by_rmcp(message.as_bytes()).is_some(), "{message}");
        }
        for message in &declined[8..] {
            assert!(by_rmcp(message.as_bytes()).is_none(), "{message}");
        }
    }
}
