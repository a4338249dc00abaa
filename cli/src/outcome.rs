//! How a command ends: what it prints and which exit code it returns (contract §14).
//!
//! A failure is always an error envelope, `{"error": ..., "meta": {"requestId": ...}}`:
//! the server's body exactly as it answered, or one built here for a problem found
//! before any request was sent (then `meta.requestId` is null). The exit code follows
//! from the envelope's problem code, so a server answer and a local finding of the same
//! code always end the same way.

use std::borrow::Cow;

use serde_json::{Map, Value, json};
use svc_contract::{Issue, Problem, ProblemCode};

/// A command that succeeded: its machine output (`--json`) and its human rendering.
#[derive(Debug)]
pub enum Output {
    /// Everything was printed already (help, the sign-in URL, ...).
    Printed,
    /// Print `json` under `--json`, otherwise `human`; then exit with `exit`.
    Value { json: Value, human: String, exit: u8 },
}

impl Output {
    pub fn new(json: Value, human: impl Into<String>) -> Self {
        Self::Value { json, human: human.into(), exit: 0 }
    }
}

/// A command that failed: an error envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    envelope: Value,
}

impl Failure {
    /// The server's own error envelope, exactly as it answered.
    pub fn answered(envelope: Value) -> Self {
        Self { envelope }
    }

    /// A problem found by the client, before or without a server answer.
    pub fn local(problem: Problem) -> Self {
        Self::with_request_id(problem, None)
    }

    /// A problem found by the client about a request that did get a request id
    /// (an unreadable answer, a wait that ran out of time).
    pub fn with_request_id(problem: Problem, request_id: Option<String>) -> Self {
        Self { envelope: json!({ "error": problem.to_json(), "meta": { "requestId": request_id } }) }
    }

    /// `internal_error` for a request that never got an answer.
    pub fn transport(message: impl Into<Cow<'static, str>>) -> Self {
        Self::local(Problem::new(ProblemCode::InternalError, message).with_detail("reason", "transport"))
    }

    /// `invalid_request` for a command line that cannot be run as written.
    pub fn usage(message: impl Into<Cow<'static, str>>) -> Self {
        Self::local(Problem::invalid("usage", message))
    }

    /// `invalid_request` listing schema issues, as the server would.
    pub fn issues(issues: Vec<Issue>) -> Self {
        Self::local(Problem::schema_violation(issues))
    }

    /// `authentication_required` with a reason.
    pub fn authentication(reason: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::local(Problem::new(ProblemCode::AuthenticationRequired, message).with_detail("reason", reason))
    }

    pub fn envelope(&self) -> &Value {
        &self.envelope
    }

    pub fn code(&self) -> &str {
        self.envelope.pointer("/error/code").and_then(Value::as_str).unwrap_or("internal_error")
    }

    pub fn message(&self) -> &str {
        self.envelope.pointer("/error/message").and_then(Value::as_str).unwrap_or_default()
    }

    pub fn details(&self) -> Option<&Map<String, Value>> {
        self.envelope.pointer("/error/details").and_then(Value::as_object)
    }

    pub fn request_id(&self) -> Option<&str> {
        self.envelope.pointer("/meta/requestId").and_then(Value::as_str)
    }

    pub fn is(&self, code: ProblemCode) -> bool {
        self.code() == code.as_str()
    }

    /// 1 transport or `internal_error`, 2 `invalid_request`, 3 authentication and
    /// setup, 4 every other code, including codes newer than this client.
    pub fn exit_code(&self) -> u8 {
        ProblemCode::ALL.iter().find(|c| c.as_str() == self.code()).map_or(4, |c| c.exit_code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_per_problem_code() {
        let exit = |code: &str| {
            Failure::answered(json!({"error": {"code": code, "message": "m"}, "meta": {"requestId": "req_1"}}))
                .exit_code()
        };
        let table: Vec<(&str, u8)> = ProblemCode::ALL.iter().map(|c| (c.as_str(), exit(c.as_str()))).collect();
        assert_eq!(
            table,
            [
                ("authentication_required", 3),
                ("reauthentication_required", 3),
                ("setup_required", 3),
                ("invalid_request", 2),
                ("internal_error", 1),
                ("workspace_selection_required", 4),
                ("permission_denied", 4),
                ("resource_not_found", 4),
                ("workspace_archived", 4),
                ("entitlement_required", 4),
                ("limit_exceeded", 4),
                ("confirmation_required", 4),
                ("idempotency_conflict", 4),
                ("processing_failed", 4),
                ("processing_timeout", 4),
            ]
        );
        assert_eq!(exit("a_code_from_a_newer_server"), 4);
        assert_eq!(Failure::transport("refused").exit_code(), 1);
        assert_eq!(Failure::usage("bad").exit_code(), 2);
    }

    #[test]
    fn local_failures_have_a_null_request_id() {
        let failure = Failure::usage("no such flag");
        assert_eq!(failure.envelope()["meta"], json!({ "requestId": null }));
        assert_eq!(failure.envelope()["error"]["details"]["reason"], "usage");
        assert_eq!(failure.request_id(), None);
    }
}
