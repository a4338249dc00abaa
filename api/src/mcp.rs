//! The MCP surface: Streamable HTTP at `/api/mcp` (contract §13), one tool per
//! catalog operation, dispatched through the same call path as HTTP.
//!
//! The server is stateless (no session, JSON responses). A middleware in front
//! of rmcp authenticates the bearer credential before any JSON-RPC is read, so a
//! missing or invalid one is a plain HTTP 401. It also answers the plainest
//! `tools/call` requests itself, as rmcp would ([`fast`]).

mod fast;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use svc_contract::{CATALOG, Operation, Problem, catalog};
use svc_core::Caller;
use tokio_util::sync::CancellationToken;

use crate::access::Called;
use crate::app::AppState;
use crate::metrics::Surface;
use crate::operations::{client_hints, declared_length, header_str, workspace_header};
use crate::response::{self, RequestId};

/// JSON-RPC framing allowed around a tool's arguments, over the operation's own
/// body limit.
const FRAMING: usize = 64 * 1024;
/// Largest MCP request: the largest operation body (a reconcile manifest) and
/// its framing.
const MAX_MCP_BODY: usize = catalog::MAX_BODY_LIMIT + FRAMING;

/// The outcome of authenticating an MCP request that got past the 401 gate:
/// a caller, or a problem each tool call answers (e.g. `setup_required`).
#[derive(Clone)]
struct Authenticated(Result<Arc<Caller>, Problem>);

/// The MCP service, to be mounted at `/api/mcp` behind [`gate`]. Bodies reach it read and
/// checked by [`gate`], so its own cap is only a backstop.
pub fn service(
    state: AppState,
    allowed_hosts: Vec<String>,
    shutdown: CancellationToken,
) -> StreamableHttpService<McpServer, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(allowed_hosts)
        .with_max_request_body_bytes(MAX_MCP_BODY)
        .with_cancellation_token(shutdown);
    StreamableHttpService::new(
        move || Ok(McpServer { state: state.clone() }),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// What [`gate`] works with: the state, and what the fast path must know of
/// rmcp's service.
#[derive(Clone)]
pub struct Gate {
    state: AppState,
    fast: Arc<fast::FastPath>,
}

impl Gate {
    /// The gate in front of the rmcp service configured with `config`.
    pub fn new(state: AppState, config: &StreamableHttpServerConfig) -> Self {
        Self { state, fast: Arc::new(fast::FastPath::new(config)) }
    }
}

/// Everything rmcp would refuse at the HTTP level is refused here first, with
/// the contract's JSON (contract §1, §13), before rmcp reads anything: a method
/// other than POST (405), a missing `Accept` (406) or non-JSON `Content-Type`
/// (415), bad credentials (401, or 503 when the database is down), a body over
/// the limit of the tool it calls (413, as it streams), and a message that is
/// not one JSON-RPC 2.0 request (a JSON-RPC error). Large bodies take their
/// share of the budget first, like HTTP's. Any refusal rmcp still answers in
/// plain text is rewritten as the error envelope. A `tools/call` that rmcp
/// would run without a question is answered here, as rmcp would ([`fast`]).
pub async fn gate(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let state = &gate.state;
    let request_id = request.extensions().get::<RequestId>().cloned().unwrap_or_default();
    let refuse = |problem: Problem| response::problem(&problem, &request_id);
    let headers = request.headers();
    if request.method() != Method::POST {
        return response::method_not_allowed(&request_id);
    }
    if !accepts_json_and_events(headers) {
        return refuse(
            Problem::invalid("not_acceptable", "Send `Accept: application/json, text/event-stream`.")
                .with_transport_status(406),
        );
    }
    if !is_json(headers) {
        return refuse(
            Problem::invalid(
                "unsupported_media_type",
                "Send the JSON-RPC message as `Content-Type: application/json`.",
            )
            .with_transport_status(415),
        );
    }
    let declared = declared_length(headers);
    if declared.is_some_and(|length| length > MAX_MCP_BODY as u64) {
        return refuse(Problem::body_too_large(MAX_MCP_BODY));
    }
    let workspace = workspace_header(headers);
    let result =
        state.service.authenticate(header_str(headers, header::AUTHORIZATION.as_str()), workspace.as_deref()).await;
    let authenticated = match result {
        Ok(caller) => Authenticated(Ok(caller)),
        Err(problem) if problem.http_status() == 401 || problem.unavailable => return refuse(problem),
        Err(problem) => Authenticated(Err(problem)),
    };
    let _share = match state.bodies.share(declared.unwrap_or(MAX_MCP_BODY as u64)).await {
        Ok(share) => share,
        Err(problem) => return refuse(problem),
    };
    let (mut parts, body) = request.into_parts();
    let bytes = match state.bodies.read(body, MAX_MCP_BODY, declared).await {
        Ok(bytes) => bytes,
        Err(problem) => return refuse(problem),
    };
    parts.extensions.insert(authenticated);
    // A body that may be over its tool's limit is probed first: refused
    // without its arguments being read into values. Any other is probed only
    // if the fast path does not take it.
    let mut probed = None;
    if probe_first(bytes.len()) {
        match probe(&bytes, &request_id) {
            Ok(called) => probed = Some(called),
            Err(refusal) => return refusal,
        }
    }
    // A plain tool call rmcp would run as it is: read once, answered here.
    if gate.fast.admits(&parts.headers)
        && let Some((id, params)) = fast::tool_call(&bytes)
    {
        let op = catalog::by_tool_name(&params.name);
        if let Some(refusal) = over_limit(op, bytes.len(), &request_id) {
            return refusal;
        }
        drop(bytes);
        let called = tool_called(op);
        let result = call(state, params, Some(&parts)).await;
        let mut response = fast::answer(id, result, &request_id);
        response.extensions_mut().insert(called);
        return response;
    }
    let called = match probed {
        Some(called) => called,
        None => match probe(&bytes, &request_id) {
            Ok(called) => called,
            Err(refusal) => return refusal,
        },
    };
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    let mut response = with_request_id(response, &request_id).await;
    response.extensions_mut().insert(called);
    response
}

/// Whether `Accept` lists both media types MCP clients must accept (the rule
/// rmcp applies; `*/*` and `application/*` count).
fn accepts_json_and_events(headers: &HeaderMap) -> bool {
    let types = || {
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.split(';').next().unwrap_or_default().trim())
    };
    let has = |wanted: &str, family: &str| {
        types().any(|t| t.eq_ignore_ascii_case(wanted) || t.eq_ignore_ascii_case(family) || t == "*/*")
    };
    has("application/json", "application/*") && has("text/event-stream", "text/*")
}

fn is_json(headers: &HeaderMap) -> bool {
    header_str(headers, header::CONTENT_TYPE.as_str())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// The parts of a JSON-RPC message checked before rmcp reads it. Arguments are
/// only looked at for their type: a 128 MiB manifest is skipped, not copied.
#[derive(Deserialize)]
struct Probe {
    jsonrpc: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
    method: Option<String>,
    #[serde(default)]
    params: Option<ProbeParams>,
}

#[derive(Deserialize)]
struct ProbeParams {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    arguments: Option<JsonKind>,
}

/// Which JSON type a value is, found without keeping the value.
#[derive(Debug, PartialEq, Eq)]
enum JsonKind {
    Object,
    Other,
}

impl<'de> Deserialize<'de> for JsonKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Kind;
        impl<'de> serde::de::Visitor<'de> for Kind {
            type Value = JsonKind;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<JsonKind, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(JsonKind::Object)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<JsonKind, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(JsonKind::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<JsonKind, E> {
                Ok(JsonKind::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<JsonKind, E> {
                Ok(JsonKind::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<JsonKind, E> {
                Ok(JsonKind::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<JsonKind, E> {
                Ok(JsonKind::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<JsonKind, E> {
                Ok(JsonKind::Other)
            }
            fn visit_unit<E>(self) -> Result<JsonKind, E> {
                Ok(JsonKind::Other)
            }
        }
        deserializer.deserialize_any(Kind)
    }
}

/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// Checks the message is one JSON-RPC 2.0 request rmcp can take, and a tool
/// call's body is within its operation's limit; names the call for the access
/// log.
#[expect(clippy::result_large_err, reason = "the error is the response itself")]
fn probe(bytes: &[u8], request_id: &RequestId) -> Result<Called, Response> {
    let error = |status: StatusCode, id: Option<Value>, code: i64, message: &str| {
        json_rpc_error(status, id, code, message, request_id)
    };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(error(
            StatusCode::BAD_REQUEST,
            None,
            INVALID_REQUEST,
            "Batches are not supported: send one message.",
        ));
    }
    let message: Probe = match serde_json::from_slice(bytes) {
        Ok(message) => message,
        Err(e) if e.is_data() => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                None,
                INVALID_REQUEST,
                "The message is not a JSON-RPC request.",
            ));
        }
        Err(_) => return Err(error(StatusCode::BAD_REQUEST, None, PARSE_ERROR, "The body is not valid JSON.")),
    };
    if message.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        let text = "`jsonrpc` must be \"2.0\".";
        return Err(error(StatusCode::BAD_REQUEST, message.id, INVALID_REQUEST, text));
    }
    if message.method.as_deref() != Some("tools/call") {
        // The method names the call in the access log (cut: it is the client's text).
        let method: String = message.method.unwrap_or_default().chars().take(40).collect();
        return Ok(Called(method.into()));
    }
    let params = message.params.unwrap_or(ProbeParams { name: None, arguments: None });
    if params.arguments.as_ref().is_some_and(|kind| *kind != JsonKind::Object) {
        let text = "`params.arguments` must be an object.";
        return Err(error(StatusCode::OK, message.id, INVALID_PARAMS, text));
    }
    let op = params.name.as_ref().and_then(Value::as_str).and_then(catalog::by_tool_name);
    match over_limit(op, bytes.len(), request_id) {
        Some(refusal) => Err(refusal),
        None => Ok(tool_called(op)),
    }
}

/// Whether a body of `length` bytes could be over some tool's limit, and is
/// so probed before anything reads its arguments.
fn probe_first(length: usize) -> bool {
    length > catalog::MIN_BODY_LIMIT + FRAMING
}

/// The refusal of a tool call whose body of `length` bytes is over its
/// operation's limit.
fn over_limit(op: Option<&Operation>, length: usize, request_id: &RequestId) -> Option<Response> {
    let op = op.filter(|op| length > op.body_limit + FRAMING)?;
    Some(response::problem(&Problem::body_too_large(op.body_limit), request_id))
}

/// A tool call's name in the access log: its operation's, when it names one.
fn tool_called(op: Option<&Operation>) -> Called {
    Called(op.map_or("tools/call", |op| op.id).into())
}

fn json_rpc_error(status: StatusCode, id: Option<Value>, code: i64, message: &str, request_id: &RequestId) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": { "code": code, "message": message, "data": { "requestId": request_id.0 } },
    });
    let mut response = (status, axum::Json(body)).into_response();
    response::set_request_id(response.headers_mut(), request_id);
    response
}

/// Largest refusal body of rmcp's that is rewritten (its own are a few bytes).
const MAX_REWRITTEN: usize = 64 * 1024;

/// rmcp's refusals carry our request id: a JSON-RPC error gets it in
/// `error.data.requestId`, and a refusal in plain text becomes the error
/// envelope with the same status.
async fn with_request_id(response: Response, request_id: &RequestId) -> Response {
    if response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_REWRITTEN).await.unwrap_or_default();
    if let Ok(mut message) = serde_json::from_slice::<Value>(&bytes)
        && let Some(error) = message.get_mut("error").and_then(Value::as_object_mut)
    {
        let data = error.entry("data").or_insert_with(|| json!({}));
        if let Value::Object(data) = data {
            data.insert("requestId".into(), request_id.0.clone().into());
        }
        let mut response = (parts.status, axum::Json(message)).into_response();
        response::set_request_id(response.headers_mut(), request_id);
        return response;
    }
    let text = String::from_utf8_lossy(&bytes);
    let message = text.trim();
    let message = if message.is_empty() || message.len() > 300 { "The MCP request was refused." } else { message };
    let mut problem =
        Problem::invalid("mcp_transport", message.to_owned()).with_transport_status(parts.status.as_u16());
    if parts.status.is_server_error() {
        tracing::error!(status = %parts.status, message, "the MCP transport failed a request");
        problem = Problem::internal().with_transport_status(parts.status.as_u16());
    }
    let mut rewritten = response::problem(&problem, request_id);
    for name in [header::ALLOW, header::RETRY_AFTER] {
        if let Some(value) = parts.headers.get(&name) {
            rewritten.headers_mut().insert(name, value.clone());
        }
    }
    rewritten
}

#[derive(Clone)]
pub struct McpServer {
    state: AppState,
}

fn object(schema: &serde_json::Map<String, Value>) -> Arc<JsonObject> {
    Arc::new(schema.clone())
}

fn tool(op: &Operation) -> Tool {
    let annotations = ToolAnnotations::with_title(op.cli_command)
        .read_only(!op.mutating)
        .destructive(op.id.ends_with(".delete") || op.id.ends_with(".revoke") || op.id.ends_with(".disable"))
        .idempotent(!op.mutating);
    Tool::new(op.tool_name(), op.summary, object(op.input_schema()))
        .with_raw_output_schema(object(op.output_schema()))
        .with_annotations(annotations)
}

/// The 30 tools, built once from the catalog.
fn tools() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| CATALOG.iter().map(tool).collect())
}

impl ServerHandler for McpServer {
    /// Built once: rmcp asks for it on every stateless request.
    fn get_info(&self) -> ServerConfig {
        static INFO: OnceLock<ServerConfig> = OnceLock::new();
        INFO.get_or_init(|| {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
                .with_server_info(Implementation::new("svc", env!("CARGO_PKG_VERSION")))
                .with_instructions(
                    "Tenant operations of svc: one tool per catalog operation. Results are the HTTP envelope \
                     ({data, meta}); problems come back with isError and {error, meta}.",
                )
        })
        .clone()
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().iter().find(|t| t.name == name).cloned()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools().to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        call(&self.state, request, context.extensions.get::<http::request::Parts>()).await.map(Into::into)
    }
}

/// A tool call, on rmcp's path and on the fast path alike: runs the tool's
/// operation for the caller the gate authenticated (in `parts`), and answers
/// the envelope or the problem as the tool's result.
async fn call(
    state: &AppState,
    request: CallToolRequestParams,
    parts: Option<&http::request::Parts>,
) -> Result<CallToolResult, McpError> {
    let request_id = parts.and_then(|p| p.extensions.get::<RequestId>()).cloned().unwrap_or_default();
    let Some(op) = catalog::by_tool_name(&request.name) else {
        return Err(McpError::invalid_params(
            format!("Unknown tool: {}", request.name),
            Some(json!({ "tool": request.name, "requestId": request_id.0 })),
        ));
    };
    let authenticated = parts.and_then(|p| p.extensions.get::<Authenticated>()).cloned();
    let hints = parts.map(|p| client_hints(&p.headers)).unwrap_or_default();
    let input = Value::Object(request.arguments.unwrap_or_default());

    let started = Instant::now();
    let result = match authenticated {
        Some(Authenticated(Ok(caller))) => state.service.call(op, &caller, input, &hints).await,
        Some(Authenticated(Err(problem))) => Err(problem),
        None => {
            tracing::error!("an MCP tool call reached the tool without the authentication step");
            Err(Problem::internal())
        }
    };
    let outcome = result.as_ref().err().map(|p| p.code);
    state.metrics.record(Surface::Mcp, op, outcome, started.elapsed());
    Ok(match result {
        Ok(reply) => structured(response::envelope_value(reply, &request_id), false),
        Err(problem) => structured(response::problem_body(&problem, &request_id), true),
    })
}

/// rmcp's `CallToolResult::structured` (or `structured_error`): the value as
/// the result's text block and as its structured content. The text is written
/// by serde_json into one buffer, as an HTTP answer is, rather than through
/// `Display` (rmcp's `to_string`), which passes it on in small pieces.
fn structured(value: Value, is_error: bool) -> CallToolResult {
    let mut bytes = Vec::with_capacity(response::BODY_CAPACITY);
    let text = match serde_json::to_writer(&mut bytes, &value).map(|()| String::from_utf8(bytes)) {
        Ok(Ok(text)) => text,
        _ => value.to_string(),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result.is_error = Some(is_error);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_results_are_rmcps() {
        let value = json!({ "data": { "name": "A \"quoted\" é\n", "n": [1, 2.5, null, true] }, "meta": {} });
        assert_eq!(structured(value.clone(), false), CallToolResult::structured(value.clone()));
        assert_eq!(structured(value.clone(), true), CallToolResult::structured_error(value));
    }

    #[test]
    fn bodies_that_may_be_over_a_tools_limit_are_probed_first() {
        assert!(!probe_first(catalog::MIN_BODY_LIMIT + FRAMING), "within every tool's limit: read once");
        assert!(probe_first(catalog::MIN_BODY_LIMIT + FRAMING + 1));
    }
}
