//! The knowledge tables' statistics are the service's own business: a worker
//! analyzes the tables that changed a lot, once per interval between all
//! replicas.

use std::time::Duration;

use sqlx::PgPool;
use svc_core::knowledge::statistics::{VACUUMED_TABLES, refresh, vacuum};
use svc_core::knowledge::{Outcome, process_next};
use svc_core::runtime;

use crate::helpers::Tenant;
use crate::knowledge::{add_input, processing};

/// What PostgreSQL counts of one table of this test's database, read here
/// rather than through the code under test.
#[derive(sqlx::FromRow)]
struct Counts {
    changed: i64,
    dead: i64,
    vacuums: i64,
}

async fn counts(pool: &PgPool, table: &str) -> Counts {
    sqlx::query_as(
        "SELECT n_mod_since_analyze AS changed, n_dead_tup AS dead, vacuum_count AS vacuums
         FROM pg_stat_user_tables WHERE relname = $1",
    )
    .bind(table)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Waits until PostgreSQL's counts of `table` satisfy `ready` (they follow a
/// commit within a second or so).
async fn counts_until(pool: &PgPool, table: &str, ready: impl Fn(&Counts) -> bool) {
    for _ in 0..1_000 {
        if ready(&counts(pool, table).await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Counts { changed, dead, .. } = counts(pool, table).await;
    panic!("{table}'s counts never got there: {changed} changed, {dead} dead");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_tables_that_changed_a_lot_are_analyzed_once_between_replicas(pool: PgPool) {
    let s = Tenant::new(pool.clone()).await;
    s.ok("knowledge-sources/add", add_input(&s.agent, "seed", "The seed of many sources.")).await;
    // An import of 1,500 sources (their revisions are not needed here).
    sqlx::query(
        "INSERT INTO knowledge_sources
         SELECT (jsonb_populate_record(NULL::knowledge_sources,
                 to_jsonb(s) || jsonb_build_object('id', gen_random_uuid(), 'key', 'k' || g))).*
         FROM knowledge_sources s, generate_series(1, 1500) g",
    )
    .execute(&pool)
    .await
    .unwrap();
    counts_until(&pool, "knowledge_sources", |c| c.changed >= 1_500).await;

    // Two replicas look at once: one analyzes what is due, the other nothing.
    let every = Duration::from_secs(60);
    let (a, b) = tokio::join!(refresh(&pool, every), refresh(&pool, every));
    let mut analyzed = [a.unwrap(), b.unwrap()];
    analyzed.sort();
    assert_eq!(analyzed, [vec![], vec!["knowledge_sources"]], "only the table that changed a lot, once");
    assert!(counts(&pool, "knowledge_sources").await.changed < 1_000, "its changes are counted from the analyze");
    let tuples: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE relname = 'knowledge_sources'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(tuples >= 1_500.0, "the planner knows the table's size: {tuples}");

    // Within the interval, nothing more, however much changes.
    sqlx::query("UPDATE knowledge_sources SET title = title || '.'").execute(&pool).await.unwrap();
    counts_until(&pool, "knowledge_sources", |c| c.changed >= 1_500).await;
    assert_eq!(refresh(&pool, every).await.unwrap(), Vec::<&str>::new());
    // Past it (an interval of zero), the next look analyzes again.
    assert_eq!(refresh(&pool, Duration::ZERO).await.unwrap(), ["knowledge_sources"]);
}

/// Keeps autovacuum (where it runs) off the tables a test vacuums: it could
/// take their dead rows first, or hold a table while the test's run skips it.
async fn no_autovacuum(pool: &PgPool) {
    for table in VACUUMED_TABLES {
        sqlx::query(sqlx::AssertSqlSafe(format!("ALTER TABLE {table} SET (autovacuum_enabled = false)")))
            .execute(pool)
            .await
            .unwrap();
    }
}

/// Leaves 1,500 dead rows in the work queue's table, as promotions do.
async fn kill_revisions(pool: &PgPool) {
    sqlx::query(
        "WITH copies AS (
             INSERT INTO knowledge_revisions
             SELECT (jsonb_populate_record(NULL::knowledge_revisions,
                     to_jsonb(r) || jsonb_build_object('id', gen_random_uuid()))).*
             FROM (SELECT * FROM knowledge_revisions LIMIT 1) r, generate_series(1, 1500) g
             RETURNING id
         )
         SELECT count(*) FROM copies",
    )
    .execute(pool)
    .await
    .unwrap();
    let before = counts(pool, "knowledge_revisions").await.dead;
    sqlx::query("DELETE FROM knowledge_revisions r WHERE NOT EXISTS (SELECT 1 FROM knowledge_sources s WHERE s.latest_revision_id = r.id)")
        .execute(pool)
        .await
        .unwrap();
    counts_until(pool, "knowledge_revisions", |c| c.dead >= before + 1_500).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn tables_with_many_dead_rows_are_vacuumed_once_between_replicas(pool: PgPool) {
    no_autovacuum(&pool).await;
    let s = Tenant::new(pool.clone()).await;
    s.ok("knowledge-sources/add", add_input(&s.agent, "seed", "The seed of many revisions.")).await;
    let promoted = process_next(&pool, &processing("statistics")).await.unwrap();
    assert_eq!(promoted, Outcome::Promoted, "its postings are the merged index's fresh rows");
    let every = Duration::from_secs(60);
    assert_eq!(vacuum(&pool, every).await.unwrap(), Vec::<&str>::new(), "a few dead rows wait");

    kill_revisions(&pool).await;
    // Two replicas look at once: one vacuums, the other does nothing.
    let (a, b) = tokio::join!(vacuum(&pool, every), vacuum(&pool, every));
    let mut vacuumed = [a.unwrap(), b.unwrap()];
    vacuumed.sort();
    assert_eq!(vacuumed, [vec![], vec!["knowledge_revisions"]], "the queue's table, once");
    assert!(counts(&pool, "knowledge_revisions").await.dead < 1_000, "its dead rows are gone");
    let revisions: i64 = sqlx::query_scalar("SELECT count(*) FROM knowledge_revisions").fetch_one(&pool).await.unwrap();
    assert_eq!(revisions, 1, "the live revision stays");

    // Within the interval, nothing more, however many rows die.
    kill_revisions(&pool).await;
    assert_eq!(vacuum(&pool, every).await.unwrap(), Vec::<&str>::new());
    // Past it (an interval of zero), the next look vacuums again.
    assert_eq!(vacuum(&pool, Duration::ZERO).await.unwrap(), ["knowledge_revisions"]);
    assert!(counts(&pool, "knowledge_revisions").await.dead < 1_000);

    // The merged index's fresh postings die as merges take them: vacuumed too.
    let before = counts(&pool, "knowledge_terms").await.dead;
    sqlx::query(
        "INSERT INTO knowledge_terms
         SELECT (jsonb_populate_record(NULL::knowledge_terms,
                 to_jsonb(t) || jsonb_build_object('lexeme', 'zz' || g))).*
         FROM (SELECT * FROM knowledge_terms LIMIT 1) t, generate_series(1, 1500) g",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("DELETE FROM knowledge_terms WHERE lexeme LIKE 'zz%'").execute(&pool).await.unwrap();
    counts_until(&pool, "knowledge_terms", |c| c.dead >= before + 1_500).await;
    assert_eq!(vacuum(&pool, Duration::ZERO).await.unwrap(), ["knowledge_terms"]);
    assert!(counts(&pool, "knowledge_terms").await.dead < 1_000);
}

/// A queue's table holding one live revision and 1,500 dead rows, with
/// autovacuum off.
async fn dead_queue(pool: &PgPool) {
    no_autovacuum(pool).await;
    let s = Tenant::new(pool.clone()).await;
    s.ok("knowledge-sources/add", add_input(&s.agent, "seed", "The seed of many revisions.")).await;
    kill_revisions(pool).await;
}

#[sqlx::test(migrations = "../migrations")]
async fn a_table_another_run_holds_is_skipped_and_not_counted(pool: PgPool) {
    dead_queue(&pool).await;
    let counted = counts(&pool, "knowledge_revisions").await.vacuums;

    // Another run holds the table (an autovacuum, an ANALYZE, a replica's
    // vacuum): PostgreSQL skips it with a warning, not an error.
    let mut other = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE knowledge_revisions IN SHARE UPDATE EXCLUSIVE MODE").execute(&mut *other).await.unwrap();
    assert_eq!(vacuum(&pool, Duration::ZERO).await.unwrap(), Vec::<&str>::new(), "not reported as vacuumed");
    assert_eq!(counts(&pool, "knowledge_revisions").await.vacuums, counted, "nor run");
    assert!(counts(&pool, "knowledge_revisions").await.dead >= 1_500, "its dead rows are still there");

    // Once it is free, the next look vacuums it.
    other.rollback().await.unwrap();
    assert_eq!(vacuum(&pool, Duration::ZERO).await.unwrap(), ["knowledge_revisions"]);
    assert_eq!(counts(&pool, "knowledge_revisions").await.vacuums, counted + 1);
    assert!(counts(&pool, "knowledge_revisions").await.dead < 1_000);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_vacuums_connection_never_returns_to_the_pool(pool: PgPool) {
    dead_queue(&pool).await;
    // The service's own pool: one connection, with the serving timeouts.
    let options = pool.connect_options();
    let url = format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap()
    );
    let serving = runtime::connect(&url, "svc-worker", 1, runtime::Timeouts::SERVING).unwrap();
    assert_eq!(vacuum(&serving, Duration::ZERO).await.unwrap(), ["knowledge_revisions"]);
    let timeout: String = sqlx::query_scalar("SHOW statement_timeout").fetch_one(&serving).await.unwrap();
    assert_eq!(timeout, "30s", "the next user of the pool gets a connection with the serving timeout");
}
