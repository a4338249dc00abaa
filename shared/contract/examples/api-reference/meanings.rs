//! The meaning of each problem code, as the reference's tables print it.

use svc_contract::ProblemCode;

/// What a problem code means, as the spec's "Stable problem codes" table states
/// it; the test below holds each line to the copy in `docs/spec/`.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The meanings the reference prints are the spec's, word for word.
    #[test]
    fn problem_meanings_are_the_specs() {
        let path = crate::repository().join("docs/spec/tenant-operations-spec.md");
        let spec = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for code in ProblemCode::ALL {
            let row = format!("| `{}` | {} |", code.as_str(), problem_meaning(code));
            assert!(spec.contains(&row), "the spec's problem table has no row `{row}`");
        }
    }
}
