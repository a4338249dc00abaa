//! The knowledge tables' statistics and the work queue's dead rows, looked
//! after by the workers themselves.
//!
//! PostgreSQL plans the worker's promotions and the answer engine's reads from
//! table statistics. Autovacuum analyzes a table only after 10% of it changed
//! (2% for these tables, migration 0016), and only where it runs: a bulk import
//! into a new Agent runs ahead of it, on plans made for an empty table, and
//! gets slower with every source. So every worker looks every few seconds at
//! how many rows of each table changed since its last analyze, and when some
//! changed a lot, one replica analyzes them: at most once a minute between all
//! replicas (one row records the last analyze). An ANALYZE samples a bounded
//! number of rows, so its cost does not grow with the table; and statistics
//! taken early in an import stay good as it grows (the planner scales them to
//! the table's current size), so the first one matters most.
//!
//! Dead rows are kept in check the same way. Each promotion leaves dead
//! versions of its revision in the work queue's indexes, and every claim walks
//! the dead entries at the head of the queue (a thousand promotions cost a
//! claim about twenty more pages); each merge of the index deletes the fresh
//! postings it takes, and a question's look-up of a common word walks one
//! dead entry per document merged. Both until a vacuum removes them, and
//! autovacuum, where it runs, waits for a share of the table to die (and
//! sleeps a minute between looks). So a worker vacuums the tables of
//! [`VACUUMED_TABLES`] once [`MIN_DEAD`] of their rows died, at most once per
//! interval between all replicas (seconds, not a minute: these costs follow
//! the rows that died since the last vacuum).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use sqlx::PgPool;

use crate::error::Result;
use crate::store;

/// Every table the add path, the worker and the answer engine plan over: the
/// one list of what is analyzed (a new knowledge table goes here).
pub const ANALYZED_TABLES: [&str; 8] = [
    "knowledge_sources",
    "knowledge_revisions",
    "knowledge_passages",
    "knowledge_terms",
    "knowledge_documents",
    "knowledge_segments",
    "knowledge_segment_terms",
    "knowledge_masks",
];

/// Changed rows below which a table is never analyzed for them.
const MIN_CHANGED: i64 = 1_000;
/// Changed rows past which a table is analyzed whatever its size: a new
/// Agent's import into a large table changes a small part of it, but the
/// planner must learn of that Agent's rows.
const MAX_CHANGED: i64 = 100_000;

/// Whether a table of `live` rows of which `changed` changed since its last
/// analyze is due: a tenth of it, at least [`MIN_CHANGED`] and at most
/// [`MAX_CHANGED`] rows.
pub fn due(live: i64, changed: i64) -> bool {
    changed >= (live / 10).clamp(MIN_CHANGED, MAX_CHANGED)
}

/// The tables vacuumed by the workers: those whose dead rows the workers'
/// claims and the answer engine's reads walk. The work queue's, and the
/// merged index's: a merge deletes the fresh postings it takes and rewrites
/// segments, and each question's look-up of a word walks the dead entries
/// of every document merged since the last vacuum.
pub const VACUUMED_TABLES: [&str; 6] = [
    "knowledge_revisions",
    "knowledge_sources",
    "knowledge_terms",
    "knowledge_documents",
    "knowledge_segments",
    "knowledge_segment_terms",
];

/// Dead rows below which a table is never vacuumed for them.
pub const MIN_DEAD: i64 = 1_000;

static ANALYZED: [AtomicU64; ANALYZED_TABLES.len()] = [const { AtomicU64::new(0) }; ANALYZED_TABLES.len()];
static VACUUMED: [AtomicU64; VACUUMED_TABLES.len()] = [const { AtomicU64::new(0) }; VACUUMED_TABLES.len()];

/// How often a worker looks (a read of PostgreSQL's statistics views).
pub const LOOK_EVERY: Duration = Duration::from_secs(5);

/// Analyzes the knowledge tables that are [`due`], unless any replica
/// analyzed within `every`. Returns the tables analyzed.
pub async fn refresh(pool: &PgPool, every: Duration) -> Result<Vec<&'static str>> {
    let mut conn = pool.acquire().await?;
    let changes = store::statistics::changes(&mut conn, &ANALYZED_TABLES).await?;
    let due: Vec<(usize, &'static str)> = ANALYZED_TABLES
        .into_iter()
        .enumerate()
        .filter(|(_, table)| changes.iter().any(|c| c.table == *table && due(c.live, c.changed)))
        .collect();
    if due.is_empty() || !store::statistics::claim(&mut conn, every.as_secs_f64()).await? {
        return Ok(Vec::new());
    }
    for (i, table) in &due {
        store::statistics::analyze(&mut conn, table).await?;
        ANALYZED[*i].fetch_add(1, Relaxed);
    }
    Ok(due.into_iter().map(|(_, table)| table).collect())
}

/// Vacuums the tables of [`VACUUMED_TABLES`] holding [`MIN_DEAD`] dead rows or
/// more, unless any replica vacuumed within `every`. Returns the tables
/// vacuumed.
pub async fn vacuum(pool: &PgPool, every: Duration) -> Result<Vec<&'static str>> {
    let mut conn = pool.acquire().await?;
    let changes = store::statistics::changes(&mut conn, &VACUUMED_TABLES).await?;
    let due: Vec<(usize, &'static str)> = VACUUMED_TABLES
        .into_iter()
        .enumerate()
        .filter(|(_, table)| changes.iter().any(|c| c.table == *table && c.dead >= MIN_DEAD))
        .collect();
    if due.is_empty() || !store::statistics::claim_vacuum(&mut conn, every.as_secs_f64()).await? {
        return Ok(Vec::new());
    }
    for (i, table) in &due {
        if let Err(error) = store::statistics::vacuum(&mut conn, table).await {
            // Its session may still carry the vacuum's timeout.
            conn.close_on_drop();
            return Err(error.into());
        }
        VACUUMED[*i].fetch_add(1, Relaxed);
    }
    Ok(due.into_iter().map(|(_, table)| table).collect())
}

/// The counters in the Prometheus text format.
pub fn render() -> String {
    let mut out = String::from(
        "# HELP svc_knowledge_analyzed_total ANALYZE runs of a knowledge table by this process (knowledge::statistics).\n\
         # TYPE svc_knowledge_analyzed_total counter\n",
    );
    for (i, table) in ANALYZED_TABLES.iter().enumerate() {
        out.push_str(&format!("svc_knowledge_analyzed_total{{table=\"{table}\"}} {}\n", ANALYZED[i].load(Relaxed)));
    }
    out.push_str(
        "# HELP svc_knowledge_vacuumed_total VACUUM runs of a knowledge table by this process (knowledge::statistics).\n\
         # TYPE svc_knowledge_vacuumed_total counter\n",
    );
    for (i, table) in VACUUMED_TABLES.iter().enumerate() {
        out.push_str(&format!("svc_knowledge_vacuumed_total{{table=\"{table}\"}} {}\n", VACUUMED[i].load(Relaxed)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_due_after_a_tenth_changed_within_bounds() {
        assert!(!due(0, 999), "small changes wait");
        assert!(due(0, 1_000), "a new table is analyzed once it holds some rows");
        assert!(!due(50_000, 4_999));
        assert!(due(50_000, 5_000));
        assert!(due(10_000_000, 100_000), "a large table after a bounded number of changes");
        assert!(!due(10_000_000, 99_999));
    }

    #[test]
    fn every_table_has_a_counter() {
        let text = render();
        for table in ANALYZED_TABLES {
            assert!(text.contains(&format!("svc_knowledge_analyzed_total{{table=\"{table}\"}} ")), "{table}");
        }
        for table in VACUUMED_TABLES {
            assert!(text.contains(&format!("svc_knowledge_vacuumed_total{{table=\"{table}\"}} ")), "{table}");
        }
    }
}
