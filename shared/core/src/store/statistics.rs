//! The knowledge tables' upkeep: who analyzes or vacuums them next, which
//! changed since their last analyze, how many of their rows are dead and how
//! often each was looked after, and the ANALYZE and VACUUM themselves.

use sqlx::PgConnection;

/// What a worker does to a knowledge table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upkeep {
    Analyze,
    Vacuum,
}

/// Claims the next run of `upkeep` for this process if none ran in the last
/// `every_secs` (any replica's): `false` when one did, or another replica
/// holds the claim right now (it is not waited for).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn claim(conn: &mut PgConnection, upkeep: Upkeep, every_secs: f64) -> sqlx::Result<bool> {
    let analyze = upkeep == Upkeep::Analyze;
    let claimed = sqlx::query_scalar!(
        r#"
        UPDATE knowledge_statistics
        SET analyzed_at = CASE WHEN $2 THEN now() ELSE analyzed_at END,
            vacuumed_at = CASE WHEN $2 THEN vacuumed_at ELSE now() END
        WHERE id = (SELECT id FROM knowledge_statistics
                    WHERE CASE WHEN $2 THEN analyzed_at ELSE vacuumed_at END
                          < now() - make_interval(secs => $1)
                    FOR UPDATE SKIP LOCKED)
        RETURNING 1 AS "claimed!"
        "#,
        every_secs,
        analyze,
    )
    .fetch_optional(conn)
    .await?;
    Ok(claimed.is_some())
}

/// Rows of one table, how many changed since its last analyze, how many are
/// dead (left by updates and deletes, not yet vacuumed), and how many times
/// it was analyzed and vacuumed by hand (not by autovacuum).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changes {
    pub live: i64,
    pub changed: i64,
    pub dead: i64,
    pub analyzes: i64,
    pub vacuums: i64,
}

/// What PostgreSQL's statistics say of each of `tables` (in this schema; in
/// no order, a missing table left out). A VACUUM or ANALYZE is counted by the
/// time it returns (PostgreSQL 15 and later).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn changes(conn: &mut PgConnection, tables: &[&str]) -> sqlx::Result<Vec<Changes>> {
    let tables: Vec<String> = tables.iter().map(|t| (*t).to_owned()).collect();
    sqlx::query_as!(
        Changes,
        r#"
        SELECT n_live_tup AS "live!", n_mod_since_analyze AS "changed!",
               n_dead_tup AS "dead!", analyze_count AS "analyzes!", vacuum_count AS "vacuums!"
        FROM pg_stat_user_tables
        WHERE schemaname = current_schema() AND relname::text = ANY($1)
        "#,
        &tables,
    )
    .fetch_all(conn)
    .await
}

/// Lifts the statement timeout of this session for the upkeep to come: an
/// ANALYZE samples a bounded number of rows and a VACUUM's work follows the
/// table, and either cancelled at a timeout would start over next time, and
/// be cancelled again. Neither waits for a lock (`SKIP_LOCKED`). The caller
/// closes the connection after, never returning it to the pool.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn unbound(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query!("SET statement_timeout = 0").execute(conn).await?;
    Ok(())
}

/// ANALYZE or VACUUM of one table, skipped (no wait, a warning PostgreSQL
/// logs) while another analyze or vacuum holds it, or when this role does not
/// own it: [`Changes`] tells which. `table` is one of the service's own table
/// names, never input.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn run(conn: &mut PgConnection, upkeep: Upkeep, table: &'static str) -> sqlx::Result<()> {
    let statement = match upkeep {
        Upkeep::Analyze => format!("ANALYZE (SKIP_LOCKED) {table}"),
        // INDEX_CLEANUP ON: the dead index entries are what claims and reads
        // walk, and PostgreSQL would skip the indexes when few heap pages hold
        // dead rows.
        Upkeep::Vacuum => format!("VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {table}"),
    };
    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(conn).await?;
    Ok(())
}
