//! One operation's section: how to reach it, who may call it, its input and
//! output fields, and the problems it can answer.

use serde_json::Value;
use svc_contract::catalog::{AuthKind, Operation, WorkspaceRequirement, flag_name};
use svc_contract::openapi::OPERATIONS_PREFIX;
use svc_contract::problem::ProblemCode;

use crate::markdown::{Doc, code, size};
use crate::meanings::problem_meaning;
use crate::schema::{alternatives, fields, non_null, properties, required, type_name};

pub fn operation(doc: &mut Doc, op: &Operation) {
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
