//! Local validation of an operation's input against its schema, before anything is
//! sent (contract §14): the same `invalid_request` envelope the server would answer,
//! with `meta.requestId: null`, and exit 2.
//!
//! Issues follow the server's rules (contract §1, docs/decisions.md "Input
//! problems"): one per violated rule at its JSON pointer, a missing or unknown
//! property at the property itself, and messages that never echo the value.

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use svc_contract::knowledge::MAX_CONTENT_BYTES;
use svc_contract::{Issue, Operation};

use crate::outcome::Failure;

/// `Ok` when `input` satisfies the operation's input schema.
pub fn check(op: &Operation, input: &Value) -> Result<(), Failure> {
    let schema = Value::Object(op.input_schema().clone());
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| Failure::transport(format!("The input schema of {} does not compile: {e}", op.id)))?;
    let mut issues: Vec<Issue> = validator.iter_errors(input).flat_map(|e| issues_of(&schema, &e)).collect();
    for oversized in content_size_issues(input, &mut String::new()) {
        if !issues.iter().any(|i| i.path == oversized.path) {
            issues.push(oversized);
        }
    }
    if issues.is_empty() {
        return Ok(());
    }
    issues.sort_by(|a, b| a.path.cmp(&b.path));
    issues.dedup();
    Err(Failure::issues(issues))
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
            vec![issue(format!("{at}/{}", escape(property.as_str().unwrap_or_default())), "is required")]
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
        _ => vec![issue(at, masked(error))],
    }
}

fn masked(error: &ValidationError<'_>) -> String {
    error.masked_with("value").to_string()
}

/// A `oneOf` whose branches each only require one property (`preset` or `scopes`)
/// reads better as one sentence than as branch failures.
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

/// The issues of the alternative that came closest: the one with the fewest
/// violations, which is what the caller most likely meant.
fn closest_branch(schema: &Value, context: &[Vec<ValidationError<'static>>]) -> Option<Vec<Issue>> {
    let branch = context.iter().filter(|b| !b.is_empty()).min_by_key(|b| b.len())?;
    Some(branch.iter().flat_map(|e| issues_of(schema, e)).collect())
}

/// JSON pointer escaping of one reference token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// `content` is limited in UTF-8 bytes, which `maxLength` (characters) cannot say.
fn content_size_issues(value: &Value, path: &mut String) -> Vec<Issue> {
    let mut found = Vec::new();
    match value {
        Value::Object(members) => {
            for (key, member) in members {
                let len = path.len();
                path.push('/');
                path.push_str(&escape(key));
                match member.as_str() {
                    Some(text) if key == "content" && text.len() > MAX_CONTENT_BYTES => found.push(issue(
                        path.clone(),
                        format!("is {} bytes; content is limited to {MAX_CONTENT_BYTES} UTF-8 bytes", text.len()),
                    )),
                    _ => found.extend(content_size_issues(member, path)),
                }
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                found.extend(content_size_issues(item, path));
                path.truncate(len);
            }
        }
        _ => {}
    }
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use svc_contract::catalog::by_id;

    use super::*;

    fn issues(op: &str, input: Value) -> Vec<(String, String)> {
        match check(by_id(op).unwrap(), &input) {
            Ok(()) => vec![],
            Err(failure) => {
                assert_eq!(failure.exit_code(), 2);
                assert_eq!(failure.request_id(), None);
                let issues = failure.details().unwrap()["issues"].as_array().unwrap().clone();
                issues
                    .into_iter()
                    .map(|i| (i["path"].as_str().unwrap().to_owned(), i["message"].as_str().unwrap().to_owned()))
                    .collect()
            }
        }
    }

    #[test]
    fn every_violation_at_its_path_without_the_value() {
        let found = issues("agent.create", json!({"extra": 1, "name": "", "temperature": 3}));
        let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["/extra", "/name", "/temperature"]);
        assert_eq!(issues("agent.create", json!({})), [("/name".to_owned(), "is required".to_owned())]);
        let secret = "do-not-echo-this";
        for (_, message) in issues("agent.create", json!({"name": 5, "slug": secret})) {
            assert!(!message.contains(secret), "{message}");
        }
        assert!(issues("agent.configure", json!({"agentId": "agt_1", "instructions": null})).is_empty());
    }

    #[test]
    fn preset_or_scopes_is_one_issue() {
        let both = issues("api_key.create", json!({"name": "k", "preset": "operator", "scopes": ["agent:read"]}));
        assert_eq!(both.len(), 1);
        assert!(both[0].1.contains("`preset` or `scopes`"), "{both:?}");
        assert!(issues("api_key.create", json!({"name": "k", "scopes": ["agent:read"]})).is_empty());
    }

    #[test]
    fn content_is_limited_in_bytes() {
        let digest = format!("sha256:{}", "0".repeat(64));
        let input = |content: String| {
            json!({"agentId": "a", "key": "k", "title": "t", "provenance": {"kind": "manual", "uri": "u"},
                   "revision": "1", "digest": digest, "content": content})
        };
        assert!(issues("knowledge_source.add", input("é".repeat(375_000))).is_empty());
        let found = issues("knowledge_source.add", input("é".repeat(375_001)));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "/content");
    }
}
