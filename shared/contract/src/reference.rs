//! The API reference, `docs/api-reference.md`, written from the catalog.
//!
//! Each operation's section comes from its catalog entry and its JSON Schemas;
//! nothing here is written for one operation, so the reference cannot say what
//! the catalog does not. The only text kept by hand is the framing (how to call
//! any operation, contract §1, §4, §7, §13, §14) and the meaning of each problem
//! code, quoted from the spec. `tests/api_reference.rs` fails while the checked-in
//! file differs from [`api_reference`].

use serde_json::{Map, Value};

use crate::catalog::{AuthKind, CATALOG, Operation, WorkspaceRequirement, catalog_digest, flag_name};
use crate::openapi::OPERATIONS_PREFIX;
use crate::problem::ProblemCode;
use crate::{
    CLIENT_VERSION_HEADER, CONTRACT_VERSION, IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER,
    SECRET_LOCATION_HEADER, WORKSPACE_HEADER,
};

/// Where the reference lives, from the repository root.
pub const PATH: &str = "docs/api-reference.md";

/// The command that rewrites [`PATH`] from the catalog.
pub const UPDATE_COMMAND: &str = "UPDATE_DOCS=1 cargo test -p svc-contract --test api_reference";

/// What a problem code means, as the spec's "Stable problem codes" table states
/// it; a test holds each line to the copy in `docs/spec/`.
pub fn problem_meaning(code: ProblemCode) -> &'static str {
    match code {
        ProblemCode::AuthenticationRequired => "authentication needed (client exit 3)",
        ProblemCode::ReauthenticationRequired => "session revoked or expired; login again (exit 3)",
        ProblemCode::SetupRequired => "first-time User setup incomplete (exit 3)",
        ProblemCode::InvalidRequest => "input does not satisfy the operation schema (exit 2 in the client)",
        ProblemCode::InternalError => "internal failure (exit 1 in the client)",
        ProblemCode::WorkspaceSelectionRequired => "no single Workspace could be selected",
        ProblemCode::PermissionDenied => "role or scope does not allow the operation",
        ProblemCode::ResourceNotFound => "exact resource not found",
        ProblemCode::WorkspaceArchived => "Workspace is archived",
        ProblemCode::EntitlementRequired => "current Entitlement does not allow the operation",
        ProblemCode::LimitExceeded => "a plan Limit would be exceeded",
        ProblemCode::ConfirmationRequired => "destructive operation lacks the required confirmation",
        ProblemCode::IdempotencyConflict => "idempotency key conflict",
        ProblemCode::ProcessingFailed => "processing of Knowledge, Public Chat or verification failed",
        ProblemCode::ProcessingTimeout => "Knowledge processing did not finish within the wait time",
    }
}

/// The Markdown of `docs/api-reference.md`.
pub fn api_reference() -> String {
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

/// Lines of Markdown, each ended by a newline.
#[derive(Default)]
struct Doc {
    text: String,
}

impl Doc {
    fn line(&mut self, line: impl AsRef<str>) {
        self.text.push_str(line.as_ref());
        self.text.push('\n');
    }

    fn blank(&mut self) {
        self.text.push('\n');
    }

    /// A table: a header row, its rule, one row per entry; cells escaped.
    fn table(&mut self, header: &[&str], rows: &[Vec<String>]) {
        self.line(format!("| {} |", header.join(" | ")));
        self.line(format!("|{}", " --- |".repeat(header.len())));
        for row in rows {
            let cells: Vec<String> = row.iter().map(|cell| cell.replace('|', "\\|").replace('\n', " ")).collect();
            self.line(format!("| {} |", cells.join(" | ")));
        }
    }
}

/// `text` as a code span, whatever it contains.
fn code(text: &str) -> String {
    if text.contains('`') { format!("`` {text} ``") } else { format!("`{text}`") }
}

/// A JSON value as the reference shows it: strings bare (`en`), the rest as JSON.
fn literal(value: &Value) -> String {
    match value {
        Value::String(s) if !s.is_empty() => code(s),
        other => code(&other.to_string()),
    }
}

/// `svc-workspace` → `Svc-Workspace`.
fn header_name(header: &str) -> String {
    let words: Vec<String> = header
        .split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect();
    words.join("-")
}

/// The anchor GitHub gives a heading: lower case, punctuation other than `-` and
/// `_` dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes.is_multiple_of(MIB) { format!("{} MiB", bytes / MIB) } else { format!("{bytes} bytes") }
}

fn preamble(doc: &mut Doc) {
    doc.line(format!(
        "<!-- Generated from the operation catalog by `svc_contract::reference::api_reference`. \
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

fn operation(doc: &mut Doc, op: &Operation) {
    doc.line(format!("### {}", code(op.id)));
    doc.blank();
    doc.line(op.summary);
    doc.blank();
    let keys = op.allows(AuthKind::WorkspaceApiKey);
    let credentials: Vec<String> = op
        .auth
        .iter()
        .map(|kind| match kind {
            AuthKind::OauthToken => format!("User session ({})", code(kind.as_str())),
            AuthKind::WorkspaceApiKey => format!("Workspace API key ({})", code(kind.as_str())),
        })
        .collect();
    let scope = match (keys, op.scope) {
        (false, _) => "none: API keys are not accepted".to_owned(),
        (true, Some(scope)) => format!("{} (Workspace API key)", code(scope.as_str())),
        (true, None) => "none needed: any key of the Workspace".to_owned(),
    };
    let workspace = match op.workspace {
        WorkspaceRequirement::Required => "required",
        WorkspaceRequirement::Optional => "optional",
        WorkspaceRequirement::None => "none: the operation acts on no Workspace",
    };
    let mutating = if op.mutating { "yes: accepts `idempotencyKey`" } else { "no" };
    doc.line(format!("- **HTTP**: `POST {OPERATIONS_PREFIX}{}`", op.path));
    doc.line(format!("- **MCP tool**: {}", code(&op.tool_name())));
    doc.line(format!("- **CLI**: {}", code(&cli_synopsis(op))));
    doc.line(format!("- **Credentials**: {}", credentials.join(", ")));
    doc.line(format!("- **Scope**: {scope}"));
    doc.line(format!("- **User role**: at least {}", code(op.min_role.as_str())));
    doc.line(format!("- **Workspace**: {workspace}"));
    doc.line(format!("- **Mutating**: {mutating}"));
    doc.line(format!("- **Body limit**: {}", size(op.body_limit)));
    doc.blank();
    input(doc, op);
    output(doc, op);
    problems(doc, op);
}

/// `svc agent inspect --agent-id <agentId>`: the command and its required flags.
fn cli_synopsis(op: &Operation) -> String {
    let schema = op.input_schema();
    let mut words = vec!["svc".to_owned(), op.cli_command.to_owned()];
    for name in required(schema) {
        let property = schema.get("properties").and_then(|p| p.get(name));
        let boolean = property.and_then(|p| p.get("type")).is_some_and(|t| t == "boolean");
        words.push(if boolean { format!("--{}", flag_name(name)) } else { format!("--{} <{name}>", flag_name(name)) });
    }
    if properties(schema).len() > required(schema).len() {
        words.push("[flags]".into());
    }
    words.join(" ")
}

fn input(doc: &mut Doc, op: &Operation) {
    let schema = op.input_schema();
    doc.line("#### Input");
    doc.blank();
    if properties(schema).is_empty() {
        doc.line("None: send `{}` or an empty body.");
        doc.blank();
        return;
    }
    let mut rows = Vec::new();
    fields(schema, "", "", &mut rows);
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|f| {
            let flag = if f.top_level { code(&format!("--{}", flag_name(&f.path))) } else { String::new() };
            let required = f.required.map_or("", |r| if r { "yes" } else { "no" });
            vec![f.field(), flag, f.ty, required.into(), f.rules.join("; "), f.description]
        })
        .collect();
    doc.table(&["Field", "CLI flag", "Type", "Required", "Rules", "Description"], &rows);
    doc.blank();
    if let Some(note) = alternatives(schema) {
        doc.line(note);
        doc.blank();
    }
}

fn output(doc: &mut Doc, op: &Operation) {
    let envelope = op.output_schema();
    let part = |name: &str| non_null(envelope.get("properties").and_then(|p| p.get(name)).unwrap_or(&Value::Null)).0;
    let (data, meta) = (part("data"), part("meta"));
    doc.line("#### Output");
    doc.blank();
    let mut rows = Vec::new();
    fields(&data, "", "", &mut rows);
    if rows.is_empty() {
        doc.line(format!("`data`: {}.", type_name(&data)));
    } else {
        doc.line("`data`:");
        doc.blank();
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|f| {
                let present = f.required.map_or("", |r| if r { "always" } else { "optional" });
                vec![f.field(), f.ty, present.into(), f.rules.join("; "), f.description]
            })
            .collect();
        doc.table(&["Field", "Type", "Present", "Rules", "Description"], &rows);
    }
    doc.blank();
    let meta: Vec<String> = properties(&meta)
        .into_iter()
        .map(|(name, schema, always)| {
            let description =
                schema.get("description").and_then(Value::as_str).map(|d| format!(" ({d})")).unwrap_or_default();
            if always { code(name) } else { format!("optionally {}{description}", code(name)) }
        })
        .collect();
    doc.line(format!("`meta`: {}", meta.join(", and ")));
    doc.blank();
}

fn problems(doc: &mut Doc, op: &Operation) {
    doc.line("#### Problems");
    doc.blank();
    let rows: Vec<Vec<String>> = op
        .possible_problems()
        .into_iter()
        .map(|c| {
            let source = if ProblemCode::COMMON.contains(&c) {
                "every operation"
            } else if op.lists(c) {
                "this operation"
            } else {
                "access rules"
            };
            vec![
                code(c.as_str()),
                c.http_status().to_string(),
                c.exit_code().to_string(),
                source.into(),
                problem_meaning(c).into(),
            ]
        })
        .collect();
    doc.table(&["Code", "HTTP", "CLI exit", "Source", "Meaning"], &rows);
}

/// One row of a field table.
struct Field {
    /// Dotted path below the input or `data`: `configuration.appearance.theme`,
    /// `agents[].id`.
    path: String,
    /// Which alternative shape of an item the field belongs to (`shape 1`).
    shape: String,
    top_level: bool,
    ty: String,
    /// `None` for the row that introduces a shape.
    required: Option<bool>,
    rules: Vec<String>,
    description: String,
}

impl Field {
    fn field(&self) -> String {
        if self.shape.is_empty() { code(&self.path) } else { format!("{} ({})", code(&self.path), self.shape) }
    }
}

/// The names in an object schema's `required`.
fn required(schema: &Map<String, Value>) -> Vec<&str> {
    schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

/// An object schema's properties: required ones first in their declared order,
/// then the rest by name, `idempotencyKey` last, as the CLI orders its flags.
fn properties(schema: &Map<String, Value>) -> Vec<(&str, &Value, bool)> {
    let required = required(schema);
    let mut properties: Vec<(&str, &Value, bool)> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, property)| (name.as_str(), property, required.contains(&name.as_str())))
        .collect();
    let rank = |name: &str| {
        let position = required.iter().position(|r| *r == name);
        (name == "idempotencyKey", position.is_none(), position)
    };
    properties.sort_by(|a, b| rank(a.0).cmp(&rank(b.0)).then_with(|| a.0.cmp(b.0)));
    properties
}

/// Appends a row for each property of `schema`, and of the objects inside it.
fn fields(schema: &Map<String, Value>, prefix: &str, shape: &str, rows: &mut Vec<Field>) {
    for (name, property, is_required) in properties(schema) {
        let path = if prefix.is_empty() { name.to_owned() } else { format!("{prefix}.{name}") };
        let (property, nullable) = non_null(property);
        let mut ty = type_name(&property);
        if nullable {
            ty.push_str(" or null");
        }
        rows.push(Field {
            path: path.clone(),
            shape: shape.to_owned(),
            top_level: prefix.is_empty() && shape.is_empty(),
            ty,
            required: Some(is_required),
            rules: rules(&property),
            description: description(&property),
        });
        nested(&property, &path, shape, rows);
    }
}

/// Rows for what an object, an array's items or a choice of shapes contains.
fn nested(schema: &Map<String, Value>, path: &str, shape: &str, rows: &mut Vec<Field>) {
    fields(schema, path, shape, rows);
    if let Some(items) = schema.get("items") {
        let (items, _) = non_null(items);
        nested(&items, &format!("{path}[]"), shape, rows);
    }
    let shapes: Vec<Map<String, Value>> =
        branches(schema).iter().map(|b| non_null(b).0).filter(|b| b.contains_key("properties")).collect();
    for (i, branch) in shapes.iter().enumerate() {
        let label = format!("shape {}", i + 1);
        rows.push(Field {
            path: path.to_owned(),
            shape: label.clone(),
            top_level: false,
            ty: type_name(branch),
            required: None,
            rules: rules(branch),
            description: description(branch),
        });
        fields(branch, path, &label, rows);
    }
}

/// Whether a schema is an object with named fields, or a choice of such objects.
fn has_object_shape(schema: &Map<String, Value>) -> bool {
    schema.contains_key("properties") || branches(schema).iter().any(|b| non_null(b).0.contains_key("properties"))
}

fn description(schema: &Map<String, Value>) -> String {
    schema.get("description").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The alternatives of a schema (`anyOf` or `oneOf`).
fn branches(schema: &Map<String, Value>) -> &[Value] {
    schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn is_null_type(schema: &Value) -> bool {
    schema.get("type").is_some_and(|t| t == "null")
}

/// A schema with `null` taken out, and whether it allowed `null`: from a
/// `type` list, from an `enum`, or as one branch of two (`anyOf: [T, null]`).
fn non_null(schema: &Value) -> (Map<String, Value>, bool) {
    let mut map = schema.as_object().cloned().unwrap_or_default();
    let mut nullable = false;
    for keyword in ["anyOf", "oneOf"] {
        let Some(Value::Array(alternatives)) = map.get(keyword) else { continue };
        if !alternatives.iter().any(is_null_type) {
            continue;
        }
        nullable = true;
        let mut rest: Vec<Value> = alternatives.iter().filter(|b| !is_null_type(b)).cloned().collect();
        if let [Value::Object(only)] = rest.as_mut_slice() {
            map.remove(keyword);
            for (key, value) in std::mem::take(only) {
                map.entry(key).or_insert(value);
            }
        } else {
            map.insert(keyword.into(), Value::Array(rest));
        }
    }
    if let Some(Value::Array(types)) = map.get_mut("type") {
        let before = types.len();
        types.retain(|t| t != "null");
        nullable |= types.len() < before;
        if let [only] = types.as_slice() {
            let only = only.clone();
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        let before = values.len();
        values.retain(|v| !v.is_null());
        nullable |= values.len() < before;
    }
    (map, nullable)
}

/// `string`, `array of object`, `map of string to integer`, `string or integer`.
fn type_name(schema: &Map<String, Value>) -> String {
    let map_of = schema.get("additionalProperties").filter(|a| a.is_object() && !schema.contains_key("properties"));
    if let Some(values) = map_of {
        return format!("map of string to {}", type_name(&non_null(values).0));
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => {
            let items = schema.get("items").map(|items| type_name(&non_null(items).0));
            format!("array of {}", items.unwrap_or_else(|| "any".into()))
        }
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => {
            let mut names: Vec<String> =
                branches(schema).iter().map(|b| type_name(&non_null(b).0)).filter(|n| n != "any").collect();
            names.dedup();
            if names.is_empty() { "any".into() } else { names.join(" or ") }
        }
    }
}

/// Bounds, patterns, choices and defaults of a schema, in words.
fn rules(schema: &Map<String, Value>) -> Vec<String> {
    let mut said = Vec::new();
    let number = |key: &str| schema.get(key).filter(|v| v.is_number()).map(Value::to_string);
    let range = |min: Option<String>, max: Option<String>, unit: &str| {
        let unit = |n: &str| if n == "1" { unit.trim_end_matches('s').to_owned() } else { unit.to_owned() };
        match (min, max) {
            (Some(min), Some(max)) => Some(format!("{min}..{max}{}", unit(""))),
            (Some(min), None) => Some(format!("at least {min}{}", unit(&min))),
            (None, Some(max)) => Some(format!("at most {max}{}", unit(&max))),
            (None, None) => None,
        }
    };
    if let Some(value) = schema.get("const") {
        said.push(format!("exactly {}", literal(value)));
    } else {
        said.extend(range(number("minimum"), number("maximum"), ""));
    }
    match schema.get("enum").and_then(Value::as_array).map(Vec::as_slice) {
        Some([only]) => said.push(format!("exactly {}", literal(only))),
        Some(values) => said.push(format!("one of {}", values.iter().map(literal).collect::<Vec<_>>().join(", "))),
        None => {}
    }
    said.extend(range(number("minLength"), number("maxLength"), " characters"));
    said.extend(range(number("minItems"), number("maxItems"), " items"));
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        said.push(format!("pattern {}", code(pattern)));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        said.push(format!("format {}", code(format)));
    }
    said.extend(choices(schema));
    // Items that are objects get rows of their own; simpler items are said here.
    let items = schema.get("items").map(|items| non_null(items).0);
    if let Some(items) = items.filter(|i| !has_object_shape(i)) {
        let each = rules(&items);
        if !each.is_empty() {
            said.push(format!("each {}", each.join(", ")));
        }
    }
    let values = schema.get("additionalProperties").filter(|v| v.is_object()).map(|v| non_null(v).0);
    if let Some(values) = values.filter(|v| !has_object_shape(v)) {
        let each = rules(&values);
        if !each.is_empty() {
            said.push(format!("each value {}", each.join(", ")));
        }
    }
    if let Some(default) = schema.get("default") {
        said.push(format!("default {}", literal(default)));
    }
    said
}

/// Alternatives that are not objects, in words: `one of read_only (The five...)`
/// for constants, `format email, or ""` otherwise.
fn choices(schema: &Map<String, Value>) -> Option<String> {
    let alternatives: Vec<Map<String, Value>> = branches(schema).iter().map(|b| non_null(b).0).collect();
    if alternatives.is_empty() || has_object_shape(schema) {
        return None;
    }
    if alternatives.iter().all(|b| b.contains_key("const")) {
        let values: Vec<String> = alternatives
            .iter()
            .map(|b| {
                let value = b.get("const").map(literal).unwrap_or_default();
                match b.get("description").and_then(Value::as_str) {
                    Some(d) => format!("{value} ({d})"),
                    None => value,
                }
            })
            .collect();
        return Some(format!("one of {}", values.join(", ")));
    }
    let words: Vec<String> = alternatives
        .iter()
        .map(|b| {
            let rules = rules(b);
            if rules.is_empty() { type_name(b) } else { rules.join(", ").trim_start_matches("exactly ").to_owned() }
        })
        .collect();
    Some(format!("either {}", words.join(", or ")))
}

/// A note for a root `oneOf`/`anyOf` of `required` lists: which fields go together.
fn alternatives(schema: &Map<String, Value>) -> Option<String> {
    let (how, groups) = match (schema.get("oneOf"), schema.get("anyOf")) {
        (Some(Value::Array(groups)), _) => ("Exactly one of", groups),
        (_, Some(Value::Array(groups))) => ("At least one of", groups),
        _ => return None,
    };
    let names: Vec<String> = groups
        .iter()
        .map(|group| {
            let names = group.as_object().map(required).unwrap_or_default();
            names.iter().map(|n| code(n)).collect::<Vec<_>>().join(" and ")
        })
        .collect();
    Some(format!("{how} {} must be given.", names.join(" or ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every keyword a catalog schema uses is one the reference renders (or one
    /// that needs no words: `$schema`, `additionalProperties: false`), so a new
    /// kind of rule cannot go missing from the reference unnoticed.
    #[test]
    fn every_schema_keyword_is_rendered() {
        const RENDERED: &[&str] = &[
            "$schema",
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "anyOf",
            "oneOf",
            "description",
            "const",
            "enum",
            "default",
            "minimum",
            "maximum",
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
            "pattern",
            "format",
        ];
        fn walk(schema: &Value, at: &str) {
            let Some(map) = schema.as_object() else { return };
            for (key, value) in map {
                assert!(RENDERED.contains(&key.as_str()), "{at}: `{key}` is not rendered in the API reference");
                match key.as_str() {
                    "properties" => {
                        for (name, property) in value.as_object().into_iter().flatten() {
                            walk(property, &format!("{at}/{name}"));
                        }
                    }
                    "items" | "additionalProperties" => walk(value, &format!("{at}/{key}")),
                    "anyOf" | "oneOf" => {
                        for (i, branch) in value.as_array().into_iter().flatten().enumerate() {
                            walk(branch, &format!("{at}/{key}/{i}"));
                        }
                    }
                    _ => {}
                }
            }
        }
        for op in &CATALOG {
            walk(&Value::Object(op.input_schema().clone()), &format!("{} input", op.id));
            walk(&Value::Object(op.output_schema().clone()), &format!("{} output", op.id));
        }
    }

    #[test]
    fn names_and_anchors() {
        assert_eq!(flag_name("idempotencyKey"), "idempotency-key");
        assert_eq!(header_name(WORKSPACE_HEADER), "Svc-Workspace");
        assert_eq!(anchor("knowledge_source.add"), "knowledge_sourceadd");
        assert_eq!(anchor("Calling an operation"), "calling-an-operation");
        assert_eq!(size(8 * 1024 * 1024), "8 MiB");
    }

    #[test]
    fn nullable_alternatives_fold_into_one_type() {
        let schema = serde_json::json!({"anyOf": [{"description": "A preset.", "oneOf": [{"const": "a", "type": "string"}, {"const": "b", "type": "string"}]}, {"type": "null"}]});
        let (map, nullable) = non_null(&schema);
        assert!(nullable);
        assert_eq!(type_name(&map), "string");
        assert_eq!(rules(&map), ["one of `a`, `b`"]);
        let email = serde_json::json!({"type": "string", "anyOf": [{"format": "email"}, {"const": ""}]});
        assert_eq!(rules(&non_null(&email).0), ["either format `email`, or `\"\"`"]);
    }

    #[test]
    fn every_operation_has_a_section_and_an_entry_in_the_contents() {
        let text = api_reference();
        for op in &CATALOG {
            assert!(text.contains(&format!("\n### `{}`\n", op.id)), "{} has no section", op.id);
            assert!(text.contains(&format!("](#{})", anchor(op.id))), "{} is not in the contents", op.id);
        }
    }
}
