//! The answer engine: what Public Chat, the Widget and `widget.verify` answer.
//!
//! Retrieval is the Agent's index's (`svc_search::search`): the best passage
//! of each of the best sources (at most [`MAX_SOURCES`]), by the question's
//! words and its meaning, fused. Then either an
//! OpenAI-compatible model answers from those passages (when `SVC_LLM_*` is
//! set), or an extractive answer quotes them, naming their titles. With
//! nothing found, a short "I don't know yet" in the Agent's language.

mod llm;
mod quote;
mod text;

use std::collections::HashMap;
use std::time::Instant;

use sqlx::PgPool;
use svc_contract::resources::Language;

pub use llm::Llm;

use crate::embeddings::Models;
use crate::error::Result;
use crate::ids::{AgentId, RevisionId, SourceId};
use crate::store::{self};

/// Sources an answer draws on, at most (contract §12).
pub const MAX_SOURCES: usize = 5;

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

/// A passage an answer draws on: its source's, with its revision's title
/// and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub source_id: SourceId,
    pub revision_id: RevisionId,
    pub ordinal: i32,
    pub title: String,
    pub uri: String,
    pub heading: Option<String>,
    pub body: String,
}

/// What a process searches questions by besides their words: its model, and
/// the Agents' vectors it keeps (bounded, `SVC_VECTOR_CACHE_MB`).
pub struct Meaning {
    pub models: Models,
    pub cache: svc_search::Cache,
}

impl Meaning {
    /// `models`, keeping up to `max_bytes` of vectors.
    pub fn new(models: Models, max_bytes: usize) -> Self {
        Self { models, cache: svc_search::Cache::new(max_bytes) }
    }
}

/// What answers a question: the pool it reads, the model that writes the
/// answer (else it is quoted) and what searches by meaning, when configured.
#[derive(Clone, Copy)]
pub struct Engine<'a> {
    pub pool: &'a PgPool,
    pub llm: Option<&'a Llm>,
    pub meaning: Option<&'a Meaning>,
}

/// The best passages for `question`, best first, one per source (at most
/// [`MAX_SOURCES`]), with what shows where each came from: by the question's
/// words and, with `meaning`, by its meaning too. The question is embedded
/// before the search takes its connection, so a remote model holds none.
pub async fn retrieve(pool: &PgPool, meaning: Option<&Meaning>, agent: AgentId, question: &str) -> Result<Vec<Found>> {
    let asked = match meaning {
        Some(meaning) => {
            let model = {
                let mut conn = crate::runtime::connection(pool).await?;
                svc_search::answering_model(&mut conn, agent).await?
            };
            match model {
                Some(model) => meaning.models.ask(model, question).await,
                None => None,
            }
        }
        None => None,
    };
    let mut conn = crate::runtime::connection(pool).await?;
    let conn = &mut *conn;
    let meaning = meaning.zip(asked.as_ref()).map(|(m, asked)| svc_search::Meaning { asked, cache: &m.cache });
    let hits = svc_search::search(conn, agent, question, meaning, MAX_SOURCES).await?;
    let revisions: Vec<RevisionId> = hits.iter().map(|h| h.revision_id).collect();
    let cited: HashMap<RevisionId, (String, String)> = store::knowledge::citations(conn, &revisions)
        .await?
        .into_iter()
        .map(|(revision, title, uri)| (revision, (title, uri)))
        .collect();
    Ok(hits
        .into_iter()
        .filter_map(|hit| {
            let (title, uri) = cited.get(&hit.revision_id)?.clone();
            Some(Found {
                source_id: hit.source_id,
                revision_id: hit.revision_id,
                ordinal: hit.ordinal,
                title,
                uri,
                heading: hit.heading,
                body: hit.body,
            })
        })
        .collect())
}

/// Answers `question` for `speaker`: retrieval on a pooled connection that is
/// returned before a model is asked, so a slow model holds no connection.
pub async fn answer(
    pool: &PgPool,
    llm: Option<&Llm>,
    meaning: Option<&Meaning>,
    speaker: &Speaker,
    question: &str,
) -> Result<Answer> {
    let started = Instant::now();
    let found = retrieve(pool, meaning, speaker.id, question).await?;
    let retrieval = started.elapsed();
    let sources: Vec<Source> =
        found.iter().map(|f| Source { id: f.source_id, title: f.title.clone(), uri: f.uri.clone() }).collect();
    let text = match (found.is_empty(), llm) {
        (true, _) => text::dont_know(speaker.language).to_owned(),
        (false, Some(llm)) => llm.answer(speaker, question, &found).await?,
        (false, None) => {
            let quotes = quotes(meaning, question, &found[..found.len().min(QUOTED)]).await;
            let quoted: Vec<(&str, String)> = found.iter().map(|f| f.title.as_str()).zip(quotes).collect();
            text::extractive(speaker.language, &quoted)
        }
    };
    Ok(Answer { text, sources, retrieval })
}

/// Passages quoted in an extractive answer, at most.
const QUOTED: usize = 2;

/// What an extractive answer quotes of each of `found`: its sentences that
/// answer `question` best ([`quote`]), scored by the question's words and,
/// when the process has the static model, by closeness in meaning (it embeds
/// the question and every sentence at once).
async fn quotes(meaning: Option<&Meaning>, question: &str, found: &[Found]) -> Vec<String> {
    let words = quote::content_words(question);
    let split: Vec<Vec<&str>> = found.iter().map(|f| quote::sentences(&f.body)).collect();
    let mut scores: Vec<Vec<f32>> =
        split.iter().map(|sentences| sentences.iter().map(|s| quote::overlap(&words, s) as f32).collect()).collect();
    if let Some(embeddings) = meaning.and_then(|m| m.models.local()) {
        let texts: Vec<String> =
            std::iter::once(question).chain(split.iter().flatten().copied()).map(str::to_owned).collect();
        if let Ok(vectors) = embeddings.vectors(&texts).await
            && let Some((asked, sentences)) = vectors.split_first()
        {
            let mut sentences = sentences.iter();
            for score in scores.iter_mut().flatten() {
                if let Some(sentence) = sentences.next() {
                    // Below one: a word in common counts for more than closeness.
                    *score += 0.9 * asked.iter().zip(sentence).map(|(a, b)| a * b).sum::<f32>();
                }
            }
        }
    }
    split.iter().zip(&scores).map(|(sentences, scores)| quote::quote(sentences, scores)).collect()
}
