//! Whose turn it is: the fair order in which workers take revisions across
//! Workspaces (see `knowledge::process_next`), and how many wake-ups the
//! queue lacks.

use sqlx::PgConnection;

use crate::ids::RevisionId;

/// The next revisions to try, one per Workspace with work nobody holds, in
/// turn: the Workspace with the fewest attempts running first, then the one
/// whose last attempt started longest ago (never first), then the one whose
/// next revision is oldest. Each Workspace offers its oldest unfinished
/// revision without a live lease, so its sources start in the order they were
/// added.
///
/// The Workspaces with work are found by skipping along the queue index (one
/// probe each), so the cost follows the number of Workspaces waiting, not the
/// revisions they have queued; the running attempts are counted in one pass
/// over the few rows being processed; each Workspace's next revision is read
/// only for the Workspaces taken, in turn (a Workspace whose revisions are all
/// held offers none, and the next in turn is read instead). The plan needs no
/// statistics.
///
/// When fewer Workspaces than `limit` have work nobody holds, the first in
/// turn also offers its next revisions after its oldest, up to `limit` in all:
/// workers claiming at the same moment then take different revisions of that
/// Workspace side by side (see `knowledge::process_next`) instead of queueing
/// for its oldest.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn next_in_turn(conn: &mut PgConnection, limit: i64) -> sqlx::Result<Vec<RevisionId>> {
    sqlx::query_scalar!(
        r#"
        WITH RECURSIVE waiting (workspace_id, oldest) AS (
            (SELECT workspace_id, imported_at FROM knowledge_revisions
             WHERE state IN ('pending', 'processing')
             ORDER BY workspace_id, imported_at, id LIMIT 1)
            UNION ALL
            SELECT next.workspace_id, next.imported_at
            FROM waiting w
            CROSS JOIN LATERAL (
                SELECT r.workspace_id, r.imported_at FROM knowledge_revisions r
                WHERE r.state IN ('pending', 'processing') AND r.workspace_id > w.workspace_id
                ORDER BY r.workspace_id, r.imported_at, r.id LIMIT 1
            ) next
        ), running AS (
            SELECT workspace_id, count(*) AS attempts FROM knowledge_revisions
            WHERE state = 'processing' AND lease_until > now()
            GROUP BY workspace_id
        ), turn AS (
            SELECT w.workspace_id, w.oldest, coalesce(running.attempts, 0) AS attempts, t.served_at
            FROM waiting w
            LEFT JOIN running ON running.workspace_id = w.workspace_id
            LEFT JOIN workspace_turns t ON t.workspace_id = w.workspace_id
        ), heads AS (
            SELECT turn.place, turn.workspace_id, head.id, head.imported_at
            FROM (SELECT *, row_number() OVER (ORDER BY attempts, served_at NULLS FIRST, oldest, workspace_id) AS place
                  FROM turn ORDER BY place OFFSET 0) turn
            CROSS JOIN LATERAL (
                SELECT r.id, r.imported_at FROM knowledge_revisions r
                WHERE r.workspace_id = turn.workspace_id AND r.state IN ('pending', 'processing')
                  AND (r.lease_until IS NULL OR r.lease_until <= now())
                ORDER BY r.imported_at, r.id
                LIMIT 1
            ) head
            ORDER BY turn.place
            LIMIT $1
        )
        SELECT id AS "id!: RevisionId" FROM (
            SELECT false AS more, place, imported_at, id FROM heads
            UNION ALL
            SELECT true, 0, more.imported_at, more.id
            FROM (SELECT * FROM heads ORDER BY place LIMIT 1) first
            CROSS JOIN LATERAL (
                SELECT r.imported_at, r.id FROM knowledge_revisions r
                WHERE r.workspace_id = first.workspace_id AND r.state IN ('pending', 'processing')
                  AND (r.lease_until IS NULL OR r.lease_until <= now())
                  AND (r.imported_at, r.id) > (first.imported_at, first.id)
                ORDER BY r.imported_at, r.id
                LIMIT $1 - (SELECT count(*) FROM heads)
            ) more
        ) offered
        ORDER BY more, place, imported_at, id
        "#,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// Wakes work that lost its wake-up. A job only wakes a worker, any job
/// serves whichever revision is next in turn, and a worker it wakes goes on
/// to the next until none is left, so what must hold is that the queue has a
/// job per revision nobody holds, up to `wanted`: with `queued` jobs
/// waiting, this marks as sent again (and returns) up to `limit` of the
/// shortfall, taken from the revisions whose last job is older than
/// `after_secs` (a job may be on its way for a newer one). A long backlog
/// whose jobs are waiting gets none: before, every revision waiting
/// longer than `after_secs` was sent again, flooding the queue.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn take_unawakened(
    conn: &mut PgConnection,
    after_secs: f64,
    queued: i64,
    wanted: i64,
    limit: i64,
) -> sqlx::Result<Vec<RevisionId>> {
    sqlx::query_scalar!(
        r#"
        WITH free AS (
            SELECT count(*) AS revisions FROM knowledge_revisions
            WHERE state IN ('pending', 'processing') AND (lease_until IS NULL OR lease_until < now())
        )
        UPDATE knowledge_revisions SET enqueued_at = now()
        WHERE id IN (
            SELECT id FROM knowledge_revisions
            WHERE state IN ('pending', 'processing')
              AND enqueued_at < now() - make_interval(secs => $1)
              AND (lease_until IS NULL OR lease_until < now())
            ORDER BY enqueued_at
            LIMIT least($3, greatest(0, least((SELECT revisions FROM free), $4) - $2))
            FOR UPDATE SKIP LOCKED
        )
        RETURNING id AS "id: RevisionId"
        "#,
        after_secs,
        queued,
        limit,
        wanted,
    )
    .fetch_all(conn)
    .await
}
