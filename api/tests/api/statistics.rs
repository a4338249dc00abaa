//! The knowledge tables' statistics are the service's own business (issue 23,
//! part 2): a worker analyzes the tables that changed a lot, once per interval
//! between all replicas.

use std::time::Duration;

use sqlx::PgPool;
use svc_core::knowledge::statistics::refresh;

use crate::helpers::Tenant;
use crate::knowledge::add_input;

async fn changed(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar("SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = $1")
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap()
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
    // PostgreSQL counts the changes within a second or so of the commit.
    for _ in 0..1_000 {
        if changed(&pool, "knowledge_sources").await >= 1_500 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(changed(&pool, "knowledge_sources").await >= 1_500);

    // Two replicas look at once: one analyzes what is due, the other nothing.
    let every = Duration::from_secs(60);
    let (a, b) = tokio::join!(refresh(&pool, every), refresh(&pool, every));
    let mut analyzed = [a.unwrap(), b.unwrap()];
    analyzed.sort();
    assert_eq!(analyzed, [vec![], vec!["knowledge_sources"]], "only the table that changed a lot, once");
    assert!(changed(&pool, "knowledge_sources").await < 1_000, "its changes are counted from the analyze");
    let tuples: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE relname = 'knowledge_sources'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(tuples >= 1_500.0, "the planner knows the table's size: {tuples}");

    // Within the interval, nothing more, however much changes.
    sqlx::query("UPDATE knowledge_sources SET title = title || '.'").execute(&pool).await.unwrap();
    for _ in 0..1_000 {
        if changed(&pool, "knowledge_sources").await >= 1_500 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(refresh(&pool, every).await.unwrap(), Vec::<&str>::new());
    // Past it (an interval of zero), the next look analyzes again.
    assert_eq!(refresh(&pool, Duration::ZERO).await.unwrap(), ["knowledge_sources"]);
}
