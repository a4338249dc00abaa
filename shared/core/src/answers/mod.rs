//! The answer engine: what Public Chat, the Widget and `widget.verify` answer.
//!
//! Retrieval is BM25F over the passages of the Agent's active revisions, in the
//! language each was indexed in (so answers stay right after the Agent's
//! language changes): the title counts twice, document frequencies and lengths
//! are the Agent's own. The best passage of each of the best sources (at most
//! [`MAX_SOURCES`]) is kept. Then either an OpenAI-compatible model answers from
//! those passages (when `SVC_LLM_*` is set), or an extractive answer quotes
//! them, naming their titles. With nothing found, a short "I don't know yet" in
//! the Agent's language.

mod llm;
mod text;

use std::time::Instant;

use sqlx::{PgConnection, PgPool};
use svc_contract::resources::Language;

pub use llm::{Llm, LlmConfig};

use crate::error::Result;
use crate::ids::{AgentId, SourceId};
use crate::store::knowledge::{Bm25, Found, Vocabulary};
use crate::store::{self};

/// Sources an answer draws on, at most (contract §12).
pub const MAX_SOURCES: usize = 5;

/// BM25's usual constants, and a title counted twice. Not tuned to any
/// evaluation set.
pub const WEIGHTS: Bm25 = Bm25 { k1: 1.2, b: 0.75, title_weight: 2.0 };

/// What an answer drew on.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    pub id: SourceId,
    pub title: String,
    pub uri: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub text: String,
    /// Best first; empty when nothing matched.
    pub sources: Vec<Source>,
    /// Time spent finding the passages.
    pub retrieval: std::time::Duration,
}

/// The Agent an answer speaks for.
#[derive(Clone, Debug)]
pub struct Speaker {
    pub id: AgentId,
    pub language: Language,
    pub instructions: Option<String>,
    pub temperature: f64,
}

/// Passages the first ranking of a question may read, roughly: its rarest
/// words are taken while the passages holding them stay within this.
pub const FIRST_CANDIDATES: f64 = 2_000.0;

/// The best passages for `question`, best first, one per source.
///
/// Ranking reads only the passages holding the question's rarest words (its
/// essential terms), as MaxScore does: a passage holding none of them scores
/// at most the sum of the other terms' bounds (`idf × (k1 + 1)` each, whatever
/// their frequency), so once the `MAX_SOURCES`-th score found reaches that
/// sum, no passage left unread can enter the answer. The result is exactly
/// BM25F's over every passage, but a common word ("name", "use") no longer
/// makes ranking read half the Agent's passages.
pub async fn retrieve(conn: &mut PgConnection, agent: AgentId, question: &str) -> Result<Vec<Found>> {
    retrieve_reading(conn, agent, question, FIRST_CANDIDATES).await
}

/// [`retrieve`] with the first ranking reading about `first_candidates`
/// passages (the result is the same whatever it is; tests make it small).
pub async fn retrieve_reading(
    conn: &mut PgConnection,
    agent: AgentId,
    question: &str,
    first_candidates: f64,
) -> Result<Vec<Found>> {
    let mut best = Vec::new();
    for language in store::knowledge::languages(conn, agent).await? {
        let vocabulary = store::knowledge::vocabulary(conn, agent, language, question).await?;
        if vocabulary.terms.is_empty() {
            continue;
        }
        let mut essential = first_essential(&vocabulary, first_candidates);
        let ranked = loop {
            let limit = MAX_SOURCES as i64;
            let ranked = store::knowledge::rank(conn, agent, language, &vocabulary, essential, WEIGHTS, limit).await?;
            let needed = match ranked.get(MAX_SOURCES - 1) {
                Some(last) => essential_for(&vocabulary, last.score),
                // Too few sources yet: any passage with another term could join.
                None => essential + 1,
            };
            if needed <= essential || essential >= vocabulary.terms.len() {
                break ranked;
            }
            essential = needed.min(vocabulary.terms.len());
        };
        if ranked.is_empty() {
            continue;
        }
        let mut found = store::knowledge::found(conn, language, question, &ranked).await?;
        // In the order ranking gave.
        found.sort_by_key(|f| ranked.iter().position(|r| r.revision_id == f.revision_id && r.ordinal == f.ordinal));
        best.extend(found.into_iter().zip(ranked.iter().map(|r| r.score)));
    }
    // Scores of different languages are of the same kind: merge, best first.
    best.sort_by(|a, b| b.1.total_cmp(&a.1));
    best.truncate(MAX_SOURCES);
    Ok(best.into_iter().map(|(found, _)| found).collect())
}

/// The rarest terms whose passages stay within `budget` (one at least).
fn first_essential(vocabulary: &Vocabulary, budget: f64) -> usize {
    let mut read = 0.0;
    let within = vocabulary.terms.iter().take_while(|(_, df)| {
        read += df;
        read <= budget
    });
    within.count().max(1)
}

/// The fewest rarest terms such that a passage holding none of them scores at
/// most `threshold`: the other terms' bounds sum to no more than it.
fn essential_for(vocabulary: &Vocabulary, threshold: f64) -> usize {
    let bound = |i: usize| vocabulary.idf(i) * (WEIGHTS.k1 + 1.0);
    let mut rest: f64 = (0..vocabulary.terms.len()).map(bound).sum();
    let mut essential = 0;
    while essential < vocabulary.terms.len() && rest > threshold {
        rest -= bound(essential);
        essential += 1;
    }
    essential
}

/// Answers `question` for `speaker`: retrieval on a pooled connection that is
/// returned before a model is asked, so a slow model holds no connection.
pub async fn answer(pool: &PgPool, llm: Option<&Llm>, speaker: &Speaker, question: &str) -> Result<Answer> {
    let started = Instant::now();
    let found = {
        let mut conn = pool.acquire().await?;
        retrieve(&mut conn, speaker.id, question).await?
    };
    let retrieval = started.elapsed();
    let sources: Vec<Source> =
        found.iter().map(|f| Source { id: f.source_id, title: f.title.clone(), uri: f.uri.clone() }).collect();
    let text = match (found.is_empty(), llm) {
        (true, _) => text::dont_know(speaker.language).to_owned(),
        (false, Some(llm)) => llm.answer(speaker, question, &found).await?,
        (false, None) => text::extractive(speaker.language, &found),
    };
    Ok(Answer { text, sources, retrieval })
}
