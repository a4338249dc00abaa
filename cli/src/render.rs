//! Short human renderings (without `--json`): results on stdout, problems on
//! stderr with their request id.

use std::fmt::Write;

use serde_json::Value;

use crate::outcome::Failure;

/// Fields that name an item, in the order they are shown in lists.
const NAMING_FIELDS: [&str; 9] = ["id", "key", "slug", "name", "title", "role", "status", "state", "keyPrefix"];

/// A success envelope's `data` as text: members one per line, lists one item per
/// line, nested objects with dotted names.
pub fn data(envelope: &Value) -> String {
    let mut out = String::new();
    if let Some(members) = envelope["data"].as_object() {
        for (name, value) in members {
            match value {
                Value::Array(items) if items.iter().all(Value::is_object) => list(&mut out, name, items),
                _ => fields(&mut out, name, value),
            }
        }
    }
    if let Some(cursor) = envelope.pointer("/meta/nextCursor").and_then(Value::as_str) {
        let _ = writeln!(out, "More results: --cursor {cursor}");
    }
    out
}

/// How to embed the Widget a `widget.manifest` answer describes: its
/// component with `embedId` and `baseUrl`, the service's address being the
/// Public Chat URL without its `/chat/{agentId}`.
pub fn embedding(envelope: &Value) -> String {
    let data = &envelope["data"];
    let (Some(agent), Some(url)) = (data.pointer("/agent/id").and_then(Value::as_str), base_url(data)) else {
        return String::new();
    };
    let component = data.pointer("/package/component").and_then(Value::as_str).unwrap_or("SvcChat");
    let package = data.pointer("/package/packageName").and_then(Value::as_str).unwrap_or("svc-widget-react");
    format!("Embed ({package}): <{component} embedId=\"{agent}\" baseUrl=\"{url}\" />\n")
}

/// The service's address a manifest implies: `publicChat.url` without its
/// `/chat/{agentId}`.
pub fn base_url(manifest: &Value) -> Option<&str> {
    let agent = manifest.pointer("/agent/id").and_then(Value::as_str)?;
    let url = manifest.pointer("/publicChat/url").and_then(Value::as_str)?;
    url.strip_suffix(agent)?.strip_suffix("/chat/")
}

fn list(out: &mut String, name: &str, items: &[Value]) {
    if items.is_empty() {
        let _ = writeln!(out, "No {name}.");
        return;
    }
    for item in items {
        let line: Vec<String> = NAMING_FIELDS.iter().filter_map(|f| item.get(*f)).filter_map(scalar).collect();
        let _ = writeln!(out, "{}", line.join("  "));
    }
}

fn fields(out: &mut String, name: &str, value: &Value) {
    match value {
        Value::Object(members) if !members.is_empty() => {
            for (member, inner) in members {
                fields(out, &format!("{name}.{member}"), inner);
            }
        }
        Value::Array(items) if items.iter().all(|i| scalar(i).is_some()) => {
            let items: Vec<String> = items.iter().filter_map(scalar).collect();
            let _ = writeln!(out, "{name}: {}", items.join(", "));
        }
        other => {
            let text = timestamp(name, other).or_else(|| scalar(other)).unwrap_or_else(|| other.to_string());
            let _ = writeln!(out, "{name}: {text}");
        }
    }
}

/// A contract timestamp (integer milliseconds since the Unix epoch, in members
/// named `...At`, `...Start` or `...End`) as an RFC 3339 UTC time; `--json`
/// keeps the number.
fn timestamp(name: &str, value: &Value) -> Option<String> {
    let member = name.rsplit('.').next().unwrap_or(name);
    let named = ["At", "Start", "End"].iter().any(|suffix| member.ends_with(suffix));
    let ms = value.as_i64().filter(|_| named)?;
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
    at.format(&time::format_description::well_known::Rfc3339).ok()
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some("-".into()),
        _ => None,
    }
}

/// A failure as stderr text: code, message, request id, then its details.
pub fn failure(failure: &Failure) -> String {
    let mut out = String::new();
    let request = failure.request_id().map(|id| format!(" (request {id})")).unwrap_or_default();
    let _ = writeln!(out, "error: {}: {}{request}", failure.code(), failure.message());
    if let Some(details) = failure.details() {
        for (name, value) in details {
            match (name.as_str(), value) {
                ("issues", Value::Array(issues)) => {
                    for issue in issues {
                        let path = issue["path"].as_str().filter(|p| !p.is_empty()).unwrap_or("(input)");
                        let _ = writeln!(out, "  {path}: {}", issue["message"].as_str().unwrap_or_default());
                    }
                }
                (_, Value::Object(_) | Value::Array(_)) => {
                    let _ = writeln!(out, "  {name}: {value}");
                }
                _ => {
                    let _ = writeln!(out, "  {name}: {}", scalar(value).unwrap_or_default());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn resources_and_lists() {
        let agent = json!({"data": {"agent": {"id": "agt_1", "name": "Bot", "configuration": {"temperature": 0.2}}}, "meta": {"requestId": "req_1"}});
        assert_eq!(data(&agent), "agent.configuration.temperature: 0.2\nagent.id: agt_1\nagent.name: Bot\n");
        let list = json!({"data": {"agents": [{"id": "agt_1", "name": "Bot", "status": "active"}]}, "meta": {"requestId": "r", "nextCursor": "c1"}});
        assert_eq!(data(&list), "agt_1  Bot  active\nMore results: --cursor c1\n");
        assert_eq!(data(&json!({"data": {"agents": []}, "meta": {}})), "No agents.\n");
    }

    #[test]
    fn times_are_rfc_3339() {
        let source = json!({"data": {"knowledgeSource": {"importedAt": 1_795_666_408_229_i64, "revision": "7"},
            "entitlement": {"trialEnd": 1_795_666_408_000_i64, "cancelAtPeriodEnd": false}}, "meta": {}});
        assert_eq!(
            data(&source),
            "entitlement.cancelAtPeriodEnd: false\nentitlement.trialEnd: 2026-11-26T04:13:28Z\n\
             knowledgeSource.importedAt: 2026-11-26T04:13:28.229Z\nknowledgeSource.revision: 7\n"
        );
        assert_eq!(data(&json!({"data": {"apiKey": {"lastUsedAt": null}}})), "apiKey.lastUsedAt: -\n");
    }

    #[test]
    fn failures_show_the_request_id_and_issues() {
        let failure = Failure::answered(json!({
            "error": {"code": "invalid_request", "message": "Bad.", "details": {"issues": [{"path": "/name", "message": "is required"}]}},
            "meta": {"requestId": "req_9"}
        }));
        assert_eq!(render_lines(&failure), ["error: invalid_request: Bad. (request req_9)", "  /name: is required"]);
    }

    #[test]
    fn setup_required_prints_where_to_finish_signing_up() {
        let url = "https://svc.example/account";
        let failure = Failure::answered(json!({
            "error": {"code": "setup_required", "message": format!("Finish signing up in the web application at {url} before using this client."), "details": {"setupUrl": url}},
            "meta": {"requestId": "req_3"}
        }));
        assert_eq!(
            render_lines(&failure),
            [
                format!(
                    "error: setup_required: Finish signing up in the web application at {url} before using this client. (request req_3)"
                ),
                format!("  setupUrl: {url}"),
            ]
        );
        assert_eq!(failure.exit_code(), 3);
    }

    #[test]
    fn a_manifest_shows_how_to_embed_with_the_base_url_of_its_public_chat() {
        let manifest = |url: &str| {
            json!({"data": {"agent": {"id": "agt_1", "slug": "bot"}, "publicChat": {"url": url},
                "package": {"packageName": "svc-widget-react", "component": "SvcChat"}}})
        };
        assert_eq!(
            embedding(&manifest("https://svc.example/chat/agt_1")),
            "Embed (svc-widget-react): <SvcChat embedId=\"agt_1\" baseUrl=\"https://svc.example\" />\n"
        );
        // A service below a path keeps its path.
        assert_eq!(base_url(&manifest("https://example.com/svc/chat/agt_1")["data"]), Some("https://example.com/svc"));
        assert_eq!(embedding(&manifest("https://svc.example/elsewhere")), "");
    }

    fn render_lines(f: &Failure) -> Vec<String> {
        failure(f).lines().map(str::to_owned).collect()
    }
}
