//! Transaction-scoped PostgreSQL advisory locks, named by a 64-bit key.

use sqlx::PgConnection;

pub use svc_ids::lock_key as key;

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
