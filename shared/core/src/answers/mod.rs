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

use std::collections::HashMap;
use std::time::Instant;

use futures_util::TryStreamExt;
use sqlx::{Connection, PgConnection, PgPool};
use svc_contract::resources::Language;

pub use llm::{Llm, LlmConfig};

use crate::error::Result;
use crate::ids::{AgentId, RevisionId, SourceId};
use crate::store::knowledge::{Found, Postings, Ranked, Vocabulary};
use crate::store::types::StoredLanguage;
use crate::store::{self};

/// Sources an answer draws on, at most (contract §12).
pub const MAX_SOURCES: usize = 5;

/// How ranking weighs what it finds (BM25F: BM25 over title and text, with title
/// occurrences counted `title_weight` times).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bm25 {
    pub k1: f64,
    pub b: f64,
    pub title_weight: f64,
}

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
    /// Nucleus sampling, when the speaker sets it.
    pub top_p: Option<f64>,
}

/// Words of a question ranking uses, at most: the rarest. Common words add
/// little to a score and the most postings to read, so a long question costs
/// no more than this many words.
pub const MAX_TERMS: usize = 32;

/// The best passages for `question`, best first, one per source: BM25F over
/// every passage of the Agent's active revisions holding one of its (at most
/// [`MAX_TERMS`] rarest) words, in each language the Agent's revisions were
/// indexed in.
///
/// Ranking reads postings, not passages: for each word, the passages of each
/// revision that hold it with its counts there and their lengths, streamed
/// from PostgreSQL and added up here, so what a question costs is the
/// postings of its words, held as one score per passage that has any.
pub async fn retrieve(conn: &mut PgConnection, agent: AgentId, question: &str) -> Result<Vec<Found>> {
    // One snapshot for every statement: a revision promoted or retired
    // meanwhile cannot shift the statistics or take a ranked passage away.
    let mut snapshot = conn.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await?;
    let found = retrieve_in(&mut snapshot, agent, question).await;
    snapshot.rollback().await?;
    found
}

async fn retrieve_in(conn: &mut PgConnection, agent: AgentId, question: &str) -> Result<Vec<Found>> {
    let mut best = Vec::new();
    for language in store::knowledge::languages(conn, agent).await? {
        let vocabulary = store::knowledge::vocabulary(conn, agent, language, question).await?;
        let ranked = rank(conn, agent, language, &vocabulary).await?;
        if ranked.is_empty() {
            continue;
        }
        let scores: HashMap<(RevisionId, i32), f64> =
            ranked.iter().map(|r| ((r.revision_id, r.ordinal), r.score)).collect();
        for found in store::knowledge::found(conn, language, question, &ranked).await? {
            if let Some(score) = scores.get(&(found.revision_id, found.ordinal)) {
                best.push((found, *score));
            }
        }
    }
    // Scores of different languages are of the same kind: merge, best first,
    // equal scores by source id (as within a language).
    best.sort_by(|a, b| ranking_order((a.1, a.0.source_id), (b.1, b.0.source_id)));
    best.truncate(MAX_SOURCES);
    Ok(best.into_iter().map(|(found, _)| found).collect())
}

/// The best passage of each of the best [`MAX_SOURCES`] sources, best first
/// (equal scores by source id), with its score, ranked by the first (rarest)
/// [`MAX_TERMS`] terms of `vocabulary`.
pub async fn rank(
    conn: &mut PgConnection,
    agent: AgentId,
    language: StoredLanguage,
    vocabulary: &Vocabulary,
) -> Result<Vec<Ranked>> {
    let terms = &vocabulary.terms[..vocabulary.terms.len().min(MAX_TERMS)];
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let idf: HashMap<&str, f64> =
        terms.iter().enumerate().map(|(i, (lexeme, _))| (lexeme.as_str(), vocabulary.idf(i))).collect();
    let lexemes: Vec<String> = terms.iter().map(|(lexeme, _)| lexeme.clone()).collect();
    let mut scores = Scores::default();
    let mut postings = store::knowledge::postings(conn, agent, language, &lexemes);
    while let Some(postings) = postings.try_next().await? {
        let idf = idf.get(postings.lexeme.as_str()).copied().unwrap_or(0.0);
        scores.add(&postings, idf, vocabulary.mean_length.max(1.0));
    }
    Ok(scores.best(MAX_SOURCES))
}

/// Best score first; scores equal to 9 decimal places by source id. (Postings
/// arrive in no set order, so the same sum can differ in its last bits.)
fn ranking_order(a: (f64, SourceId), b: (f64, SourceId)) -> std::cmp::Ordering {
    let rounded = |score: f64| (score * 1e9).round();
    rounded(b.0).total_cmp(&rounded(a.0)).then_with(|| a.1.cmp(&b.1))
}

/// Scores per passage, kept per revision as a vector indexed by ordinal.
#[derive(Default)]
struct Scores {
    revisions: HashMap<RevisionId, usize>,
    passages: Vec<(SourceId, RevisionId, Vec<f64>)>,
}

impl Scores {
    /// Adds one word's BM25F contribution to every passage of `postings`.
    fn add(&mut self, postings: &Postings, idf: f64, mean_length: f64) {
        let Bm25 { k1, b, title_weight } = WEIGHTS;
        let index = *self.revisions.entry(postings.revision_id).or_insert_with(|| {
            self.passages.push((postings.source_id, postings.revision_id, Vec::new()));
            self.passages.len() - 1
        });
        let scores = &mut self.passages[index].2;
        let held = postings.ordinals.iter().zip(&postings.counts).zip(&postings.title_counts).zip(&postings.lengths);
        for (((ordinal, count), title_count), length) in held {
            let Ok(ordinal) = usize::try_from(*ordinal) else { continue };
            if scores.len() <= ordinal {
                scores.resize(ordinal + 1, 0.0);
            }
            let tf = f64::from(*count) + (title_weight - 1.0) * f64::from(*title_count);
            let norm = k1 * (1.0 - b + b * f64::from(*length) / mean_length);
            scores[ordinal] += idf * tf * (k1 + 1.0) / (tf + norm);
        }
    }

    /// The best passage of each source, the best `limit` of them.
    fn best(self, limit: usize) -> Vec<Ranked> {
        let mut best: HashMap<SourceId, Ranked> = HashMap::new();
        for (source_id, revision_id, scores) in self.passages {
            // The first of equal scores: the earliest passage.
            let top = scores
                .iter()
                .enumerate()
                .filter(|(_, score)| **score > 0.0)
                .reduce(|a, b| if b.1 > a.1 { b } else { a });
            let Some((ordinal, score)) = top else { continue };
            let ranked = Ranked { source_id, revision_id, ordinal: ordinal as i32, score: *score };
            match best.get(&source_id) {
                Some(kept) if kept.score >= ranked.score => {}
                _ => {
                    best.insert(source_id, ranked);
                }
            }
        }
        let mut best: Vec<Ranked> = best.into_values().collect();
        best.sort_by(|a, b| ranking_order((a.score, a.source_id), (b.score, b.source_id)));
        best.truncate(limit);
        best
    }
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

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn postings(lexeme: &str, revision: RevisionId, source: SourceId, held: &[(i32, i16, i16, i32)]) -> Postings {
        Postings {
            lexeme: lexeme.to_owned(),
            revision_id: revision,
            source_id: source,
            ordinals: held.iter().map(|h| h.0).collect(),
            counts: held.iter().map(|h| h.1).collect(),
            title_counts: held.iter().map(|h| h.2).collect(),
            lengths: held.iter().map(|h| h.3).collect(),
        }
    }

    #[test]
    fn scores_add_up_per_passage_and_each_source_keeps_its_best() {
        let (a, b, c) = (SourceId(Uuid::from_u128(1)), SourceId(Uuid::from_u128(2)), SourceId(Uuid::from_u128(3)));
        let (ra, rb, rc) = (RevisionId::new(), RevisionId::new(), RevisionId::new());
        let mut scores = Scores::default();
        // Source a: passage 3 holds both words, passage 0 only one.
        scores.add(&postings("ship", ra, a, &[(0, 1, 0, 10), (3, 1, 0, 10)]), 1.0, 10.0);
        scores.add(&postings("free", ra, a, &[(3, 1, 0, 10)]), 1.0, 10.0);
        // Source b: one occurrence, in the title too (counted twice).
        scores.add(&postings("ship", rb, b, &[(7, 1, 1, 10)]), 1.0, 10.0);
        // Source c: the same score as b.
        scores.add(&postings("ship", rc, c, &[(1, 1, 1, 10)]), 1.0, 10.0);
        let best = scores.best(2);
        // tf 1, length at the mean: 2.2 / 2.2 = 1 per word; tf 2: 4.4 / 3.2.
        assert_eq!(best.len(), 2);
        assert_eq!((best[0].source_id, best[0].revision_id, best[0].ordinal), (a, ra, 3));
        assert!((best[0].score - 2.0).abs() < 1e-12);
        // b and c tie: the lower source id first, and the limit drops c.
        assert_eq!((best[1].source_id, best[1].ordinal), (b, 7));
        assert!((best[1].score - 4.4 / 3.2).abs() < 1e-12);
    }

    #[test]
    fn longer_passages_score_less_for_the_same_count() {
        let (source, revision) = (SourceId::new(), RevisionId::new());
        let mut scores = Scores::default();
        scores.add(&postings("ship", revision, source, &[(0, 1, 0, 40), (1, 1, 0, 5)]), 1.0, 10.0);
        assert_eq!(scores.best(1)[0].ordinal, 1);
    }
}
