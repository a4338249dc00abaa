//! Stable problem codes and the `Problem` every layer answers with.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The stable problem codes of the public contract (spec "Errors").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProblemCode {
    AuthenticationRequired,
    ReauthenticationRequired,
    SetupRequired,
    InvalidRequest,
    InternalError,
    WorkspaceSelectionRequired,
    PermissionDenied,
    ResourceNotFound,
    WorkspaceArchived,
    EntitlementRequired,
    LimitExceeded,
    ConfirmationRequired,
    IdempotencyConflict,
    ProcessingFailed,
    ProcessingTimeout,
}

impl ProblemCode {
    /// Every code, in the order the spec lists them.
    pub const ALL: [ProblemCode; 15] = [
        Self::AuthenticationRequired,
        Self::ReauthenticationRequired,
        Self::SetupRequired,
        Self::InvalidRequest,
        Self::InternalError,
        Self::WorkspaceSelectionRequired,
        Self::PermissionDenied,
        Self::ResourceNotFound,
        Self::WorkspaceArchived,
        Self::EntitlementRequired,
        Self::LimitExceeded,
        Self::ConfirmationRequired,
        Self::IdempotencyConflict,
        Self::ProcessingFailed,
        Self::ProcessingTimeout,
    ];

    /// The problems every operation can return (spec "Problems per operation").
    pub const COMMON: [ProblemCode; 4] =
        [Self::AuthenticationRequired, Self::ReauthenticationRequired, Self::InvalidRequest, Self::InternalError];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthenticationRequired => "authentication_required",
            Self::ReauthenticationRequired => "reauthentication_required",
            Self::SetupRequired => "setup_required",
            Self::InvalidRequest => "invalid_request",
            Self::InternalError => "internal_error",
            Self::WorkspaceSelectionRequired => "workspace_selection_required",
            Self::PermissionDenied => "permission_denied",
            Self::ResourceNotFound => "resource_not_found",
            Self::WorkspaceArchived => "workspace_archived",
            Self::EntitlementRequired => "entitlement_required",
            Self::LimitExceeded => "limit_exceeded",
            Self::ConfirmationRequired => "confirmation_required",
            Self::IdempotencyConflict => "idempotency_conflict",
            Self::ProcessingFailed => "processing_failed",
            Self::ProcessingTimeout => "processing_timeout",
        }
    }

    /// The HTTP status for this code (contract §1). `internal_error` is 500 here;
    /// an unavailable dependency raises it to 503 (see [`Problem::http_status`]).
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidRequest | Self::WorkspaceSelectionRequired => 400,
            Self::AuthenticationRequired | Self::ReauthenticationRequired => 401,
            Self::SetupRequired | Self::PermissionDenied | Self::EntitlementRequired | Self::LimitExceeded => 403,
            Self::ResourceNotFound => 404,
            Self::WorkspaceArchived | Self::IdempotencyConflict => 409,
            Self::ProcessingFailed => 422,
            Self::ConfirmationRequired => 428,
            Self::InternalError => 500,
            Self::ProcessingTimeout => 504,
        }
    }

    /// The exit code of the command-line client for this code (spec "Client exit codes").
    pub fn exit_code(self) -> u8 {
        match self {
            Self::InternalError => 1,
            Self::InvalidRequest => 2,
            Self::AuthenticationRequired | Self::ReauthenticationRequired | Self::SetupRequired => 3,
            _ => 4,
        }
    }
}

impl fmt::Display for ProblemCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One violated schema rule: where (a JSON pointer into the input) and what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub path: String,
    pub message: String,
}

/// A failure answered to the caller: a stable code, one sentence, optional details.
///
/// The message never contains a credential or a caller's secret.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub code: ProblemCode,
    pub message: Cow<'static, str>,
    pub details: Option<Map<String, Value>>,
    /// Set when a dependency (database, queue) is unreachable: answered 503 with
    /// `Retry-After` instead of 500.
    pub unavailable: bool,
    /// Set for a refusal of the HTTP request itself rather than of its input (413
    /// a body over the limit, 408 a body too slow to arrive, 406, 415): answered
    /// with this status instead of the code's.
    pub transport_status: Option<u16>,
}

impl Problem {
    pub fn new(code: ProblemCode, message: impl Into<Cow<'static, str>>) -> Self {
        Self { code, message: message.into(), details: None, unavailable: false, transport_status: None }
    }

    /// Adds one entry to `details`.
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.get_or_insert_with(Map::new).insert(key.to_owned(), value.into());
        self
    }

    /// `invalid_request` for input that breaks the operation's schema.
    pub fn schema_violation(issues: Vec<Issue>) -> Self {
        let issues = serde_json::to_value(issues).unwrap_or(Value::Null);
        Self::new(ProblemCode::InvalidRequest, "The input does not satisfy the operation's schema.")
            .with_detail("issues", issues)
    }

    /// `invalid_request` for a reason other than the schema (`details.reason`).
    pub fn invalid(reason: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ProblemCode::InvalidRequest, message).with_detail("reason", reason)
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(ProblemCode::ResourceNotFound, format!("The {what} was not found."))
    }

    pub fn permission_denied(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ProblemCode::PermissionDenied, message)
    }

    pub fn confirmation_required(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ProblemCode::ConfirmationRequired, message)
    }

    /// An unexpected failure. The cause is logged by the caller, never answered.
    pub fn internal() -> Self {
        Self::new(ProblemCode::InternalError, "An internal error occurred.")
    }

    /// Seconds a client waits before retrying a problem answered 503: the
    /// `Retry-After` header on HTTP, `details.retryAfterSeconds` on every surface
    /// (an MCP tool result has no header).
    pub const RETRY_AFTER_SECS: u64 = 5;

    /// A dependency is unreachable: `internal_error` answered 503 with `Retry-After`.
    pub fn unavailable() -> Self {
        Self {
            unavailable: true,
            ..Self::new(ProblemCode::InternalError, "The service is temporarily unavailable; retry shortly.")
                .with_detail("retryAfterSeconds", Self::RETRY_AFTER_SECS)
        }
    }

    /// Contention: the call waited its turn too long, or lost a race it can win on
    /// a retry. Nothing was written; `internal_error` answered 503 with `Retry-After`.
    pub fn busy() -> Self {
        Self {
            unavailable: true,
            ..Self::new(
                ProblemCode::InternalError,
                "The service is busy with other changes to this Workspace; retry shortly.",
            )
            .with_detail("reason", "busy")
            .with_detail("retryAfterSeconds", Self::RETRY_AFTER_SECS)
        }
    }

    /// `invalid_request` for a body over `limit` bytes: answered 413.
    pub fn body_too_large(limit: usize) -> Self {
        Self::invalid("body_too_large", format!("The request body is larger than {limit} bytes."))
            .with_detail("limit", limit)
            .with_transport_status(413)
    }

    /// `invalid_request` for a body that did not arrive in time: answered 408.
    pub fn body_timeout() -> Self {
        Self::invalid("body_timeout", "The request body did not arrive in time.").with_transport_status(408)
    }

    /// Answers this problem with `status` (a refusal of the HTTP request itself).
    pub fn with_transport_status(mut self, status: u16) -> Self {
        self.transport_status = Some(status);
        self
    }

    pub fn http_status(&self) -> u16 {
        if self.unavailable {
            503
        } else if let Some(status) = self.transport_status {
            status
        } else {
            self.code.http_status()
        }
    }

    /// The `error` member of a failure body.
    pub fn to_json(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), self.code.as_str().into());
        error.insert("message".into(), self.message.as_ref().into());
        if let Some(details) = &self.details {
            error.insert("details".into(), Value::Object(details.clone()));
        }
        Value::Object(error)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Problem {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins contract §1's status table.
    #[test]
    fn status_per_code() {
        let table: Vec<(&str, u16)> = ProblemCode::ALL.iter().map(|c| (c.as_str(), c.http_status())).collect();
        assert_eq!(
            table,
            [
                ("authentication_required", 401),
                ("reauthentication_required", 401),
                ("setup_required", 403),
                ("invalid_request", 400),
                ("internal_error", 500),
                ("workspace_selection_required", 400),
                ("permission_denied", 403),
                ("resource_not_found", 404),
                ("workspace_archived", 409),
                ("entitlement_required", 403),
                ("limit_exceeded", 403),
                ("confirmation_required", 428),
                ("idempotency_conflict", 409),
                ("processing_failed", 422),
                ("processing_timeout", 504),
            ]
        );
        assert_eq!(Problem::unavailable().http_status(), 503);
        assert_eq!(Problem::body_too_large(10).http_status(), 413);
        assert_eq!(Problem::body_timeout().http_status(), 408);
        assert_eq!(Problem::busy().http_status(), 503);
    }

    #[test]
    fn serde_names_match_as_str() {
        for code in ProblemCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), Value::from(code.as_str()));
        }
    }

    #[test]
    fn body_shape() {
        let p = Problem::invalid("slug_taken", "The slug is taken.");
        assert_eq!(
            p.to_json(),
            serde_json::json!({"code": "invalid_request", "message": "The slug is taken.", "details": {"reason": "slug_taken"}})
        );
        assert_eq!(
            Problem::internal().to_json(),
            serde_json::json!({"code": "internal_error", "message": "An internal error occurred."})
        );
    }
}
