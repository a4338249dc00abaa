//! The HTTP surface of the catalog: `POST /api/public/operations/<path>`.
//!
//! It turns a request into (operation, credential, Workspace selector, input)
//! and hands them to the core; nothing else happens here.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::Response;
use serde_json::Value;
use svc_contract::identity::SecretLocation;
use svc_contract::{
    CLIENT_VERSION_HEADER, IDEMPOTENCY_KEY_HEADER, Operation, Problem, ProblemCode, SECRET_LOCATION_HEADER,
    WORKSPACE_HEADER, catalog,
};
use svc_core::ClientHints;

use crate::access::Called;
use crate::app::AppState;
use crate::body::BodyPolicy;
use crate::metrics::Surface;
use crate::response::{self, RequestId};

/// Bodies up to this size (declared in `Content-Length`) are read while the
/// request keeps the connection it authenticated with...
const SMALL_BODY: u64 = 64 * 1024;
/// ... for this long at most: a body still arriving after it is awaited with the
/// connection back in the pool, so slow clients cannot hold the pool.
const HOLD_WHILE_READING: Duration = Duration::from_millis(50);

pub fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The `Svc-Workspace` header as text. A value that is not visible ASCII is not
/// ignored (as if absent) but kept, replaced characters and all: it names no
/// Workspace, which the call path answers as such (contract §4).
pub fn workspace_header(headers: &HeaderMap) -> Option<Cow<'_, str>> {
    headers.get(WORKSPACE_HEADER).map(|v| String::from_utf8_lossy(v.as_bytes()))
}

/// The declared `Content-Length`, if any.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    header_str(headers, header::CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<u64>().ok())
}

/// What a client declares about itself in `Svc-Client-Version` and `Svc-Secret-Location`.
pub fn client_hints(headers: &HeaderMap) -> ClientHints {
    ClientHints {
        version: header_str(headers, CLIENT_VERSION_HEADER).map(str::to_owned),
        secret_location: header_str(headers, SECRET_LOCATION_HEADER).map(SecretLocation::parse).unwrap_or_default(),
    }
}

/// The request is taken whole and read in place: axum's `HeaderMap` and
/// `Extension` extractors would copy the headers and the request id.
pub async fn handle(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let (method, headers) = (&parts.method, &parts.headers);
    let no_id;
    let request_id = match parts.extensions.get::<RequestId>() {
        Some(id) => id,
        None => {
            no_id = RequestId::new();
            &no_id
        }
    };
    let Ok(Path(path)) = path else {
        // Not even text (bad percent-encoding): no operation is there.
        let problem = Problem::new(ProblemCode::ResourceNotFound, "There is no operation at this address.");
        return response::problem(&problem, request_id);
    };
    let Some(op) = catalog::by_path(&path) else {
        return response::problem(&no_operation(&path), request_id);
    };
    if method != Method::POST {
        return response::method_not_allowed(request_id);
    }
    let started = Instant::now();
    let result = async {
        let mut session = state.service.session();
        let workspace = workspace_header(headers);
        let caller =
            session.authenticate(header_str(headers, header::AUTHORIZATION.as_str()), workspace.as_deref()).await?;
        let declared = declared_length(headers);
        if declared.is_none_or(|length| length > SMALL_BODY) {
            session.release();
        }
        if declared.is_some_and(|length| length > op.body_limit as u64) {
            return Err(Problem::body_too_large(op.body_limit));
        }
        let _share = state.bodies.share(declared.unwrap_or(op.body_limit as u64)).await?;
        let read = read_input(&state.bodies, body, op.body_limit, declared);
        tokio::pin!(read);
        let input = match tokio::time::timeout(HOLD_WHILE_READING, &mut read).await {
            Ok(input) => input?,
            Err(_) => {
                session.release();
                read.await?
            }
        };
        let input = with_idempotency_header(op, headers, input)?;
        session.call(op, &caller, input, &client_hints(headers)).await
    }
    .await;
    state.metrics.record(Surface::Http, op, result.as_ref().err().map(|p| p.code), started.elapsed());
    let mut response = match result {
        Ok(reply) => response::success(&reply, request_id),
        Err(problem) => response::problem(&problem, request_id),
    };
    response.extensions_mut().insert(Called(op.id.into()));
    response
}

/// `resource_not_found` for a path no operation has, naming the one a slip
/// most likely meant.
fn no_operation(path: &str) -> Problem {
    let problem = Problem::new(ProblemCode::ResourceNotFound, format!("There is no operation at `{path}`."));
    match catalog::nearest_path(path) {
        Some(op) => Problem {
            message: format!("There is no operation at `{path}`; did you mean `{}` ({})?", op.path, op.id).into(),
            ..problem
        }
        .with_detail("suggestion", op.path),
        None => problem,
    }
}

/// The `Idempotency-Key` header is the body's `idempotencyKey` (for the
/// operations that take one; a read needs none and ignores it). Both given and
/// different, or the header given twice, is a contradiction refused as such.
fn with_idempotency_header(op: &Operation, headers: &HeaderMap, mut input: Value) -> Result<Value, Problem> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY_HEADER).iter();
    let (Some(value), true) = (values.next(), op.mutating) else { return Ok(input) };
    let conflict = |message: &'static str| Problem::invalid("idempotency_key_mismatch", message);
    if values.next().is_some() {
        return Err(conflict("Send one `Idempotency-Key` header."));
    }
    let Ok(key) = value.to_str() else {
        return Err(Problem::invalid("malformed_header", "The `Idempotency-Key` header must be visible ASCII."));
    };
    // A body that is not an object is refused by the schema check that follows.
    if let Value::Object(members) = &mut input {
        match members.get("idempotencyKey") {
            None => {
                members.insert("idempotencyKey".to_owned(), Value::String(key.to_owned()));
            }
            Some(Value::String(body)) if body == key => {}
            Some(_) => {
                return Err(conflict("The `Idempotency-Key` header and the body's `idempotencyKey` differ."));
            }
        }
    }
    Ok(input)
}

/// Reads the body within `limit` bytes and its deadline and parses it; an empty
/// body (or one of JSON's whitespace only: space, tab, line feed, carriage
/// return) is `{}`. A form feed is not JSON whitespace, though
/// `u8::is_ascii_whitespace` says it is.
async fn read_input(bodies: &BodyPolicy, body: Body, limit: usize, declared: Option<u64>) -> Result<Value, Problem> {
    let bytes = bodies.read(body, limit, declared).await?;
    if bytes.iter().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice(&bytes).map_err(|error| {
        Problem::invalid("malformed_json", format!("The request body is not valid JSON: {error}."))
            .with_detail("line", error.line())
            .with_detail("column", error.column())
    })
}
