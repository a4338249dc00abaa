//! Escrowed shards of a Workspace's knowledge usage: adds of one Workspace run
//! side by side instead of queueing on its usage row.
//!
//! Each Workspace has [`SHARDS`] rows in `workspace_usage_shards`. A shard
//! counts knowledge usage since the last rebalance and holds room: a slice of
//! what the limits leave, escrowed to it. A reservation moves room to usage on
//! a shard it can lock without waiting (its connection's own first, so writers
//! on different connections rarely meet). When no shard has the room, a
//! rebalance, under the usage row's lock, folds the shards it can lock into the
//! row and shares out again what the limits leave ([`plan`]).
//!
//! Exact at every commit: the row's usage, the shards' usage and their room
//! never sum past a limit, so no two writers can both pass it; and a refusal is
//! made only from usage committed or held by this transaction. Nobody ever
//! waits for a shard: shards are taken with `SKIP LOCKED`, and the only lock a
//! rebalance waits for is the usage row, whose holders wait for no shard. A
//! shard some other writer holds keeps its room; when only such room is left,
//! the rebalance lets go of everything and tries again shortly
//! ([`Reservation::Undecided`]), since that writer is at its last statement.
//!
//! An add takes room as `take_room` does inside its own statement
//! (`store::knowledge::add_source`), after its source and revision, under
//! the limits of a plan and overrides its Workspace row still has.

use sqlx::{Connection, PgConnection};

use crate::ids::WorkspaceId;

/// Shards per Workspace (the table's CHECK says the same).
pub const SHARDS: i16 = 16;

/// What a reservation on the shards came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Reservation {
    Granted,
    /// Usage committed (or held by this transaction) leaves no room.
    Refused,
    /// The room left is escrowed to shards other writers hold right now.
    Undecided,
}

/// Knowledge usage wanted, and the limits it is checked against.
#[derive(Clone, Copy, Debug)]
pub struct Wanted {
    pub sources: i64,
    pub bytes: i64,
    pub sources_limit: i64,
    pub bytes_limit: i64,
}

/// One shard as a rebalance finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub shard: i16,
    pub sources: i64,
    pub bytes: i64,
    pub sources_room: i64,
    pub bytes_room: i64,
    /// Locked by this rebalance (its own transaction's shards included);
    /// otherwise another writer holds it and it is left as it is.
    pub held: bool,
}

/// What a rebalance writes: the row's new knowledge base, and the shards it
/// holds with their usage folded away and their new room.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    pub base_sources: i64,
    pub base_bytes: i64,
    pub shards: Vec<Shard>,
}

/// The rebalance of `shards` for `wanted`, on a row whose knowledge base is
/// `base`; `own` is the shard to grant on when it is held.
pub fn plan(base: (i64, i64), shards: &[Shard], own: i16, wanted: Wanted) -> Result<Plan, Reservation> {
    let held: Vec<&Shard> = shards.iter().filter(|s| s.held).collect();
    let sum = |f: fn(&Shard) -> i64, held: bool| -> i128 {
        shards.iter().filter(|s| s.held == held).map(|s| i128::from(f(s))).sum()
    };
    // Usage committed or held by this transaction: the row and every shard.
    let used = (
        i128::from(base.0) + sum(|s| s.sources, true) + sum(|s| s.sources, false),
        i128::from(base.1) + sum(|s| s.bytes, true) + sum(|s| s.bytes, false),
    );
    let need = (i128::from(wanted.sources.max(0)), i128::from(wanted.bytes.max(0)));
    let limit = (i128::from(wanted.sources_limit), i128::from(wanted.bytes_limit));
    let passes = |used: i128, need: i128, limit: i128| need > 0 && used + need > limit;
    if passes(used.0, need.0, limit.0) || passes(used.1, need.1, limit.1) {
        return Err(Reservation::Refused);
    }
    // Room escrowed to shards other writers hold counts as used.
    let free = (limit.0 - used.0 - sum(|s| s.sources_room, false), limit.1 - used.1 - sum(|s| s.bytes_room, false));
    let short = |free: i128, need: i128| need > 0 && free < need;
    if short(free.0, need.0) || short(free.1, need.1) || held.is_empty() {
        return Err(Reservation::Undecided);
    }
    let mine = held.iter().position(|s| s.shard == own).unwrap_or(0);
    // What is left once this reservation is granted, shared evenly; the rest
    // of the division one unit a shard from the one granted on, so that near a
    // limit the last units of room still sit on as many shards as there are
    // units. A limit already passed (lowered under usage) leaves no room for a
    // counter not grown.
    let spare = ((free.0 - need.0).max(0), (free.1 - need.1).max(0));
    let count = held.len();
    let narrow = |v: i128| i64::try_from(v).unwrap_or(i64::MAX);
    let shards = held
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (turn, mine) = (((i + count - mine) % count) as i128, i == mine);
            let room = |spare: i128| spare / count as i128 + i128::from(turn < spare % count as i128);
            Shard {
                shard: s.shard,
                sources: if mine { narrow(need.0) } else { 0 },
                bytes: if mine { narrow(need.1) } else { 0 },
                sources_room: narrow(room(spare.0)),
                bytes_room: narrow(room(spare.1)),
                held: true,
            }
        })
        .collect();
    Ok(Plan {
        base_sources: narrow(i128::from(base.0) + sum(|s| s.sources, true)),
        base_bytes: narrow(i128::from(base.1) + sum(|s| s.bytes, true)),
        shards,
    })
}

/// The shards of a new Workspace, with no room yet.
pub async fn create(conn: &mut PgConnection, workspace: WorkspaceId) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO workspace_usage_shards (workspace_id, shard) SELECT $1, generate_series(0, $2::smallint - 1)",
        workspace as WorkspaceId,
        SHARDS,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Moves `wanted` from room to usage on a shard that has it under these
/// limits and that nobody else holds; `false` when there is none.
async fn take_room(conn: &mut PgConnection, workspace: WorkspaceId, wanted: Wanted) -> sqlx::Result<bool> {
    let taken = sqlx::query_scalar!(
        r#"
        UPDATE workspace_usage_shards s SET
            sources = s.sources + $2, bytes = s.bytes + $3,
            sources_room = s.sources_room - $2, bytes_room = s.bytes_room - $3
        WHERE s.workspace_id = $1 AND s.shard = (
            SELECT shard FROM workspace_usage_shards
            WHERE workspace_id = $1 AND sources_room >= $2 AND bytes_room >= $3
              AND room_limits = ARRAY[$4::bigint, $5::bigint]
            ORDER BY (shard - pg_backend_pid() % $6::smallint + $6::smallint) % $6::smallint
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
        RETURNING s.shard
        "#,
        workspace as WorkspaceId,
        wanted.sources.max(0),
        wanted.bytes.max(0),
        wanted.sources_limit,
        wanted.bytes_limit,
        SHARDS,
    )
    .fetch_optional(conn)
    .await?;
    Ok(taken.is_some())
}

/// Reserves `wanted` on the shards; the rebalance, when one is needed, runs in
/// a savepoint so that anything but a grant lets go of what it locked.
pub async fn reserve(conn: &mut PgConnection, workspace: WorkspaceId, wanted: Wanted) -> sqlx::Result<Reservation> {
    if take_room(conn, workspace, wanted).await? {
        return Ok(Reservation::Granted);
    }
    let mut savepoint = conn.begin().await?;
    match rebalance(&mut savepoint, workspace, wanted).await? {
        Reservation::Granted => {
            savepoint.commit().await?;
            Ok(Reservation::Granted)
        }
        other => {
            savepoint.rollback().await?;
            Ok(other)
        }
    }
}

async fn rebalance(conn: &mut PgConnection, workspace: WorkspaceId, wanted: Wanted) -> sqlx::Result<Reservation> {
    let base = sqlx::query!(
        "SELECT knowledge_sources, knowledge_bytes FROM workspace_usage WHERE workspace_id = $1 FOR UPDATE",
        workspace as WorkspaceId,
    )
    .fetch_one(&mut *conn)
    .await?;
    // A wait for the row was a wait for another rebalance, which has shared
    // out room and let go of the shards it held: that room is taken first.
    // Rebalancing again would lock every shard until this transaction ends,
    // and send each add that meanwhile finds no shard free here in turn.
    if take_room(conn, workspace, wanted).await? {
        return Ok(Reservation::Granted);
    }
    // The shards this transaction can lock come from the lock itself (their
    // latest values); the others as last committed, room and all.
    let shards = sqlx::query_as!(
        Shard,
        r#"
        WITH held AS (
            SELECT shard, sources, bytes, sources_room, bytes_room FROM workspace_usage_shards
            WHERE workspace_id = $1 FOR UPDATE SKIP LOCKED
        )
        SELECT s.shard AS "shard!",
               coalesce(h.sources, s.sources) AS "sources!",
               coalesce(h.bytes, s.bytes) AS "bytes!",
               coalesce(h.sources_room, s.sources_room) AS "sources_room!",
               coalesce(h.bytes_room, s.bytes_room) AS "bytes_room!",
               h.shard IS NOT NULL AS "held!"
        FROM workspace_usage_shards s LEFT JOIN held h USING (shard)
        WHERE s.workspace_id = $1
        "#,
        workspace as WorkspaceId,
    )
    .fetch_all(&mut *conn)
    .await?;
    let own = sqlx::query_scalar!(r#"SELECT (pg_backend_pid() % $1::smallint)::smallint AS "own!""#, SHARDS)
        .fetch_one(&mut *conn)
        .await?;
    let plan = match plan((base.knowledge_sources, base.knowledge_bytes), &shards, own, wanted) {
        Ok(plan) => plan,
        Err(reservation) => return Ok(reservation),
    };
    sqlx::query!(
        "UPDATE workspace_usage SET knowledge_sources = $2, knowledge_bytes = $3 WHERE workspace_id = $1",
        workspace as WorkspaceId,
        plan.base_sources,
        plan.base_bytes,
    )
    .execute(&mut *conn)
    .await?;
    let column = |f: fn(&Shard) -> i64| plan.shards.iter().map(f).collect::<Vec<i64>>();
    sqlx::query!(
        r#"
        UPDATE workspace_usage_shards s SET
            sources = p.sources, bytes = p.bytes, sources_room = p.sources_room, bytes_room = p.bytes_room,
            room_limits = ARRAY[$7::bigint, $8::bigint]
        FROM unnest($2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
             AS p (shard, sources, bytes, sources_room, bytes_room)
        WHERE s.workspace_id = $1 AND s.shard = p.shard
        "#,
        workspace as WorkspaceId,
        &plan.shards.iter().map(|s| s.shard).collect::<Vec<i16>>(),
        &column(|s| s.sources),
        &column(|s| s.bytes),
        &column(|s| s.sources_room),
        &column(|s| s.bytes_room),
        wanted.sources_limit,
        wanted.bytes_limit,
    )
    .execute(&mut *conn)
    .await?;
    Ok(Reservation::Granted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(shard: i16, sources: i64, sources_room: i64, held: bool) -> Shard {
        Shard { shard, sources, bytes: sources * 100, sources_room, bytes_room: sources_room * 100, held }
    }

    fn wanted(sources: i64, sources_limit: i64) -> Wanted {
        Wanted { sources, bytes: sources * 100, sources_limit, bytes_limit: sources_limit * 100 }
    }

    /// Usage plus all room: what the limits must always bound.
    fn committed(plan: &Plan, untouched: &[Shard]) -> (i64, i64) {
        let all = plan.shards.iter().chain(untouched);
        (
            plan.base_sources + all.clone().map(|s| s.sources + s.sources_room).sum::<i64>(),
            plan.base_bytes + all.map(|s| s.bytes + s.bytes_room).sum::<i64>(),
        )
    }

    #[test]
    fn a_grant_folds_usage_and_shares_what_is_left() {
        let shards = [shard(0, 3, 0, true), shard(1, 2, 1, true), shard(2, 0, 0, true)];
        let plan = plan((10, 1000), &shards, 1, wanted(1, 20)).unwrap();
        assert_eq!((plan.base_sources, plan.base_bytes), (15, 1500));
        // 20 - 15 - 1 = 4 left: 1 each, the rest of the division from shard 1 on.
        let rooms: Vec<(i16, i64, i64)> = plan.shards.iter().map(|s| (s.shard, s.sources, s.sources_room)).collect();
        assert_eq!(rooms, vec![(0, 0, 1), (1, 1, 2), (2, 0, 1)]);
        assert_eq!(committed(&plan, &[]), (20, 2000));
    }

    #[test]
    fn room_held_by_other_writers_counts_as_used() {
        let busy = shard(1, 0, 4, false);
        let shards = [shard(0, 5, 0, true), busy];
        let plan = plan((0, 0), &shards, 0, wanted(1, 10)).unwrap();
        assert_eq!(committed(&plan, &[busy]), (10, 1000));
        // Only that room left: undecided, not refused, and not granted.
        let shards = [shard(0, 6, 0, true), shard(1, 0, 4, false)];
        assert_eq!(super::plan((0, 0), &shards, 0, wanted(1, 10)), Err(Reservation::Undecided));
    }

    #[test]
    fn usage_at_the_limit_is_refused_whoever_holds_the_shards() {
        let shards = [shard(0, 6, 0, true), shard(1, 4, 3, false)];
        assert_eq!(plan((0, 0), &shards, 0, wanted(1, 10)), Err(Reservation::Refused));
        assert_eq!(plan((10, 0), &[], 0, wanted(1, 10)), Err(Reservation::Refused));
        assert_eq!(plan((9, 0), &[shard(3, 0, 0, false)], 3, wanted(1, 10)), Err(Reservation::Undecided));
    }

    #[test]
    fn the_last_unit_of_room_is_granted() {
        let plan = plan((9, 900), &[shard(7, 0, 0, true)], 7, wanted(1, 10)).unwrap();
        assert_eq!(plan.shards, vec![shard(7, 1, 0, true)]);
        assert_eq!(committed(&plan, &[]), (10, 1000));
    }

    #[test]
    fn a_lowered_limit_takes_room_back_and_leaves_counters_not_grown_alone() {
        // Room granted under a limit of 100, the limit now 10 with 12 used.
        let shards = [shard(0, 12, 40, true), shard(1, 0, 40, true)];
        assert_eq!(plan((0, 0), &shards, 0, wanted(1, 10)), Err(Reservation::Refused));
        // A change that grows only bytes still goes through, with no source room.
        let grow_bytes = Wanted { sources: 0, bytes: 50, sources_limit: 10, bytes_limit: 10_000 };
        let plan = plan((0, 0), &shards, 1, grow_bytes).unwrap();
        assert!(plan.shards.iter().all(|s| s.sources_room == 0));
        assert_eq!(plan.base_sources, 12);
    }

    #[test]
    fn the_last_units_of_room_sit_on_as_many_shards() {
        // 9 units left on 16 shards: one each on 9 shards, from the one granted on.
        let shards: Vec<Shard> = (0..SHARDS).map(|i| shard(i, 0, 0, true)).collect();
        let plan = plan((190, 19_000), &shards, 12, wanted(1, 200)).unwrap();
        let rooms: Vec<i16> = plan.shards.iter().filter(|s| s.sources_room > 0).map(|s| s.shard).collect();
        assert_eq!(rooms, vec![0, 1, 2, 3, 4, 12, 13, 14, 15]);
        assert!(plan.shards.iter().all(|s| s.sources_room <= 1));
        assert_eq!(committed(&plan, &[]), (200, 20_000));
    }

    #[test]
    fn no_limit_shares_without_overflow() {
        let shards: Vec<Shard> = (0..SHARDS).map(|i| shard(i, 1, 0, true)).collect();
        let unlimited = Wanted { sources: 1, bytes: 100, sources_limit: i64::MAX, bytes_limit: i64::MAX };
        let plan = plan((i64::MAX / 2, 0), &shards, 3, unlimited).unwrap();
        assert!(plan.shards.iter().all(|s| s.sources_room > 0));
    }

    #[test]
    fn a_grant_needs_a_shard_to_hold() {
        assert_eq!(plan((0, 0), &[shard(0, 0, 0, false)], 0, wanted(1, 10)), Err(Reservation::Undecided));
    }
}
