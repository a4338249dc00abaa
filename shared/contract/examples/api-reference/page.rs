//! The page: its preamble and contents, how to call any operation, the problem
//! codes, then one section per operation of the catalog.

use svc_contract::catalog::{CATALOG, catalog_digest};
use svc_contract::openapi::OPERATIONS_PREFIX;
use svc_contract::problem::ProblemCode;
use svc_contract::{
    CLIENT_VERSION_HEADER, CONTRACT_VERSION, IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER,
    SECRET_LOCATION_HEADER, WORKSPACE_HEADER,
};

use crate::UPDATE_COMMAND;
use crate::markdown::{Doc, anchor, code, header_name};
use crate::meanings::problem_meaning;
use crate::operation::operation;

/// The Markdown of `docs/api-reference.md`.
pub fn markdown() -> String {
    let mut doc = Doc::default();
    preamble(&mut doc);
    contents(&mut doc);
    calling(&mut doc);
    problem_codes(&mut doc);
    doc.line("## Operations");
    for op in &CATALOG {
        doc.blank();
        operation(&mut doc, op);
    }
    doc.text
}

fn preamble(doc: &mut Doc) {
    doc.line(format!(
        "<!-- Generated from the operation catalog by `shared/contract/examples/api-reference`. \
         Do not edit: run `{UPDATE_COMMAND}`. -->"
    ));
    doc.blank();
    doc.line("# svc API reference");
    doc.blank();
    doc.line(
        "> The public contract is the [specification](spec/tenant-operations-spec.md), with the \
         decisions it leaves open in [contract.md](contract.md) and our own in [decisions.md](decisions.md). \
         This page is generated from the operation catalog in `shared/contract`; the same catalog is \
         served at `GET /api/public/catalog`, as OpenAPI at `GET /api/public/openapi.json`, and checked \
         in under [`schemas/`](../schemas).",
    );
    doc.blank();
    doc.line(format!(
        "Contract {}, {} operations, catalog digest {}.",
        code(CONTRACT_VERSION),
        CATALOG.len(),
        code(catalog_digest())
    ));
    doc.blank();
}

fn contents(doc: &mut Doc) {
    doc.line("## Contents");
    doc.blank();
    doc.line("- [Calling an operation](#calling-an-operation)");
    doc.line("- [Problem codes](#problem-codes)");
    doc.line("- [Operations](#operations)");
    doc.blank();
    let rows: Vec<Vec<String>> = CATALOG
        .iter()
        .map(|op| {
            vec![
                format!("[{}](#{})", code(op.id), anchor(op.id)),
                code(op.path),
                code(&op.tool_name()),
                code(&format!("svc {}", op.cli_command)),
                op.summary.to_owned(),
            ]
        })
        .collect();
    doc.table(&["Operation", "HTTP path", "MCP tool", "CLI command", "Summary"], &rows);
    doc.blank();
}

fn calling(doc: &mut Doc) {
    let workspace = header_name(WORKSPACE_HEADER);
    doc.line("## Calling an operation");
    doc.blank();
    doc.line(
        "Every operation is one HTTP path, one MCP tool and one CLI command, with the same input and \
         output schemas, problem codes and request ids:",
    );
    doc.blank();
    doc.line(format!(
        "- **HTTP**: `POST {{base_url}}{OPERATIONS_PREFIX}<path>` with the input as a JSON object body \
         (`Content-Type: application/json`; an empty body counts as `{{}}`)."
    ));
    doc.line(
        "- **MCP**: Streamable HTTP at `{base_url}/api/mcp`; `tools/call` with the tool's `name` and the \
         input as `arguments`. `structuredContent` is the envelope HTTP returns; a problem sets `isError: true`.",
    );
    doc.line(
        "- **CLI**: `svc <command>`. Each input property is a `--kebab-case` flag (arrays comma-separated \
         or repeated, objects as JSON text, `@FILE` or `FILE`); `--json` prints the response envelope. \
         The named flags (`--file`, `--yes`, `--apply`, `--save-as`, ...) are in \
         [cli/README.md](../cli/README.md#commands-and-flags), and `svc <command> --help` lists a command's own.",
    );
    doc.blank();
    doc.line("Request headers, on HTTP and MCP alike unless marked:");
    doc.blank();
    doc.table(
        &["Header", "Meaning"],
        &[
            vec![
                "`Authorization: Bearer <credential>`".into(),
                "A User session (an OAuth access token) or a Workspace API key (`svck_...`).".into(),
            ],
            vec![
                code(&format!("{workspace}: <id or slug>")),
                "Selects the Workspace of operations that act on one (see below).".into(),
            ],
            vec![
                code(&header_name(CLIENT_VERSION_HEADER)),
                "The caller's client version, reported by `identity.status`.".into(),
            ],
            vec![
                code(&header_name(SECRET_LOCATION_HEADER)),
                "Where the client keeps its credential (`os_store`, `environment`, `secret_file`), \
                 reported by `identity.status`."
                    .into(),
            ],
            vec![
                code(&format!("{}: <key>", header_name(IDEMPOTENCY_KEY_HEADER))),
                "HTTP only: the input's `idempotencyKey`, for mutating operations (reads ignore it). \
                 Sent with a different `idempotencyKey` in the body, or twice: `invalid_request`."
                    .into(),
            ],
        ],
    );
    doc.blank();
    doc.line(
        "- **Success**: HTTP 200, `{\"data\": ..., \"meta\": {\"requestId\": \"...\"}}`. List operations add \
         `meta.nextCursor` while more results remain; send it back as `cursor`.",
    );
    doc.line(
        "- **Failure**: `{\"error\": {\"code\", \"message\", \"details\"?}, \"meta\": {\"requestId\"}}` with the \
         HTTP status of the [problem code](#problem-codes). Input that breaks the schema gives \
         `invalid_request` with `details.issues`, one `{path, message}` per violated rule.",
    );
    doc.line("- Every response carries `X-Request-Id`, equal to `meta.requestId`.");
    doc.line(format!(
        "- **Idempotency**: every mutating operation accepts `idempotencyKey` in its input (on HTTP also \
         as the `{}` header). The same key \
         with the same input returns the first result again, with `{}: true`; with another input, \
         `idempotency_conflict`. The CLI sends a key with every mutation.",
        header_name(IDEMPOTENCY_KEY_HEADER),
        header_name(IDEMPOTENT_REPLAYED_HEADER)
    ));
    doc.line(format!(
        "- **Workspace**: a Workspace API key acts on its own Workspace (`{workspace}` naming another: \
         `permission_denied`). A User session selects one with `{workspace}`, else the User's only \
         Workspace, else `workspace_selection_required`."
    ));
    doc.line(
        "- **Credentials**: an operation for User sessions only answers a Workspace API key with \
         `permission_denied`; a key needs the operation's scope; a User needs at least the role shown.",
    );
    doc.line(
        "- **Field tables**: `a.b` is field `b` of object `a`, `a[]` an item of array `a`; \"Required\" and \
         \"Present\" hold within the parent object. An item that may take several shapes lists each \
         (`shape 1`, `shape 2`). Inputs reject unknown fields.",
    );
    doc.blank();
}

fn problem_codes(doc: &mut Doc) {
    doc.line("## Problem codes");
    doc.blank();
    let rows: Vec<Vec<String>> = ProblemCode::ALL
        .iter()
        .map(|&c| {
            vec![code(c.as_str()), c.http_status().to_string(), c.exit_code().to_string(), problem_meaning(c).into()]
        })
        .collect();
    doc.table(&["Code", "HTTP", "CLI exit", "Meaning (spec)"], &rows);
    doc.blank();
    doc.line(
        "Each operation lists the codes its call path can answer: those of `every operation`, those the \
         spec lists for `this operation`, and those the `access rules` add wherever a role, scope, key or \
         unfinished setup forbids the call (security wins over the spec's table). Besides, any operation \
         answers a method other than `POST` with 405, a body too slow with 408 and a body over its limit \
         with 413, all `invalid_request`, and an unreachable dependency or contention with 503 \
         `internal_error` and `Retry-After`.",
    );
    doc.blank();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_a_section_and_an_entry_in_the_contents() {
        let text = markdown();
        for op in &CATALOG {
            assert!(text.contains(&format!("\n### `{}`\n", op.id)), "{} has no section", op.id);
            assert!(text.contains(&format!("](#{})", anchor(op.id))), "{} is not in the contents", op.id);
        }
    }
}
