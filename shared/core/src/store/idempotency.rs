//! Stored results of idempotent mutations (contract §7).

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq)]
pub struct RecordRow {
    pub operation: String,
    pub fingerprint: Vec<u8>,
    pub response: Value,
    /// Whether the record is younger than the retention period.
    pub live: bool,
}

#[tracing::instrument(level = "debug", skip(conn, key))]
pub async fn find(
    conn: &mut PgConnection,
    principal: Uuid,
    key: &str,
    retention_secs: f64,
) -> sqlx::Result<Option<RecordRow>> {
    sqlx::query_as!(
        RecordRow,
        r#"
        SELECT operation, fingerprint, response,
               created_at > now() - make_interval(secs => $3) AS "live!"
        FROM idempotency_records WHERE principal = $1 AND key = $2
        "#,
        principal,
        key,
        retention_secs,
    )
    .fetch_optional(conn)
    .await
}

/// Stores a result; replaces an expired record under the same key.
#[tracing::instrument(level = "debug", skip(conn, key, fingerprint, response))]
pub async fn upsert(
    conn: &mut PgConnection,
    principal: Uuid,
    key: &str,
    operation: &str,
    fingerprint: &[u8],
    response: &Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        INSERT INTO idempotency_records (principal, key, operation, fingerprint, response)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (principal, key) DO UPDATE
            SET operation = EXCLUDED.operation, fingerprint = EXCLUDED.fingerprint,
                response = EXCLUDED.response, created_at = now()
        "#,
        principal,
        key,
        operation,
        fingerprint,
        response,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes records older than the retention period; returns how many.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn purge_expired(conn: &mut PgConnection, retention_secs: f64) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        "DELETE FROM idempotency_records WHERE created_at <= now() - make_interval(secs => $1)",
        retention_secs,
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
