//! The store: every SQL statement of the service, in small functions that take a
//! connection (a pooled one, or a transaction) and return plain rows.

pub mod agents;
pub mod api_keys;
pub mod callers;
pub mod entitlements;
pub mod idempotency;
pub mod users;
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
}

/// Inserts `new` under the slug `base`, or when it is taken under the first free
/// `base-2`, `base-3`, ... (contract §8). A concurrent insert that wins the race
/// for a candidate just moves us on to the next one.
pub(crate) async fn insert_with_free_slug<S: Slugged>(conn: &mut PgConnection, new: &S, base: &str) -> Result<S::Row> {
    if let Some(row) = new.insert(conn, base).await? {
        return Ok(row);
    }
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
