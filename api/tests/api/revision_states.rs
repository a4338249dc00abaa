//! The revision state machine lives in PostgreSQL (the trigger of migration
//! 0012): every pair of states is tried against it, and it must allow exactly
//! the moves of the state machine the contract describes.

use sqlx::PgPool;
use svc_core::store::types::StoredRevisionState::{self, *};

use crate::helpers::Tenant;
use crate::knowledge::add_input;

const ALL: [StoredRevisionState; 5] = [Pending, Processing, Active, Failed, Replaced];

/// The moves a revision may make (besides staying `processing` when another
/// worker takes it over): the diagram of `StoredRevisionState`.
const MOVES: [(StoredRevisionState, StoredRevisionState); 5] =
    [(Pending, Processing), (Pending, Failed), (Processing, Active), (Processing, Failed), (Active, Replaced)];

fn name(state: StoredRevisionState) -> &'static str {
    match state {
        Pending => "pending",
        Processing => "processing",
        Active => "active",
        Failed => "failed",
        Replaced => "replaced",
    }
}

/// A path of allowed moves from `pending` to `state`.
fn path_to(state: StoredRevisionState) -> &'static [StoredRevisionState] {
    match state {
        Pending => &[],
        Processing => &[Processing],
        Active => &[Processing, Active],
        Failed => &[Failed],
        Replaced => &[Processing, Active, Replaced],
    }
}

/// Moves the revision to `to` (keeping the row's other rules: a failed one has
/// an error code); `Err` with the refusal's constraint when refused.
async fn move_to(tx: &mut sqlx::PgConnection, to: StoredRevisionState) -> Result<(), Option<String>> {
    sqlx::query(
        "UPDATE knowledge_revisions SET state = $1::revision_state,
                error_code = CASE WHEN $1 = 'failed' THEN 'internal' END",
    )
    .bind(name(to))
    .execute(tx)
    .await
    .map(|_| ())
    .map_err(|error| error.as_database_error().and_then(|db| db.constraint()).map(str::to_owned))
}

#[sqlx::test(migrations = "../migrations")]
async fn the_database_allows_exactly_the_transitions_of_the_state_machine(pool: PgPool) {
    let s = Tenant::new(pool.clone()).await;
    s.ok("knowledge-sources/add", add_input(&s.agent, "faq", "Opening hours: nine to five.")).await;
    for from in ALL {
        for to in ALL.into_iter().filter(|to| *to != from) {
            let mut tx = pool.begin().await.unwrap();
            for step in path_to(from) {
                move_to(&mut tx, *step).await.unwrap_or_else(|e| panic!("reaching {from:?}: {e:?}"));
            }
            let moved = move_to(&mut tx, to).await;
            tx.rollback().await.unwrap();
            match moved {
                Ok(()) => assert!(MOVES.contains(&(from, to)), "the database let {from:?} become {to:?}"),
                Err(constraint) => {
                    assert!(!MOVES.contains(&(from, to)), "the database refused {from:?} -> {to:?} ({constraint:?})");
                    assert_eq!(constraint.as_deref(), Some("knowledge_revisions_transition"), "{from:?} -> {to:?}");
                }
            }
        }
    }
}
