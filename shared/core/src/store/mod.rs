//! The store: every SQL statement of the service, in small functions that take a
//! connection (a pooled one, or a transaction) and return plain rows.

pub mod agents;
pub mod callers;
pub mod entitlements;
pub mod idempotency;
pub mod users;
pub mod workspaces;

/// The smallest `n` (from 1) whose slug candidate is not in `taken`.
pub(crate) fn free_candidate(base: &str, taken: &[String]) -> String {
    (1..)
        .map(|n| crate::slug::candidate(base, n))
        .find(|candidate| !taken.iter().any(|t| t == candidate))
        .unwrap_or_else(|| base.to_owned())
}
