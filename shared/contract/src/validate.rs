//! Input validation against the catalog's JSON Schemas: the one check the
//! server runs on every surface and the command-line client runs before it
//! sends anything, so both refuse the same input at the same path with the
//! same message.
//!
//! Each violated rule becomes one [`Issue`] with a JSON pointer to where it is, so
//! a caller can fix everything in one go. Messages never echo the offending value:
//! inputs can be large, and callers' data is theirs.

use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::catalog::every_operation;
use crate::knowledge::MAX_CONTENT_BYTES;
use crate::schema::NO_NUL_PATTERN;
use crate::{Issue, Operation, OperationId, Problem, ProblemCode};

const NUL_MESSAGE: &str = "must not contain the NUL character";

/// An operation's input schema as checked, and its validator.
struct Compiled {
    schema: Value,
    validator: Validator,
}

/// One operation's [`Compiled`], or why its schema does not compile.
type Slot = OnceLock<Result<Compiled, String>>;

/// The compiled input schema of `op`, compiled on first use (a client needs
/// only the one it sends; a server compiles them all at start-up with
/// [`compile_all`]).
fn compiled(op: &Operation) -> Result<&'static Compiled, String> {
    static COMPILED: OnceLock<Box<[Slot]>> = OnceLock::new();
    let slots = COMPILED.get_or_init(|| every_operation().map(|_| OnceLock::new()).collect());
    let slot = slots.get(op.op as usize).ok_or_else(|| format!("{} is not an operation", op.id))?;
    slot.get_or_init(|| compile(op)).as_ref().map_err(Clone::clone)
}

fn compile(op: &Operation) -> Result<Compiled, String> {
    let mut schema = Value::Object(op.input_schema().clone());
    leave_to_own_checks(&mut schema);
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| format!("{}: invalid input schema: {e}", op.id))?;
    Ok(Compiled { schema, validator })
}

/// Compiles every operation's input schema now: a server fails at start-up,
/// not on a call, if one does not compile.
pub fn compile_all() -> Result<(), String> {
    every_operation().try_for_each(|op| compiled(op).map(|_| ()))
}

/// `Ok` when `input` satisfies the operation's schema and the rules a schema
/// cannot state; otherwise `invalid_request` with every issue.
pub fn check(op: &Operation, input: &Value) -> Result<(), Problem> {
    let Compiled { schema, validator } = compiled(op).map_err(|error| {
        Problem::new(ProblemCode::InternalError, format!("The input schema of {} does not compile: {error}", op.id))
    })?;
    let mut extra = content_size_issues(op.op, input);
    nul_issues(input, &mut String::new(), &mut extra);
    if extra.is_empty() && validator.is_valid(input) {
        return Ok(());
    }
    let mut issues: Vec<Issue> = validator.iter_errors(input).flat_map(|e| issues_of(schema, &e)).collect();
    for extra in extra {
        // A content already over `maxLength` needs no second sentence.
        if !issues.iter().any(|i| i.path == extra.path) {
            issues.push(extra);
        }
    }
    if issues.is_empty() {
        return Ok(());
    }
    issues.sort_by(|a, b| a.path.cmp(&b.path));
    issues.dedup();
    Err(Problem::schema_violation(issues))
}

/// Whether `text` is an e-mail address as the contract's `format: email`
/// states it (identity.status answers a User's `email` under that schema).
pub fn is_email(text: &str) -> bool {
    static EMAIL: OnceLock<Option<Validator>> = OnceLock::new();
    let schema = serde_json::json!({ "type": "string", "format": "email", "pattern": NO_NUL_PATTERN });
    EMAIL
        .get_or_init(|| jsonschema::options().should_validate_formats(true).build(&schema).ok())
        .as_ref()
        .is_some_and(|validator| validator.is_valid(&Value::from(text)))
}

/// Web addresses and origins are declared with a `pattern` (and `format:
/// uri`) for clients that check a schema themselves, but the server parses
/// them with its own checks (`svc_core::chat::check_url` and `Origin::parse`)
/// to answer with the rule broken (`invalid_url`, `invalid_origin` and
/// `details.rule`) rather than a bare pattern mismatch; the command-line
/// client leaves them to the server too, so it answers them the same way.
fn leave_to_own_checks(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let own =
                map.get("pattern").is_some_and(|p| p == crate::chat::URL_PATTERN || p == crate::chat::ORIGIN_PATTERN);
            if own {
                map.remove("pattern");
                map.remove("format");
            }
            map.values_mut().for_each(leave_to_own_checks);
        }
        Value::Array(items) => items.iter_mut().for_each(leave_to_own_checks),
        _ => {}
    }
}

fn issue(path: String, message: impl Into<String>) -> Issue {
    Issue { path, message: message.into() }
}

fn issues_of(schema: &Value, error: &ValidationError<'_>) -> Vec<Issue> {
    let at = error.instance_path().as_str().to_owned();
    match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            unexpected.iter().map(|name| issue(format!("{at}/{}", escape(name)), "unknown property")).collect()
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            vec![issue(format!("{at}/{}", escape(name)), "is required")]
        }
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::OneOfMultipleValid { context } => {
            match exclusive_required(schema, error.schema_path().as_str()) {
                Some(names) => vec![issue(at, format!("exactly one of {names} is required"))],
                None => closest_branch(schema, context).unwrap_or_else(|| vec![issue(at, masked(error))]),
            }
        }
        ValidationErrorKind::AnyOf { context } => {
            closest_branch(schema, context).unwrap_or_else(|| vec![issue(at, masked(error))])
        }
        ValidationErrorKind::Enum { options } => vec![issue(at, one_of(options))],
        ValidationErrorKind::Pattern { pattern } if pattern == NO_NUL_PATTERN => vec![issue(at, NUL_MESSAGE)],
        _ => vec![issue(at, masked(error))],
    }
}

/// Every allowed value, however many: the caller fixes the input from the
/// message alone (the library's own message elides long lists).
fn one_of(options: &Value) -> String {
    let values: Vec<String> = options.as_array().into_iter().flatten().map(Value::to_string).collect();
    match values.as_slice() {
        [only] => format!("must be {only}"),
        _ => format!("must be one of {}", values.join(", ")),
    }
}

fn masked(error: &ValidationError<'_>) -> String {
    error.masked_with("value").to_string()
}

/// A `oneOf` whose branches each only require one property (`preset` or
/// `scopes`) reads better as one sentence than as branch failures.
fn exclusive_required(schema: &Value, schema_path: &str) -> Option<String> {
    let branches = schema.pointer(schema_path)?.as_array()?;
    let names = branches
        .iter()
        .map(|branch| match branch.as_object()?.get("required")?.as_array()?.as_slice() {
            [Value::String(name)] if branch.as_object()?.len() == 1 => Some(format!("`{name}`")),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(names.join(" or "))
}

/// The issues of the alternative that came closest to matching: the one with the
/// fewest violations, which is what the caller most likely meant.
fn closest_branch(schema: &Value, context: &[Vec<ValidationError<'static>>]) -> Option<Vec<Issue>> {
    let branch = context.iter().filter(|b| !b.is_empty()).min_by_key(|b| b.len())?;
    Some(branch.iter().flat_map(|e| issues_of(schema, e)).collect())
}

/// JSON pointer escaping of one reference token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// No text may contain U+0000: PostgreSQL cannot store it, and no real name,
/// instruction or document needs it.
fn nul_issues(value: &Value, path: &mut String, issues: &mut Vec<Issue>) {
    match value {
        Value::String(text) if text.contains('\0') => issues.push(issue(path.clone(), NUL_MESSAGE)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                nul_issues(item, path, issues);
                path.truncate(len);
            }
        }
        Value::Object(members) => {
            for (key, item) in members {
                let len = path.len();
                path.push('/');
                path.push_str(&escape(key));
                if key.contains('\0') {
                    issues.push(issue(path.clone(), NUL_MESSAGE));
                }
                nul_issues(item, path, issues);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// `content` is limited in UTF-8 bytes, which `maxLength` (characters) cannot
/// state; an oversized one is a schema violation like any other (contract §9).
fn content_size_issues(op: OperationId, input: &Value) -> Vec<Issue> {
    let too_big = |path: String, value: Option<&Value>| {
        let bytes = value.and_then(Value::as_str).map_or(0, str::len);
        (bytes > MAX_CONTENT_BYTES)
            .then(|| issue(path, format!("is {bytes} bytes; content is limited to {MAX_CONTENT_BYTES} UTF-8 bytes")))
    };
    match op {
        OperationId::KnowledgeSourceAdd | OperationId::KnowledgeSourceReplace => {
            too_big("/content".into(), input.get("content")).into_iter().collect()
        }
        OperationId::KnowledgeSourceReconcile => {
            let sources = input.pointer("/manifest/sources").and_then(Value::as_array);
            sources
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(i, entry)| too_big(format!("/manifest/sources/{i}/content"), entry.get("content")))
                .collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::by_id;

    #[test]
    fn every_input_schema_compiles() {
        assert_eq!(compile_all(), Ok(()));
    }

    #[test]
    fn e_mail_addresses_as_the_schema_states_them() {
        for good in ["ada@example.com", "a.b+c@sub.example.org", "x@localhost"] {
            assert!(is_email(good), "{good}");
        }
        for bad in ["", "ada", "ada@", "@example.com", "ada example@x.org", "ada@exa\0mple.com"] {
            assert!(!is_email(bad), "{bad:?}");
        }
    }

    fn issues(op: &str, input: Value) -> Vec<(String, String)> {
        match check(by_id(op).unwrap(), &input) {
            Ok(()) => vec![],
            Err(problem) => {
                let details = problem.details.unwrap();
                serde_json::from_value::<Vec<Issue>>(details["issues"].clone())
                    .unwrap()
                    .into_iter()
                    .map(|i| (i.path, i.message))
                    .collect()
            }
        }
    }

    /// The distinct paths with issues (a value can break several rules).
    fn paths(op: &str, input: Value) -> Vec<String> {
        let mut paths: Vec<String> = issues(op, input).into_iter().map(|(p, _)| p).collect();
        paths.dedup();
        paths
    }

    #[test]
    fn every_violation_is_reported_at_its_path() {
        let found = paths("agent.create", json!({"extra": 1, "name": "", "temperature": 3, "other": true}));
        assert_eq!(found, ["/extra", "/name", "/other", "/temperature"]);
        assert_eq!(paths("agent.create", json!({})), ["/name"]);
        assert_eq!(paths("agent.create", json!({"name": "a", "defaultLanguage": null})), ["/defaultLanguage"]);
        assert_eq!(paths("agent.configure", json!({"agentId": "x", "instructions": null})), Vec::<String>::new());
    }

    #[test]
    fn boundaries() {
        let name = |n: usize| json!({"name": "x".repeat(n)});
        assert!(paths("agent.create", name(120)).is_empty());
        assert_eq!(paths("agent.create", name(121)), ["/name"]);
        assert!(paths("agent.create", json!({"name": "a", "temperature": 2})).is_empty());
        assert_eq!(paths("agent.create", json!({"name": "a", "temperature": 2.01})), ["/temperature"]);
        for (size, ok) in [(0, false), (1, true), (100, true), (101, false)] {
            assert_eq!(paths("agent.list", json!({"pageSize": size})).is_empty(), ok, "{size}");
        }
        assert!(paths("agent.create", json!({"name": "a", "idempotencyKey": "k".repeat(8)})).is_empty());
        assert_eq!(paths("agent.create", json!({"name": "a", "idempotencyKey": "k".repeat(7)})), ["/idempotencyKey"]);
        assert_eq!(paths("agent.create", json!({"name": "a", "idempotencyKey": "k".repeat(201)})), ["/idempotencyKey"]);
        assert_eq!(
            paths("agent.inspect", json!({"agentId": "a", "idempotencyKey": "k".repeat(10)})),
            ["/idempotencyKey"]
        );
    }

    #[test]
    fn messages_do_not_echo_values() {
        let secret = "do-not-echo-me-please";
        for (_, message) in
            issues("agent.create", json!({"name": 5, "slug": secret, "instructions": secret.repeat(2000)}))
        {
            assert!(!message.contains(secret), "{message}");
        }
    }

    #[test]
    fn enum_issues_list_every_allowed_value() {
        let found = issues("api_key.create", json!({"name": "k", "scopes": ["agent:admin"]}));
        assert_eq!(found.len(), 1, "{found:?}");
        for scope in crate::Scope::ALL {
            assert!(found[0].1.contains(&format!("\"{}\"", scope.as_str())), "{scope:?} missing: {found:?}");
        }
        assert!(!found[0].1.contains("agent:admin"), "{found:?}");
    }

    #[test]
    fn preset_or_scopes() {
        let both = issues("api_key.create", json!({"name": "k", "preset": "operator", "scopes": ["agent:read"]}));
        let neither = issues("api_key.create", json!({"name": "k"}));
        for found in [both, neither] {
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].0, "");
            assert!(found[0].1.contains("`preset`") && found[0].1.contains("`scopes`"), "{found:?}");
        }
        assert!(issues("api_key.create", json!({"name": "k", "preset": "operator"})).is_empty());
        assert_eq!(paths("api_key.create", json!({"name": "k", "scopes": []})), ["/scopes"]);
        assert_eq!(paths("api_key.create", json!({"name": "k", "scopes": ["agent:admin"]})), ["/scopes/0"]);
    }

    #[test]
    fn content_is_limited_in_bytes() {
        let digest = format!("sha256:{}", "0".repeat(64));
        let add = |content: String| {
            json!({"agentId": "a", "key": "k", "title": "t", "provenance": {"kind": "manual", "uri": "u"},
                   "revision": "r", "digest": digest, "content": content})
        };
        assert!(paths("knowledge_source.add", add("a".repeat(MAX_CONTENT_BYTES))).is_empty());
        assert_eq!(paths("knowledge_source.add", add("a".repeat(MAX_CONTENT_BYTES + 1))), ["/content"]);
        // 250,001 three-byte characters: within maxLength, over the byte limit.
        assert_eq!(paths("knowledge_source.add", add("€".repeat(250_001))), ["/content"]);
        let entry = |content: String| json!({"key": "k", "title": "t", "provenance": {"kind": "manual", "uri": "u"}, "revision": "r", "digest": digest, "content": content});
        let manifest = json!({"agentId": "a", "manifest": {"version": 1, "sources": [entry("ok".into()), entry("€".repeat(250_001))]}});
        assert_eq!(paths("knowledge_source.reconcile", manifest), ["/manifest/sources/1/content"]);
    }

    #[test]
    fn manifest_entries_report_the_closest_alternative() {
        let manifest = |entry: Value| json!({"agentId": "a", "manifest": {"version": 1, "sources": [entry]}});
        let upsert_without_content = json!({"key": "k", "title": "t", "provenance": {"kind": "manual", "uri": "u"},
            "revision": "r", "digest": format!("sha256:{}", "0".repeat(64))});
        assert_eq!(
            paths("knowledge_source.reconcile", manifest(upsert_without_content)),
            ["/manifest/sources/0/content"]
        );
        let tombstone_with_extra = json!({"key": "k", "tombstone": true, "confirm": "ks_1", "title": "t"});
        assert_eq!(paths("knowledge_source.reconcile", manifest(tombstone_with_extra)), ["/manifest/sources/0/title"]);
        assert_eq!(
            paths("knowledge_source.reconcile", json!({"agentId": "a", "manifest": {"version": 2, "sources": []}})),
            ["/manifest/version"]
        );
    }

    #[test]
    fn nul_characters_are_refused_wherever_they_are() {
        assert_eq!(paths("agent.create", json!({"name": "a\u{0}b"})), ["/name"]);
        // The schema declares the rule as a pattern; the message still names it.
        assert_eq!(issues("agent.create", json!({"name": "a\u{0}b"})), [("/name".to_owned(), NUL_MESSAGE.to_owned())]);
        assert_eq!(
            paths("api_key.create", json!({"name": "k", "scopes": ["agent:read"], "idempotencyKey": "key\u{0}12345"})),
            ["/idempotencyKey"]
        );
        assert_eq!(paths("agent.create", json!({"name": "a", "x\u{0}": 1})), ["/x\u{0}"]);
        assert!(paths("agent.create", json!({"name": "a\\0 is fine"})).is_empty());
    }

    #[test]
    fn explicit_slugs_are_bounded() {
        assert!(paths("agent.create", json!({"name": "a", "slug": "s".repeat(60)})).is_empty());
        assert_eq!(paths("agent.create", json!({"name": "a", "slug": "s".repeat(61)})), ["/slug"]);
        assert_eq!(paths("workspace.create", json!({"name": "a", "slug": "s".repeat(61)})), ["/slug"]);
    }

    #[test]
    fn non_object_input() {
        assert_eq!(paths("identity.status", json!([])), [""]);
        assert!(paths("identity.status", json!({})).is_empty());
    }
}
