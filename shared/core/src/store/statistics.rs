//! The knowledge tables' upkeep: who analyzes or vacuums them next, which
//! changed since their last analyze and how many of their rows are dead, and
//! the ANALYZE and VACUUM themselves.

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

/// Claims the next vacuum for this process if none ran in the last
/// `every_secs` (any replica's), as [`claim`] does for analyzes.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn claim_vacuum(conn: &mut PgConnection, every_secs: f64) -> sqlx::Result<bool> {
    let claimed = sqlx::query_scalar!(
        r#"
        UPDATE knowledge_statistics SET vacuumed_at = now()
        WHERE id = (SELECT id FROM knowledge_statistics
                    WHERE vacuumed_at < now() - make_interval(secs => $1)
                    FOR UPDATE SKIP LOCKED)
        RETURNING 1 AS "claimed!"
        "#,
        every_secs,
    )
    .fetch_optional(conn)
    .await?;
    Ok(claimed.is_some())
}

/// Rows of one table, how many changed since its last analyze, and how many
/// are dead (left by updates and deletes, not yet vacuumed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changes {
    pub table: String,
    pub live: i64,
    pub changed: i64,
    pub dead: i64,
}

/// What PostgreSQL's statistics collector says of `tables` (in this schema).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn changes(conn: &mut PgConnection, tables: &[&str]) -> sqlx::Result<Vec<Changes>> {
    let tables: Vec<String> = tables.iter().map(|t| (*t).to_owned()).collect();
    sqlx::query_as!(
        Changes,
        r#"
        SELECT relname::text AS "table!", n_live_tup AS "live!", n_mod_since_analyze AS "changed!",
               n_dead_tup AS "dead!"
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

/// VACUUM of one table and its indexes, skipped (no wait) while another vacuum
/// or analyze holds it. `table` is one of the service's own table names, never
/// input. A VACUUM cannot run in a transaction, so its longer timeout is set on
/// the session and reset after; a connection that failed on the way is closed
/// by the caller.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn vacuum(conn: &mut PgConnection, table: &'static str) -> sqlx::Result<()> {
    sqlx::query!("SET statement_timeout = '10min'").execute(&mut *conn).await?;
    // INDEX_CLEANUP ON: the dead index entries are what claims walk, and
    // PostgreSQL would skip the indexes when few heap pages hold dead rows.
    sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {table}")))
        .execute(&mut *conn)
        .await?;
    sqlx::query!("RESET statement_timeout").execute(conn).await?;
    Ok(())
}
