//! What a Workspace uses of its limits: one `workspace_usage` row and, for
//! knowledge, its escrowed shards ([`shards`]), changed by the writes that
//! change usage, in their own transactions.
//!
//! A writer changes usage with its last statement ([`reserve`] or [`adjust`]),
//! after its other writes, just before the commit, so what it locks there is
//! held briefly. On the row, the statement itself is the lock (an UPDATE holds
//! the row until the transaction ends) and, for a reservation, the limit
//! check: two writers never read the same usage and both pass. Knowledge grows
//! on the shards instead, so a Workspace's adds do not queue on its row (a
//! bulk import is many adds at once); frees lower the row's knowledge base.
//! Nothing waits on another row while holding these, and usage changes in the
//! same transaction as what it counts: right after a crash too.

use sqlx::{Connection, PgConnection};

use svc_contract::Problem;

use crate::entitlements::{self, Entitlement};
pub use crate::entitlements::{Delta, Usage};
use crate::ids::WorkspaceId;

pub mod shards;

use shards::{Reservation, Wanted};

/// How long a reservation waits at most, in steps of [`UNDECIDED_PAUSE`], for
/// room escrowed to shards that other writers hold (each at its last
/// statement) before it answers that it could not decide.
const UNDECIDED_TRIES: u32 = 50;
const UNDECIDED_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

impl Delta {
    /// The knowledge this change grows (reserved on the shards), and the rest
    /// (applied to the row, frees of knowledge included).
    fn split(&self) -> (Delta, Delta) {
        let grown = Delta {
            knowledge_sources: self.knowledge_sources.max(0),
            knowledge_bytes: self.knowledge_bytes.max(0),
            ..Delta::default()
        };
        let rest = Delta {
            knowledge_sources: self.knowledge_sources.min(0),
            knowledge_bytes: self.knowledge_bytes.min(0),
            ..*self
        };
        (grown, rest)
    }
}

/// The usage row of a new Workspace.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn create(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<()> {
    sqlx::query!("INSERT INTO workspace_usage (workspace_id) VALUES ($1)", workspace as WorkspaceId)
        .execute(&mut *conn)
        .await?;
    shards::create(conn, workspace).await
}

/// The usage committed now (the row and its shards).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn get(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<Usage> {
    sqlx::query_as!(
        Usage,
        r#"
        SELECT u.agents, u.api_keys,
               u.knowledge_sources + (SELECT coalesce(sum(s.sources), 0) FROM workspace_usage_shards s
                                      WHERE s.workspace_id = u.workspace_id)::bigint AS "knowledge_sources!",
               u.knowledge_bytes + (SELECT coalesce(sum(s.bytes), 0) FROM workspace_usage_shards s
                                    WHERE s.workspace_id = u.workspace_id)::bigint AS "knowledge_bytes!",
               CASE WHEN u.conversations_month = date_trunc('month', now() AT TIME ZONE 'UTC')::date
                    THEN u.conversations ELSE 0 END AS "conversations!"
        FROM workspace_usage u WHERE u.workspace_id = $1
        "#,
        workspace as WorkspaceId,
    )
    .fetch_one(conn)
    .await
}

/// Applies `delta` if every counter it grows stays within its limit (`limits`,
/// in the order of [`entitlements::LimitKey::ALL`]); `false`, with nothing written, otherwise
/// (also when room is left only on shards other writers held throughout).
/// A counter the delta does not grow is not checked, so a Workspace over a
/// lowered limit can still shrink.
///
/// What it locks stays locked until the transaction ends: call it last (see
/// the module documentation).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn reserve(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    delta: &Delta,
    limits: [i64; 5],
) -> sqlx::Result<bool> {
    let (grown, rest) = delta.split();
    if grown == Delta::default() {
        return reserve_on_row(conn, workspace, &rest, limits).await;
    }
    if rest == Delta::default() {
        return reserve_on_shards(conn, workspace, &grown, limits).await;
    }
    // Both: the row first (the order every writer takes them in), and neither
    // written unless both are.
    let mut both = conn.begin().await?;
    let reserved = reserve_on_row(&mut both, workspace, &rest, limits).await?
        && reserve_on_shards(&mut both, workspace, &grown, limits).await?;
    if reserved {
        both.commit().await?
    } else {
        both.rollback().await?
    }
    Ok(reserved)
}

/// Grows the Workspace's usage by `delta` within `entitlement`'s limits, in
/// the caller's transaction: `limit_exceeded` (and nothing written) when a
/// counter the delta grows would pass its limit. The check and the count are
/// one step ([`reserve`]), so concurrent writers never pass a limit together;
/// what it locks is held until the transaction ends, so the caller makes it
/// its last write.
pub async fn reserve_within_limits(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    entitlement: &Entitlement,
    delta: &Delta,
) -> crate::error::Result<()> {
    reserve_within_limits_freeing(conn, workspace, entitlement, delta, &Delta::default()).await
}

/// [`reserve_within_limits`] for a write that also frees usage (`freed`,
/// negative), as one change of usage: checked as if the freeing came first,
/// and refused naming what was `wanted`. One change, so the write never holds
/// the usage row while it waits for room on the shards.
pub async fn reserve_within_limits_freeing(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    entitlement: &Entitlement,
    wanted: &Delta,
    freed: &Delta,
) -> crate::error::Result<()> {
    let net = wanted.and(*freed);
    if reserve(conn, workspace, &net, entitlement.limit_array()).await? {
        return Ok(());
    }
    let current = get(conn, workspace).await?.and(*freed);
    match entitlements::refused(&current, entitlement, wanted) {
        Some(problem) => Err(problem.into()),
        // The counters moved between the two statements, or the room left was
        // escrowed to other writers' shards throughout: nothing was written,
        // and a retry decides.
        None => Err(Problem::busy().into()),
    }
}

/// `limit_exceeded` when the usage committed now already leaves no room for
/// `delta` (read without a lock: [`reserve_within_limits`] decides). A write
/// that meets another problem before its reservation asks this first, so a
/// call over a limit is refused for the limit whatever else is wrong with it
/// (contract's order of checks).
pub async fn check_room(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    entitlement: &Entitlement,
    delta: &Delta,
) -> crate::error::Result<()> {
    let current = get(conn, workspace).await?;
    match entitlements::refused(&current, entitlement, delta) {
        Some(problem) => Err(problem.into()),
        None => Ok(()),
    }
}

/// Grows knowledge on the shards: a few tries while the room left is escrowed
/// to shards other writers hold (they are at their last statement).
async fn reserve_on_shards(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    grown: &Delta,
    limits: [i64; 5],
) -> sqlx::Result<bool> {
    let wanted = Wanted {
        sources: grown.knowledge_sources,
        bytes: grown.knowledge_bytes,
        sources_limit: limits[2],
        bytes_limit: limits[3],
    };
    for _ in 1..UNDECIDED_TRIES {
        match shards::reserve(conn, workspace, wanted).await? {
            Reservation::Granted => return Ok(true),
            Reservation::Refused => return Ok(false),
            Reservation::Undecided => tokio::time::sleep(UNDECIDED_PAUSE).await,
        }
    }
    Ok(shards::reserve(conn, workspace, wanted).await? == Reservation::Granted)
}

/// Applies a delta that grows no knowledge to the row, checking what it grows.
async fn reserve_on_row(
    conn: &mut PgConnection,
    workspace: WorkspaceId,
    delta: &Delta,
    limits: [i64; 5],
) -> sqlx::Result<bool> {
    let applied = sqlx::query_scalar!(
        r#"
        WITH month AS (SELECT date_trunc('month', now() AT TIME ZONE 'UTC')::date AS start),
             d AS (SELECT $2::bigint AS agents, $3::bigint AS api_keys, $4::bigint AS sources,
                          $5::bigint AS bytes, $6::bigint AS conversations)
        UPDATE workspace_usage u SET
            agents = u.agents + d.agents,
            api_keys = u.api_keys + d.api_keys,
            knowledge_sources = u.knowledge_sources + d.sources,
            knowledge_bytes = u.knowledge_bytes + d.bytes,
            conversations = CASE WHEN u.conversations_month = month.start THEN u.conversations ELSE 0 END
                            + d.conversations,
            conversations_month = month.start
        FROM month, d
        WHERE u.workspace_id = $1
          AND (d.agents <= 0 OR u.agents + d.agents <= $7)
          AND (d.api_keys <= 0 OR u.api_keys + d.api_keys <= $8)
          AND (d.conversations <= 0
               OR CASE WHEN u.conversations_month = month.start THEN u.conversations ELSE 0 END
                  + d.conversations <= $9)
        RETURNING 1 AS "applied!"
        "#,
        workspace as WorkspaceId,
        delta.agents,
        delta.api_keys,
        delta.knowledge_sources.min(0),
        delta.knowledge_bytes.min(0),
        delta.conversations,
        limits[0],
        limits[1],
        limits[4],
    )
    .fetch_optional(conn)
    .await?;
    Ok(applied.is_some())
}

/// Applies `delta` to the row without checking limits: for changes that free
/// what they count (a deletion, a revision replaced). The row stays locked
/// until the transaction ends: call it last.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn adjust(conn: &mut PgConnection, workspace: WorkspaceId, delta: &Delta) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        UPDATE workspace_usage SET
            agents = agents + $2::bigint,
            api_keys = api_keys + $3::bigint,
            knowledge_sources = knowledge_sources + $4::bigint,
            knowledge_bytes = knowledge_bytes + $5::bigint
        WHERE workspace_id = $1
        "#,
        workspace as WorkspaceId,
        delta.agents,
        delta.api_keys,
        delta.knowledge_sources,
        delta.knowledge_bytes,
    )
    .execute(conn)
    .await?;
    Ok(())
}
