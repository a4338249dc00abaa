//! The store: every SQL statement of the service, in small functions that take a
//! connection (a pooled one, or a transaction) and return plain rows.
//!
//! Transactions that lock several rows take them in one order, so two of them
//! can never wait on each other: the Workspace row, then the Agent, then its
//! Public Chat and Widget rows or its Knowledge Sources, then their revisions,
//! then reconcile runs, and the Workspace's usage row last. Every writer of a
//! Workspace ends on that one row, so each takes it with its last statement
//! and holds it only until its commit (see [`usage`]).

pub mod advisory;
pub mod agents;
pub mod api_keys;
pub mod callers;
pub mod chat;
pub mod conversations;
pub mod entitlements;
pub mod idempotency;
pub mod invites;
pub mod knowledge;
pub mod leases;
pub mod members;
pub mod reconcile;
pub mod statistics;
pub mod types;
pub mod usage;
pub mod users;
pub mod web_sessions;
pub mod workspaces;

use sqlx::PgConnection;

use crate::error::{Error, Result};

/// A new row whose slug is unique within some scope (all Workspaces, or the live
/// Agents of one Workspace).
pub(crate) trait Slugged: Sync {
    type Row: Send;

    /// Inserts the row under `slug`; `None` when the slug is taken.
    fn insert(
        &self,
        conn: &mut PgConnection,
        slug: &str,
    ) -> impl Future<Output = sqlx::Result<Option<Self::Row>>> + Send;

    /// Slugs of the scope that could be candidates for `base`: every one that
    /// starts with its first 50 characters. A candidate `base-N` shortens a long
    /// base to stay within 60 characters, but never below 50.
    fn slugs_like(&self, conn: &mut PgConnection, base: &str)
    -> impl Future<Output = sqlx::Result<Vec<String>>> + Send;

    /// Names the scope in which slugs are unique.
    fn scope(&self) -> String;
}

/// Inserts `new` under the slug `base`, or when it is taken under the first free
/// `base-2`, `base-3`, ... (contract §8).
///
/// Callers deriving from the same base take turns (a transaction-scoped advisory
/// lock on scope and base) from the moment they find the base taken, so each
/// sees the candidates committed before it and picks a free one: concurrent
/// creates of one name all succeed, with distinct slugs. A row inserted under
/// an explicit slug can still win a candidate; then the next one is tried.
pub(crate) async fn insert_with_free_slug<S: Slugged>(conn: &mut PgConnection, new: &S, base: &str) -> Result<S::Row> {
    if let Some(row) = new.insert(conn, base).await? {
        return Ok(row);
    }
    advisory::lock(conn, advisory::key(&[b"slug", new.scope().as_bytes(), base.as_bytes()])).await?;
    for _ in 0..10 {
        let candidate = free_candidate(base, new.slugs_like(conn, base).await?);
        if let Some(row) = new.insert(conn, &candidate).await? {
            return Ok(row);
        }
    }
    Err(Error::internal(format!("no free slug derived from `{base}` after 10 attempts")))
}

/// The smallest `n` (from 2) whose slug candidate is not in `taken`.
fn free_candidate(base: &str, taken: Vec<String>) -> String {
    let taken: std::collections::HashSet<String> = taken.into_iter().collect();
    (2..)
        .map(|n| crate::slug::candidate(base, n))
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or_else(|| base.to_owned())
}

/// The bounds of the byte-ordered (`COLLATE "C"`) range that holds every slug
/// starting with the first 50 characters of `base`: slugs are made of
/// `[a-z0-9-]`, all below `~`.
pub(crate) fn prefix_range(base: &str) -> (String, String) {
    let prefix: String = base.chars().take(50).collect();
    let upper = format!("{prefix}~");
    (prefix, upper)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_range_holds_exactly_the_candidates() {
        let (from, to) = prefix_range("acme");
        let inside = |s: &str| s >= from.as_str() && s < to.as_str();
        for slug in ["acme", "acme-2", "acme-10", "acmez", "acme0"] {
            assert!(inside(slug), "{slug}");
        }
        for slug in ["acm", "acmd-2", "b", "ac", "acne"] {
            assert!(!inside(slug), "{slug}");
        }
        let long = "a".repeat(60);
        assert_eq!(prefix_range(&long).0.len(), 50);
    }
}
