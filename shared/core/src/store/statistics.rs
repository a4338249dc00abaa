//! The knowledge tables' statistics: who analyzes them next, which changed
//! since their last analyze, and the ANALYZE itself.

use sqlx::PgConnection;

/// Claims the next analyze for this process if none ran in the last
/// `every_secs` (any replica's): `false` when one did, or another replica
/// holds the claim right now (it is not waited for).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn claim(conn: &mut PgConnection, every_secs: f64) -> sqlx::Result<bool> {
    let claimed = sqlx::query_scalar!(
        r#"
        UPDATE knowledge_statistics SET analyzed_at = now()
        WHERE id = (SELECT id FROM knowledge_statistics
                    WHERE analyzed_at < now() - make_interval(secs => $1)
                    FOR UPDATE SKIP LOCKED)
        RETURNING 1 AS "claimed!"
        "#,
        every_secs,
    )
    .fetch_optional(conn)
    .await?;
    Ok(claimed.is_some())
}

/// Rows of one table, and how many changed since its last analyze.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changes {
    pub table: String,
    pub live: i64,
    pub changed: i64,
}

/// What PostgreSQL's statistics collector says of `tables` (in this schema).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn changes(conn: &mut PgConnection, tables: &[&str]) -> sqlx::Result<Vec<Changes>> {
    let tables: Vec<String> = tables.iter().map(|t| (*t).to_owned()).collect();
    sqlx::query_as!(
        Changes,
        r#"
        SELECT relname::text AS "table!", n_live_tup AS "live!", n_mod_since_analyze AS "changed!"
        FROM pg_stat_user_tables
        WHERE schemaname = current_schema() AND relname::text = ANY($1)
        "#,
        &tables,
    )
    .fetch_all(conn)
    .await
}

/// ANALYZE of one table, skipped (no wait) while another analyze or vacuum
/// holds it. `table` is one of the service's own table names, never input.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn analyze(conn: &mut PgConnection, table: &'static str) -> sqlx::Result<()> {
    use sqlx::Connection;
    let mut tx = conn.begin().await?;
    // Sampling a large table may take longer than a request may.
    sqlx::query!("SET LOCAL statement_timeout = '10min'").execute(&mut *tx).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE (SKIP_LOCKED) {table}"))).execute(&mut *tx).await?;
    tx.commit().await
}
