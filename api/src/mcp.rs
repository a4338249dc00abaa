//! The MCP surface: Streamable HTTP at `/api/mcp` (contract §13), one tool per
//! catalog operation, dispatched through the same call path as HTTP.
//!
//! The server is stateless (no session, JSON responses). A middleware in front
//! of rmcp authenticates the bearer credential before any JSON-RPC is read, so a
//! missing or invalid one is a plain HTTP 401.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use svc_contract::{CATALOG, Operation, Problem, WORKSPACE_HEADER, catalog};
use svc_core::Caller;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::metrics::Surface;
use crate::operations::{client_hints, header_str};
use crate::response::{self, RequestId};

/// Largest MCP request: the largest body of an operation served today, plus
/// JSON-RPC framing. rmcp buffers a whole request before we know its tool, so
/// this cap is what bounds memory; the knowledge operations (8 and 128 MiB
/// bodies) will raise it together with a bound on large bodies in flight.
const MAX_MCP_BODY: usize = catalog::DEFAULT_BODY_LIMIT + 64 * 1024;

/// The outcome of authenticating an MCP request that got past the 401 gate:
/// a caller, or a problem each tool call answers (e.g. `setup_required`).
#[derive(Clone)]
struct Authenticated(Result<Arc<Caller>, Problem>);

/// The MCP service, to be mounted at `/api/mcp`.
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

/// Answers non-POST methods with 405, bodies declared over the cap with 413, and
/// bad credentials with 401 (or 503 when the database is down), all before rmcp
/// reads the body.
pub async fn gate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let request_id = request.extensions().get::<RequestId>().cloned().unwrap_or_default();
    if request.method() != Method::POST {
        return response::method_not_allowed(&request_id);
    }
    let headers = request.headers();
    let declared = header_str(headers, header::CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_MCP_BODY as u64) {
        return response::problem(&Problem::body_too_large(MAX_MCP_BODY), &request_id);
    }
    let result = state
        .service
        .authenticate(header_str(headers, header::AUTHORIZATION.as_str()), header_str(headers, WORKSPACE_HEADER))
        .await;
    let authenticated = match result {
        Ok(caller) => Authenticated(Ok(Arc::new(caller))),
        Err(problem) if problem.http_status() == 401 || problem.unavailable => {
            return response::problem(&problem, &request_id);
        }
        Err(problem) => Authenticated(Err(problem)),
    };
    request.extensions_mut().insert(authenticated);
    next.run(request).await
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
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("svc", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tenant operations of svc: one tool per catalog operation. Results are the HTTP envelope \
                 ({data, meta}); problems come back with isError and {error, meta}.",
            )
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
        let Some(op) = catalog::by_tool_name(&request.name) else {
            return Err(McpError::invalid_params(
                format!("Unknown tool: {}", request.name),
                Some(json!({ "tool": request.name })),
            ));
        };
        let parts = context.extensions.get::<http::request::Parts>();
        let request_id = parts.and_then(|p| p.extensions.get::<RequestId>()).cloned().unwrap_or_default();
        let authenticated = parts.and_then(|p| p.extensions.get::<Authenticated>()).cloned();
        let hints = parts.map(|p| client_hints(&p.headers)).unwrap_or_default();
        let input = Value::Object(request.arguments.unwrap_or_default());

        let started = Instant::now();
        let result = match authenticated {
            Some(Authenticated(Ok(caller))) => match within_limit(&input, op.body_limit) {
                Ok(()) => self.state.service.call(op, &caller, input, &hints).await,
                Err(problem) => Err(problem),
            },
            Some(Authenticated(Err(problem))) => Err(problem),
            None => Err(Problem::internal()),
        };
        let outcome = result.as_ref().err().map(|p| p.code);
        self.state.metrics.record(Surface::Mcp, op, outcome, started.elapsed());
        let result = match result {
            Ok(reply) => match serde_json::to_value(response::Envelope::new(&reply, &request_id)) {
                Ok(envelope) => CallToolResult::structured(envelope),
                Err(_) => CallToolResult::structured_error(response::problem_body(&Problem::internal(), &request_id)),
            },
            Err(problem) => CallToolResult::structured_error(response::problem_body(&problem, &request_id)),
        };
        Ok(result.into())
    }
}

/// The same body limits as HTTP, measured on the tool arguments.
fn within_limit(input: &Value, limit: usize) -> Result<(), Problem> {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, input);
    if counter.0 > limit {
        return Err(Problem::body_too_large(limit));
    }
    Ok(())
}
