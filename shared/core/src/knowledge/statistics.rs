//! The knowledge tables' statistics and dead rows, looked after by the
//! workers themselves.
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
//! [`VACUUMED_TABLES`] once enough of their rows died ([`vacuum_due`]), at
//! most once per interval between all replicas (seconds, not a minute: these
//! costs follow the rows that died since the last vacuum).
//!
//! A run is claimed when it starts, so a long one may overlap the next
//! replica's: each table is looked at again just before its turn (one
//! another run just did is no longer due), and one that another run holds
//! is skipped without waiting. A skipped table is not counted as done.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use sqlx::{PgConnection, PgPool};

use crate::error::Result;
use crate::store;
use crate::store::statistics::Changes;
pub use crate::store::statistics::Upkeep;

/// Every table the add path, the worker and the answer engine plan over: the
/// one list of what is analyzed (a new knowledge table goes here; the index's
/// are `svc_search`'s).
pub const ANALYZED_TABLES: [&str; 8] =
    joined(["knowledge_sources", "knowledge_revisions"], svc_search::ANALYZED_TABLES);

/// `a` then `b`, as one array of `N` (their lengths' sum).
const fn joined<const A: usize, const B: usize, const N: usize>(
    a: [&'static str; A],
    b: [&'static str; B],
) -> [&'static str; N] {
    assert!(A + B == N, "N is the two lengths' sum");
    let mut out = [""; N];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < B {
        out[A + j] = b[j];
        j += 1;
    }
    out
}

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
/// index's (`svc_search::VACUUMED_TABLES`).
pub const VACUUMED_TABLES: [&str; 6] =
    joined(["knowledge_revisions", "knowledge_sources"], svc_search::VACUUMED_TABLES);

/// Dead rows below which a table is never vacuumed for them.
pub const MIN_DEAD: i64 = 1_000;
/// Dead rows past which a table is vacuumed whatever its size: what a claim
/// or a read may walk at most.
pub const MAX_DEAD: i64 = 10_000;

/// Whether a table of `live` rows of which `dead` are dead is due a vacuum:
/// a fiftieth of it, at least [`MIN_DEAD`] and at most [`MAX_DEAD`] rows. A
/// vacuum reads every index of the table whole, so a large table waits for
/// more dead rows than a small one, as far as what they cost the reads.
pub fn vacuum_due(live: i64, dead: i64) -> bool {
    dead >= (live / 50).clamp(MIN_DEAD, MAX_DEAD)
}

/// Runs of one kind of upkeep by this process, by table.
type Runs = Family<[(&'static str, &'static str); 1], Counter>;

/// Every table of `tables` at 0, so each is shown from the start.
fn runs_of(tables: &[&'static str]) -> Runs {
    let runs = Runs::default();
    for table in tables {
        let _ = runs.get_or_create(&[("table", *table)]);
    }
    runs
}

static ANALYZED: LazyLock<Runs> = LazyLock::new(|| runs_of(&ANALYZED_TABLES));
static VACUUMED: LazyLock<Runs> = LazyLock::new(|| runs_of(&VACUUMED_TABLES));

/// How often a worker looks (a read of PostgreSQL's statistics views).
pub const LOOK_EVERY: Duration = Duration::from_secs(5);

/// How long a worker waits for one run before it gives up on its connection
/// (cut off without an error) and looks again at the next interval.
pub const RUN_LIMIT: Duration = Duration::from_secs(3_600);

/// Analyzes the knowledge tables that are [`due`], unless any replica
/// analyzed within `every`. Returns the tables analyzed.
pub async fn refresh(pool: &PgPool, every: Duration) -> Result<Vec<&'static str>> {
    look_after(pool, Upkeep::Analyze, every).await
}

/// Vacuums the tables of [`VACUUMED_TABLES`] that are [`vacuum_due`], unless
/// any replica vacuumed within `every`. Returns the tables vacuumed.
pub async fn vacuum(pool: &PgPool, every: Duration) -> Result<Vec<&'static str>> {
    look_after(pool, Upkeep::Vacuum, every).await
}

/// What one kind of upkeep covers, when a table is due it, and how many
/// runs of it a table has had.
struct Kind {
    tables: &'static [&'static str],
    counters: &'static Runs,
    due: fn(&Changes) -> bool,
    runs: fn(&Changes) -> i64,
}

fn kind(upkeep: Upkeep) -> Kind {
    match upkeep {
        Upkeep::Analyze => Kind {
            tables: &ANALYZED_TABLES,
            counters: &ANALYZED,
            due: |c| due(c.live, c.changed),
            runs: |c| c.analyzes,
        },
        Upkeep::Vacuum => Kind {
            tables: &VACUUMED_TABLES,
            counters: &VACUUMED,
            due: |c| vacuum_due(c.live, c.dead),
            runs: |c| c.vacuums,
        },
    }
}

/// The one table's figures, read now.
async fn figures(conn: &mut PgConnection, table: &'static str) -> Result<Option<Changes>> {
    Ok(store::statistics::changes(conn, &[table]).await?.pop())
}

/// Runs `upkeep` on the tables due it, unless a replica ran it within
/// `every`. Returns the tables it ran on. Dropped midway (a stopping worker),
/// it closes its connection; PostgreSQL finishes the statement on its own.
pub async fn look_after(pool: &PgPool, upkeep: Upkeep, every: Duration) -> Result<Vec<&'static str>> {
    let Kind { tables, counters, due, runs } = kind(upkeep);
    let mut conn = crate::runtime::connection(pool).await?;
    let changes = store::statistics::changes(&mut conn, tables).await?;
    if !changes.iter().any(due) || !store::statistics::claim(&mut conn, upkeep, every.as_secs_f64()).await? {
        return Ok(Vec::new());
    }
    // The session's timeout is lifted: it is never pooled again.
    conn.close_on_drop();
    store::statistics::unbound(&mut conn).await?;
    let mut done = Vec::new();
    for table in tables {
        let Some(before) = figures(&mut conn, table).await?.filter(due) else { continue };
        store::statistics::run(&mut conn, upkeep, table).await?;
        if figures(&mut conn, table).await?.is_some_and(|after| runs(&after) > runs(&before)) {
            counters.get_or_create(&[("table", *table)]).inc();
            done.push(*table);
        } else {
            // Routine while autovacuum holds the table; lasting, an owner to fix.
            tracing::info!(
                table,
                ?upkeep,
                "skipped: another analyze or vacuum holds the table, or this role does not own it"
            );
        }
    }
    Ok(done)
}

/// Adds the runs of each upkeep to a worker's registry.
pub fn register(registry: &mut crate::metrics::Registry) {
    registry.register(
        "svc_knowledge_analyzed",
        "ANALYZE runs of a knowledge table by this process (knowledge::statistics)",
        ANALYZED.clone(),
    );
    registry.register(
        "svc_knowledge_vacuumed",
        "VACUUM runs of a knowledge table by this process (knowledge::statistics)",
        VACUUMED.clone(),
    );
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
    fn tables_are_due_a_vacuum_after_a_fiftieth_died_within_bounds() {
        assert!(!vacuum_due(0, 999), "a few dead rows wait");
        assert!(vacuum_due(0, 1_000));
        assert!(vacuum_due(50_000, 1_000), "a small table at the floor");
        assert!(!vacuum_due(100_000, 1_999), "a larger one waits for a fiftieth");
        assert!(vacuum_due(100_000, 2_000));
        assert!(!vacuum_due(10_000_000, 9_999), "a large one waits for more, as far as the ceiling");
        assert!(vacuum_due(10_000_000, 10_000));
    }

    #[test]
    fn every_table_has_a_counter() {
        let mut registry = crate::metrics::Registry::default();
        register(&mut registry);
        let text = registry.render(crate::metrics::Scrape::default());
        for table in ANALYZED_TABLES {
            assert!(text.contains(&format!("svc_knowledge_analyzed_total{{table=\"{table}\"}} ")), "{table}");
        }
        for table in VACUUMED_TABLES {
            assert!(text.contains(&format!("svc_knowledge_vacuumed_total{{table=\"{table}\"}} ")), "{table}");
        }
    }
}
