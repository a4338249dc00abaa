//! Checks on stored Knowledge Sources shared by the API's tests and the
//! end-to-end tests.

use serde_json::Value;
use sqlx::PgPool;

/// Every live source as `knowledge_source_view` shows it (from the fields its
/// own row carries), beside the same read from its revisions' rows (the view
/// as it was defined before migration 0010).
const SHOWN: &str = "SELECT coalesce(jsonb_agg(to_jsonb(v) ORDER BY v.id), '[]') FROM knowledge_source_view v";
const FROM_REVISIONS: &str = "
    SELECT coalesce(jsonb_agg(to_jsonb(o) ORDER BY o.id), '[]') FROM (
        SELECT s.id, s.workspace_id, s.agent_id, s.key,
               l.revision, l.digest, l.title, l.provenance_kind, l.provenance_uri, l.required, l.imported_at,
               a.id AS active_id, a.revision AS active_revision, a.digest AS active_digest,
               a.state AS active_state, a.imported_at AS active_imported_at, a.error_code AS active_error_code,
               c.id AS candidate_id, c.revision AS candidate_revision, c.digest AS candidate_digest,
               c.state AS candidate_state, c.imported_at AS candidate_imported_at,
               c.error_code AS candidate_error_code,
               l.state AS latest_state, a.content_bytes AS active_bytes, c.content_bytes AS candidate_bytes
        FROM knowledge_sources s
        JOIN knowledge_revisions l ON l.id = s.latest_revision_id
        LEFT JOIN knowledge_revisions a ON a.id = s.active_revision_id
        LEFT JOIN knowledge_revisions c ON c.id = s.candidate_revision_id
        WHERE s.deleted_at IS NULL
    ) o";

/// Asserts that every live source shows exactly what its revisions hold (the
/// store keeps copies of their fields on the source's row), and returns how
/// many sources it compared.
pub async fn assert_sources_show_their_revisions(pool: &PgPool) -> usize {
    // Both sides in one statement: one snapshot, even while workers run.
    let both = format!("SELECT ({SHOWN}), ({FROM_REVISIONS})");
    let (shown, from_revisions): (Value, Value) =
        sqlx::query_as(sqlx::AssertSqlSafe(both)).fetch_one(pool).await.expect("the sources and their revisions");
    assert_eq!(shown, from_revisions, "a source shows something other than its revisions hold");
    shown.as_array().map_or(0, Vec::len)
}
