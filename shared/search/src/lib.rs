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
//! fresh document keeps its postings in `knowledge_terms` (a row per word)
//! and its passages' vectors in one row; merges gather documents into
//! immutable segments (`knowledge_segments`, a row per word of each in
//! `knowledge_segment_terms` holding every posting, encoded by [`postings`],
//! and one row of vectors, [`vectors`]); a retired document is masked
//! (`knowledge_masks`) until a merge drops it. A question is ranked by its
//! words (BM25F, [`rank`]) and, where the Agent's passages have vectors, by
//! its meaning too, the two fused by score ([`hybrid`]).

mod embed;
mod error;
mod hybrid;
mod language;
mod merge;
mod passages;
mod postings;
mod rank;
mod store;
mod vectors;

use std::collections::{HashMap, HashSet};

use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use svc_ids::{AgentId, RevisionId, SourceId};

pub use embed::{BATCH as EMBED_BATCH, Embedder, embed_due, embed_passages, passage_text};
pub use error::{Error, Result};
pub use language::Language;
pub use merge::{maintain, maintain_due};
pub use passages::{Passage, split, words};
pub use store::segments::Backlog;
pub use store::terms::{Embedded, Indexed, Passages};
pub use vectors::{Cache, CacheFigures};

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
}

/// A question embedded by the model its Agent answers with
/// ([`answering_model`]), and that model's cosine below which a passage is
/// not close in meaning to it (each model has its own scale): when no passage
/// reaches it, the question is searched by its words alone.
pub struct Asked {
    pub model: String,
    pub vector: svc_embed::Quantized,
    pub min_similarity: f32,
}

/// What a question is searched by besides its words: its meaning, and the
/// process's kept vectors.
pub struct Meaning<'a> {
    pub asked: &'a Asked,
    pub cache: &'a Cache,
}

/// The model an Agent answers with, if it has vectors yet. The caller
/// embeds the question with it before [`search`], holding no connection
/// while a remote model answers.
pub async fn answering_model(conn: &mut PgConnection, agent: AgentId) -> Result<Option<String>> {
    Ok(store::vectors::model_of(conn, agent).await?)
}

/// The best passage of each of the best `limit` sources for `question`, best
/// first, over every language the Agent's documents are in: by its words
/// (BM25F) and, with `meaning` and vectors of its model, by its meaning too,
/// fused by score. Without a vector side the order is BM25F's.
///
/// Every statement reads one snapshot: a revision promoted or retired
/// meanwhile cannot shift the statistics or take a ranked passage away.
pub async fn search(
    conn: &mut PgConnection,
    agent: AgentId,
    question: &str,
    meaning: Option<Meaning<'_>>,
    limit: usize,
) -> Result<Vec<Hit>> {
    let mut snapshot = conn.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await?;
    let found = match meaning {
        Some(meaning) => search_both(&mut snapshot, agent, question, meaning, limit).await,
        None => search_words(&mut snapshot, agent, question, limit).await,
    };
    snapshot.rollback().await?;
    found
}

/// By the question's words alone.
async fn search_words(conn: &mut PgConnection, agent: AgentId, question: &str, limit: usize) -> Result<Vec<Hit>> {
    let mut ranked = Vec::new();
    for language in store::terms::languages(conn, agent).await? {
        let vocabulary = store::terms::vocabulary(conn, agent, language, question).await?;
        ranked.extend(rank::rank(conn, agent, language, &vocabulary, limit).await?);
    }
    shown(conn, ranked, limit).await
}

/// By the question's words and its meaning, fused.
async fn search_both(
    conn: &mut PgConnection,
    agent: AgentId,
    question: &str,
    Meaning { asked, cache }: Meaning<'_>,
    limit: usize,
) -> Result<Vec<Hit>> {
    let Asked { model, vector, min_similarity: floor } = asked;
    let mut worded = Vec::new();
    for language in store::terms::languages(conn, agent).await? {
        let vocabulary = store::terms::vocabulary(conn, agent, language, question).await?;
        let lexical = rank::candidates(conn, agent, language, &vocabulary, hybrid::CANDIDATES).await?;
        worded.extend(lexical.passages.iter().map(|&(document, ordinal, score)| hybrid::Worded {
            document,
            ordinal,
            score,
            ceiling: lexical.ceiling,
        }));
    }
    let layout = store::vectors::layout(conn, agent).await?;
    let blocks = vectors::load(conn, cache, model, &layout).await?;
    let masked: HashSet<i64> = layout.masks.iter().copied().collect();
    let wanted: HashSet<(i64, i32)> = worded.iter().map(|w| (w.document, w.ordinal)).collect();
    let scanned = vectors::scan(&blocks, vector, &masked, &wanted, hybrid::CANDIDATES);
    let close = scanned.best.iter().any(|near| near.score >= *floor);
    let fused = if close {
        hybrid::fuse(&worded, &scanned)
    } else {
        // Nothing is close in meaning: the words alone decide, as BM25F ranks.
        worded.iter().map(|w| (w.document, w.ordinal, w.score)).collect()
    };
    let numbers: Vec<i64> = fused.iter().map(|f| f.0).collect::<HashSet<_>>().into_iter().collect();
    let sources: HashMap<i64, (RevisionId, SourceId)> = store::terms::documents(conn, &numbers)
        .await?
        .into_iter()
        .map(|(number, of)| (number, (of.revision, of.source)))
        .collect();
    shown(conn, rank::best(&fused, &sources, limit), limit).await
}

/// The ranked passages with their text, best first (equal scores by
/// source id), at most `limit`. Scores of different languages are of the
/// same kind: they merge.
async fn shown(conn: &mut PgConnection, ranked: Vec<rank::Ranked>, limit: usize) -> Result<Vec<Hit>> {
    let revisions: Vec<uuid::Uuid> = ranked.iter().map(|r| r.revision_id.0).collect();
    let ordinals: Vec<i32> = ranked.iter().map(|r| r.ordinal).collect();
    let mut shown: HashMap<(RevisionId, i32), store::terms::Shown> = store::terms::shown(conn, &revisions, &ordinals)
        .await?
        .into_iter()
        .map(|s| ((s.revision_id, s.ordinal), s))
        .collect();
    let mut hits: Vec<Hit> = ranked
        .into_iter()
        .filter_map(|r| {
            let passage = shown.remove(&(r.revision_id, r.ordinal))?;
            Some(Hit {
                source_id: r.source_id,
                revision_id: r.revision_id,
                ordinal: r.ordinal,
                score: r.score,
                heading: passage.heading,
                body: passage.body,
            })
        })
        .collect();
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
    pub use crate::vectors::Block;
}
