//! Transaction-scoped PostgreSQL advisory locks, named by a 64-bit key.

use sha2::{Digest, Sha256};
use sqlx::PgConnection;

/// The advisory lock key of a name made of `parts` (the first 8 bytes of their
/// SHA-256, each part length-prefixed so that no two splits collide).
pub fn key(parts: &[&[u8]]) -> i64 {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// Takes the lock without waiting; `false` when another transaction holds it.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn try_lock(conn: &mut PgConnection, key: i64) -> sqlx::Result<bool> {
    sqlx::query_scalar!(r#"SELECT pg_try_advisory_xact_lock($1) AS "locked!""#, key).fetch_one(conn).await
}

/// Takes the lock, waiting for it (within the connection's `lock_timeout`).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock(conn: &mut PgConnection, key: i64) -> sqlx::Result<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock($1)", key).execute(conn).await?;
    Ok(())
}
