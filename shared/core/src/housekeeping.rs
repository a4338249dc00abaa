//! Periodic clean-up the worker runs.

use sqlx::PgPool;

use crate::idempotency::RETENTION_SECS;
use crate::store;

/// Deletes idempotency records older than their retention; returns how many.
pub async fn purge_idempotency_records(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut conn = crate::runtime::connection(pool).await?;
    store::idempotency::purge_expired(&mut conn, RETENTION_SECS).await
}
