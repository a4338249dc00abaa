//! One operation call: credential, endpoint, Workspace, HTTP, and the answer sorted
//! into a success envelope or a failure.

use std::io::{BufRead, IsTerminal, Write};

use secrecy::ExposeSecret;
use serde_json::{Value, json};
use svc_contract::catalog::by_id;
use svc_contract::{Operation, Problem, ProblemCode, WorkspaceRequirement};

use crate::context::Context;
use crate::credentials::{self, Credential};
use crate::http::{Answer, Call};
use crate::outcome::Failure;

/// Calls `op` with `input` against the selected Workspace (`--workspace`, then the
/// profile's, else the server's choice of a sole Workspace).
pub fn call(ctx: &mut Context, op: &Operation, input: &Value) -> Result<Value, Failure> {
    let workspace = ctx.workspace()?;
    call_in(ctx, op, input, workspace.as_deref())
}

/// Calls `op` naming `workspace` explicitly (or none).
pub fn call_in(ctx: &mut Context, op: &Operation, input: &Value, workspace: Option<&str>) -> Result<Value, Failure> {
    let credential = credentials::resolve(ctx)?;
    call_as(ctx, op, input, workspace, &credential)
}

/// Calls `op` with a given credential rather than the one first in line.
pub fn call_as(
    ctx: &mut Context,
    op: &Operation,
    input: &Value,
    workspace: Option<&str>,
    credential: &Credential,
) -> Result<Value, Failure> {
    let endpoint = ctx.endpoint()?;
    let body = serde_json::to_vec(input).map_err(|e| Failure::transport(format!("Cannot encode the input: {e}")))?;
    let answer = ctx.http.call(&Call {
        url: format!("{endpoint}/api/public/operations/{}", op.path),
        bearer: credential.bearer.expose_secret(),
        secret_location: credential.location,
        workspace: workspace.filter(|_| op.workspace != WorkspaceRequirement::None),
        body: &body,
    })?;
    envelope(answer)
}

/// Like [`call`], but when the server cannot choose a Workspace and stdin is a
/// terminal, lists the User's Workspaces and asks which one (contract §14).
pub fn call_selecting(ctx: &mut Context, op: &Operation, input: &Value) -> Result<Value, Failure> {
    let workspace = ctx.workspace()?;
    let result = call_in(ctx, op, input, workspace.as_deref());
    match result {
        Err(failure)
            if failure.is(ProblemCode::WorkspaceSelectionRequired)
                && workspace.is_none()
                && std::io::stdin().is_terminal() =>
        {
            match ask_for_workspace(ctx)? {
                Some(chosen) => call_in(ctx, op, input, Some(&chosen)),
                None => Err(failure),
            }
        }
        other => other,
    }
}

fn ask_for_workspace(ctx: &mut Context) -> Result<Option<String>, Failure> {
    let Some(list) = by_id("workspace.list") else {
        return Ok(None);
    };
    let Ok(envelope) = call_in(ctx, list, &json!({ "pageSize": 100 }), None) else {
        return Ok(None);
    };
    let workspaces = envelope["data"]["workspaces"].as_array().cloned().unwrap_or_default();
    if workspaces.is_empty() {
        return Ok(None);
    }
    let mut stderr = std::io::stderr();
    let _ = writeln!(stderr, "Several Workspaces are available:");
    for (i, ws) in workspaces.iter().enumerate() {
        let _ = writeln!(
            stderr,
            "  {}. {} ({}, {})",
            i + 1,
            ws["name"].as_str().unwrap_or("?"),
            ws["slug"].as_str().unwrap_or("?"),
            ws["id"].as_str().unwrap_or("?")
        );
    }
    let _ = write!(stderr, "Workspace [1-{}]: ", workspaces.len());
    let _ = stderr.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return Ok(None);
    }
    let chosen = line.trim().parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|i| workspaces.get(i));
    let id = chosen.and_then(|ws| ws["id"].as_str()).map(str::to_owned);
    if let Some(id) = &id {
        let _ = writeln!(stderr, "Using {id}; `svc workspace select --workspace {id}` remembers it.");
    }
    Ok(id)
}

/// A success envelope, or the failure the answer describes.
fn envelope(answer: Answer) -> Result<Value, Failure> {
    let has = |key: &str| answer.body.get(key).is_some();
    if answer.is_success() && has("data") && has("meta") {
        return Ok(answer.body);
    }
    if !answer.is_success() && answer.body.pointer("/error/code").is_some_and(Value::is_string) {
        return Err(Failure::answered(answer.body));
    }
    let problem = Problem::new(
        ProblemCode::InternalError,
        format!("The server answered HTTP {} with a body that is not an envelope.", answer.status),
    )
    .with_detail("reason", "unexpected_answer")
    .with_detail("status", answer.status);
    Err(Failure::with_request_id(problem, answer.request_id))
}
