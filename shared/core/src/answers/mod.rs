//! The answer engine: what Public Chat, the Widget and `widget.verify` answer.
//!
//! Retrieval is the Agent's index's (`svc_search::search`): the best passage
//! of each of the best sources (at most [`MAX_SOURCES`]). Then either an
//! OpenAI-compatible model answers from those passages (when `SVC_LLM_*` is
//! set), or an extractive answer quotes them, naming their titles. With
//! nothing found, a short "I don't know yet" in the Agent's language.

mod llm;
mod text;

use std::collections::HashMap;
use std::time::Instant;

use sqlx::{PgConnection, PgPool};
use svc_contract::resources::Language;

pub use llm::{Llm, LlmConfig};

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
    pub snippet: String,
}

/// The best passages for `question`, best first, one per source (at most
/// [`MAX_SOURCES`]), with what shows where each came from.
pub async fn retrieve(conn: &mut PgConnection, agent: AgentId, question: &str) -> Result<Vec<Found>> {
    let hits = svc_search::search(conn, agent, question, MAX_SOURCES).await?;
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
                snippet: hit.snippet,
            })
        })
        .collect())
}

/// Answers `question` for `speaker`: retrieval on a pooled connection that is
/// returned before a model is asked, so a slow model holds no connection.
pub async fn answer(pool: &PgPool, llm: Option<&Llm>, speaker: &Speaker, question: &str) -> Result<Answer> {
    let started = Instant::now();
    let found = {
        let mut conn = crate::runtime::connection(pool).await?;
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
