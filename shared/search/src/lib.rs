//! `svc-search`: the knowledge index of every Agent.
//!
//! The worker [`index`]es a revision's passages when it promotes it, and
//! [`retire`]s the one it replaces, in the promotion's transaction; deleting
//! an Agent [`drop_agent`]s its index; the answer engine [`search`]es it; the
//! worker and its sweep [`maintain`] it (merges). Nothing else knows how it is
//! stored: its tables are written and read here only.
//!
//! Storage (migrations 0004, 0017 onwards): each indexed revision is a
//! document of the Agent's index, its passages in `knowledge_passages`. A
//! fresh document keeps its postings in `knowledge_terms` (a row per word);
//! merges gather documents into immutable segments (`knowledge_segments`,
//! a row per word of each in `knowledge_segment_terms` holding every
//! posting, encoded by [`postings`]); a retired document is masked
//! (`knowledge_masks`) until a merge drops it. Ranking is BM25F ([`rank`]).

mod error;
mod language;
mod merge;
mod passages;
mod postings;
mod rank;
mod store;

use std::collections::HashMap;

use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use svc_ids::{AgentId, RevisionId, SourceId};

pub use error::{Error, Result};
pub use language::Language;
pub use merge::{maintain, maintain_due};
pub use passages::{Passage, split, words};
pub use store::segments::Backlog;
pub use store::terms::{Indexed, Passages};

/// The index's tables whose statistics the workers keep fresh (see
/// `svc_core::knowledge::statistics`): ranking and promotions plan over them.
pub const ANALYZED_TABLES: [&str; 6] = [
    "knowledge_passages",
    "knowledge_terms",
    "knowledge_documents",
    "knowledge_segments",
    "knowledge_segment_terms",
    "knowledge_masks",
];

/// The index's tables whose dead rows the workers vacuum: a merge deletes
/// the fresh postings it takes and rewrites segments, and each question's
/// look-up of a word walks the dead entries of every document merged since.
pub const VACUUMED_TABLES: [&str; 4] =
    ["knowledge_terms", "knowledge_documents", "knowledge_segments", "knowledge_segment_terms"];

/// Writes a revision's passages into the Agent's index as a fresh document,
/// on the promotion's transaction; returns what it wrote and the Agent's merge
/// backlog (for [`maintain`] after the commit).
pub async fn index(conn: &mut PgConnection, passages: &Passages<'_>) -> Result<Indexed> {
    Ok(store::terms::index(conn, passages).await?)
}

/// Retires a revision's document (replaced or deleted): its passages go at
/// once, its postings are skipped until a merge drops them.
pub async fn retire(conn: &mut PgConnection, revision: RevisionId) -> Result<()> {
    Ok(store::segments::retire(conn, revision).await?)
}

/// Drops an Agent's whole index (the Agent is being deleted).
pub async fn drop_agent(conn: &mut PgConnection, agent: AgentId) -> Result<()> {
    Ok(store::segments::drop_agent(conn, agent).await?)
}

/// A passage found for a question: the best of its source.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub source_id: SourceId,
    pub revision_id: RevisionId,
    pub ordinal: i32,
    pub score: f64,
    pub heading: Option<String>,
    pub body: String,
    /// The passage around the question's words.
    pub snippet: String,
}

/// The best passage of each of the best `limit` sources for `question`, best
/// first, over every language the Agent's documents are in.
///
/// Every statement reads one snapshot: a revision promoted or retired
/// meanwhile cannot shift the statistics or take a ranked passage away.
pub async fn search(conn: &mut PgConnection, agent: AgentId, question: &str, limit: usize) -> Result<Vec<Hit>> {
    let mut snapshot = conn.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await?;
    let found = search_in(&mut snapshot, agent, question, limit).await;
    snapshot.rollback().await?;
    found
}

async fn search_in(conn: &mut PgConnection, agent: AgentId, question: &str, limit: usize) -> Result<Vec<Hit>> {
    let mut hits = Vec::new();
    for language in store::terms::languages(conn, agent).await? {
        let vocabulary = store::terms::vocabulary(conn, agent, language, question).await?;
        let ranked = rank::rank(conn, agent, language, &vocabulary, limit).await?;
        if ranked.is_empty() {
            continue;
        }
        let revisions: Vec<uuid::Uuid> = ranked.iter().map(|r| r.revision_id.0).collect();
        let ordinals: Vec<i32> = ranked.iter().map(|r| r.ordinal).collect();
        let mut shown: HashMap<(RevisionId, i32), store::terms::Shown> =
            store::terms::shown(conn, language, question, &revisions, &ordinals)
                .await?
                .into_iter()
                .map(|s| ((s.revision_id, s.ordinal), s))
                .collect();
        for r in ranked {
            if let Some(passage) = shown.remove(&(r.revision_id, r.ordinal)) {
                hits.push(Hit {
                    source_id: r.source_id,
                    revision_id: r.revision_id,
                    ordinal: r.ordinal,
                    score: r.score,
                    heading: passage.heading,
                    body: passage.body,
                    snippet: passage.snippet,
                });
            }
        }
    }
    // Scores of different languages are of the same kind: merge, best first,
    // equal scores by source id (as within a language).
    hits.sort_by(|a, b| rank::ranking_order((a.score, a.source_id), (b.score, b.source_id)));
    hits.truncate(limit);
    Ok(hits)
}

/// A connection from the pool, its wait boxed (see `svc_core::runtime::connection`).
#[allow(clippy::disallowed_methods, reason = "the one place of this crate that awaits it, boxed")]
async fn connection(pool: &PgPool) -> std::result::Result<PoolConnection<Postgres>, sqlx::Error> {
    Box::pin(pool.acquire()).await
}

/// The index's parts, for tests and benchmarks of the index itself (never
/// compiled into a binary: the feature is only a dev-dependency's).
#[cfg(feature = "testing")]
pub mod testing {
    /// Merges, with their limits.
    pub mod merge {
        pub use crate::merge::{FRESH_LIMIT, MASK_LIMIT, Merged, merge};
    }
    pub use crate::postings::{Posting, decode};
    pub use crate::rank::{MAX_TERMS, Ranked, rank};
    pub use crate::store::terms::{Vocabulary, vocabulary};
}
