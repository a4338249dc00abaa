//! Migrations that take exclusive locks on tables the service keeps busy.

use sqlx::{Connection, PgPool};

/// Migration 0023 needs four tables exclusively, `workspaces` and `agents`
/// among them. While a transaction holds one of them, the migration waits,
/// but in tries of at most 100 ms a table that let go of what they took:
/// reads of the other three go on meanwhile (taken one by one, each waiting
/// its 5 s, it held the first it got while it waited for the next). Once the
/// holder commits, the migration finishes, and 0024 validates the CHECKs it
/// added.
#[sqlx::test(migrations = false)]
async fn migration_0023_lets_the_other_tables_be_read_while_it_waits(pool: PgPool) {
    let reads = ["workspaces", "knowledge_sources", "knowledge_revisions"].repeat(4);
    migrate_while_read(&pool, 22, 24, "agents", &reads).await;
    let dropped: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_constraint
         WHERE conname IN ('knowledge_revisions_agent_id_fkey', 'knowledge_revisions_workspace_id_fkey',
                           'knowledge_sources_workspace_id_fkey')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(dropped, 0);
    let validated: Vec<bool> = sqlx::query_scalar(
        "SELECT convalidated FROM pg_constraint WHERE conname LIKE 'knowledge_sources_%_shown_check'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(validated, [true, true]);
}

/// Migration 0025 needs `knowledge_passages` exclusively (answers read it,
/// promotions write it). While a transaction reads it, the migration waits
/// in tries of at most 100 ms, so other reads get in between the tries
/// instead of queueing behind it until the holder commits.
#[sqlx::test(migrations = false)]
async fn migration_0025_lets_passages_be_read_while_it_waits(pool: PgPool) {
    migrate_while_read(&pool, 24, 25, "knowledge_passages", &["knowledge_passages"; 4]).await;
    let nullable: String = sqlx::query_scalar(
        "SELECT is_nullable FROM information_schema.columns
         WHERE table_name = 'knowledge_passages' AND column_name = 'search'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(nullable, "YES", "a passage may leave its tsvector out");
}

/// Migration 0028 drops CHECKs of `knowledge_sources` and
/// `knowledge_revisions`, which needs both exclusively. While a transaction
/// reads the sources, the migration waits in tries of at most 100 ms that
/// let go of the revisions between them, so promotions and answers reading
/// the revisions get in; once the holder commits, the six bounds are gone
/// and the invariants between columns stay.
#[sqlx::test(migrations = false)]
async fn migration_0028_lets_revisions_be_read_while_it_waits(pool: PgPool) {
    migrate_while_read(&pool, 27, 28, "knowledge_sources", &["knowledge_revisions"; 4]).await;
    let checks: Vec<String> = sqlx::query_scalar(
        "SELECT conname::text FROM pg_constraint
         WHERE contype = 'c' AND conrelid IN ('knowledge_sources'::regclass, 'knowledge_revisions'::regclass)
         ORDER BY conname",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        checks,
        [
            "knowledge_revisions_check",
            "knowledge_sources_active_shown_check",
            "knowledge_sources_candidate_shown_check",
            "knowledge_sources_latest_check"
        ]
    );
}

/// Runs the migrations after `done` up to `to` while a transaction holds
/// `held` (it read it), and meanwhile reads each of `reads` in turn, 50 ms apart, with a
/// lock timeout of 2 s: far above a migration's try of 100 ms, below the 5 s
/// a table was held before, so each read must get in between the tries. The
/// migration must still be waiting for the holder after the reads; once the
/// holder commits, it must finish.
async fn migrate_while_read(pool: &PgPool, done: i64, to: i64, held: &str, reads: &[&str]) {
    sqlx::migrate!("../migrations").run_to(done, pool).await.unwrap();
    let mut holder = pool.acquire().await.unwrap().detach();
    let mut holding = holder.begin().await.unwrap();
    let hold = format!("SELECT count(*) FROM {held}");
    sqlx::query(sqlx::AssertSqlSafe(hold)).execute(&mut *holding).await.unwrap();

    let migrating = migrate_in_the_background(pool, to);
    // The reads start once the migration waits for the held table.
    assert!(waited_for(pool, held).await, "the migration never waited for {held}");
    let mut reader = pool.acquire().await.unwrap().detach();
    sqlx::query("SET lock_timeout = '2s'").execute(&mut reader).await.unwrap();
    for table in reads {
        let read = format!("SELECT count(*) FROM {table}");
        sqlx::query(sqlx::AssertSqlSafe(read)).execute(&mut reader).await.unwrap_or_else(|e| panic!("{table}: {e}"));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!migrating.is_finished(), "the migration waits for the holder of {held}");

    holding.commit().await.unwrap();
    migrating.await.unwrap().unwrap();
    reader.close().await.unwrap();
    holder.close().await.unwrap();
}

/// Whether a session comes to wait for a lock on `table` of the test's
/// database within 30 s (other tests' databases have tables of that name).
async fn waited_for(pool: &PgPool, table: &str) -> bool {
    let waiting = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                   WHERE c.relname = $1 AND NOT l.granted
                     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())";
    within_30s(|| async { sqlx::query_scalar::<_, i64>(waiting).bind(table).fetch_one(pool).await.unwrap() > 0 }).await
}

/// Runs the migrations left, up to `to`, on a task of its own.
fn migrate_in_the_background(
    pool: &PgPool,
    to: i64,
) -> tokio::task::JoinHandle<Result<(), sqlx::migrate::MigrateError>> {
    let pool = pool.clone();
    tokio::spawn(async move { sqlx::migrate!("../migrations").run_to(to, &pool).await })
}

/// Whether `check` comes true within 30 s, asked every 10 ms.
async fn within_30s<F: Future<Output = bool>>(mut check: impl FnMut() -> F) -> bool {
    for _ in 0..3_000 {
        if check().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

/// Migration 0026 drops an index of `knowledge_terms` (promotions write the
/// table, merges delete from it) concurrently: it waits for a transaction
/// that read the table, and writes go on meanwhile instead of queueing
/// behind it.
#[sqlx::test(migrations = false)]
async fn migration_0026_lets_terms_be_written_while_it_waits(pool: PgPool) {
    sqlx::migrate!("../migrations").run_to(25, &pool).await.unwrap();

    let mut holder = pool.acquire().await.unwrap().detach();
    let mut held = holder.begin().await.unwrap();
    sqlx::query("SELECT count(*) FROM knowledge_terms").execute(&mut *held).await.unwrap();
    let migrating = migrate_in_the_background(&pool, 26);
    // The migration is the only session of this database that can wait for
    // a lock here (the holder waits for nothing); a concurrent drop waits for
    // the holder's transaction, not for a lock on the table.
    let waiting = "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                   WHERE NOT l.granted AND a.datname = current_database()";
    let waited = within_30s(|| async { sqlx::query_scalar::<_, i64>(waiting).fetch_one(&pool).await.unwrap() > 0 });
    assert!(waited.await, "the migration never waited for the holder");
    let mut writer = pool.acquire().await.unwrap().detach();
    // A plain DROP INDEX would hold the writer until the holder commits.
    sqlx::query("SET lock_timeout = '2s'").execute(&mut writer).await.unwrap();
    for lexeme in ["harbour", "lighthouse"] {
        sqlx::query(
            "INSERT INTO knowledge_terms (agent_id, language, lexeme, revision_id, passages,
                                          ordinals, counts, title_counts, lengths)
             VALUES (gen_random_uuid(), 'en', $1, gen_random_uuid(), 1, '{0}', '{1}', '{0}', '{3}')",
        )
        .bind(lexeme)
        .execute(&mut writer)
        .await
        .unwrap();
    }
    assert!(!migrating.is_finished(), "the migration waits for the holder");

    held.commit().await.unwrap();
    migrating.await.unwrap().unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_indexes WHERE indexname = 'knowledge_terms_revision'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
    writer.close().await.unwrap();
    holder.close().await.unwrap();
}

/// The CHECKs of the knowledge tables' bounds.
const BOUNDS: [&str; 6] = [
    "knowledge_revisions_content_bytes_check",
    "knowledge_revisions_digest_check",
    "knowledge_revisions_provenance_uri_check",
    "knowledge_revisions_revision_check",
    "knowledge_revisions_title_check",
    "knowledge_sources_key_check",
];

/// Each of [`BOUNDS`], in that order, with whether it is validated.
async fn bounds(pool: &PgPool) -> Vec<(String, bool)> {
    sqlx::query_as(
        "SELECT conname::text, convalidated FROM pg_constraint
         WHERE contype = 'c' AND conname = ANY($1) ORDER BY conname",
    )
    .bind(&BOUNDS[..])
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Migration 0031 adds the CHECKs of the knowledge tables' bounds, which needs
/// both tables exclusively. While a transaction reads the sources, it waits
/// in tries of at most 100 ms that let go of the revisions between them, so
/// promotions and answers reading the revisions get in; once the holder
/// commits, the CHECKs are there, not yet validated (nothing read the tables
/// under the lock).
#[sqlx::test(migrations = false)]
async fn migration_0031_lets_revisions_be_read_while_it_waits(pool: PgPool) {
    migrate_while_read(&pool, 30, 31, "knowledge_sources", &["knowledge_revisions"; 4]).await;
    assert_eq!(bounds(&pool).await, BOUNDS.map(|check| (check.to_owned(), false)));
}

/// Migration 0032 validates those CHECKs without waiting for writers: it
/// finishes while a transaction that writes both tables is still open.
#[sqlx::test(migrations = false)]
async fn migration_0032_validates_the_bounds_while_writes_go_on(pool: PgPool) {
    sqlx::migrate!("../migrations").run_to(31, &pool).await.unwrap();
    let mut writer = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE knowledge_sources, knowledge_revisions IN ROW EXCLUSIVE MODE")
        .execute(&mut *writer)
        .await
        .unwrap();
    let migrating = migrate_in_the_background(&pool, 32);
    let migrated = tokio::time::timeout(std::time::Duration::from_secs(30), migrating).await;
    migrated.expect("validated while the writer's transaction is open").unwrap().unwrap();
    writer.rollback().await.unwrap();
    assert_eq!(bounds(&pool).await, BOUNDS.map(|check| (check.to_owned(), true)));
}
