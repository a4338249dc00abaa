//! Where vectors come from, and embedding an Agent anew when its model is not
//! the one the workers now use.
//!
//! The index stores and searches vectors; it makes none. A worker embeds a
//! revision's passages ([`passage_text`]) before it indexes them, with its
//! [`Embedder`]; an API process embeds questions with whichever model each
//! Agent answers with ([`crate::answering_model`]). Each Agent answers with one model at a
//! time: when the workers' model changes, [`embed_due`] embeds each Agent's
//! documents with it beside the vectors that answer, then switches the Agent
//! over in one transaction and drops the old vectors. It also completes an
//! Agent some of whose documents have no vectors of the model (promoted by a
//! worker with vectors off, or merged during a change of model). A worker that dies
//! mid-way has written nothing; the next sweep starts again.

use std::collections::{HashMap, HashSet};

use sqlx::{Connection, PgPool};
use svc_embed::Quantized;
use svc_ids::AgentId;

use crate::error::{Error, Result};
use crate::store::segments as segments_store;
use crate::store::vectors::{self as store, DocumentText};
use crate::vectors::Block;

/// What makes passages' vectors: a worker's model.
pub trait Embedder: Sync {
    /// The model's name, stored with every vector it makes (its version
    /// included: another version is another model).
    fn model(&self) -> &str;

    /// The vectors of `texts`, in order, L2-normalised.
    fn embed(&self, texts: &[String]) -> impl Future<Output = std::result::Result<Vec<Vec<f32>>, String>> + Send;
}

/// The text a passage's vector is made of: its revision's title, its heading
/// and its body, a line each (the title names what the passage is about,
/// which its body often leaves unsaid).
pub fn passage_text(title: &str, heading: Option<&str>, body: &str) -> String {
    let mut text = String::with_capacity(title.len() + body.len() + 2);
    for part in [Some(title), heading, Some(body)].into_iter().flatten().filter(|p| !p.trim().is_empty()) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(part);
    }
    text
}

/// Texts embedded per call.
pub const BATCH: usize = 256;

/// Embeds the Agents whose answering model is not `embedder`'s (another, or
/// none yet) with it, at most `limit` of them; returns those switched over.
pub async fn embed_due<E: Embedder>(pool: &PgPool, embedder: &E, limit: i64) -> Result<usize> {
    let agents = {
        let mut conn = crate::connection(pool).await?;
        store::agents_to_embed(&mut conn, embedder.model(), limit).await?
    };
    let mut switched = 0;
    for agent in agents {
        match embed_agent(pool, embedder, agent).await {
            Ok(()) => switched += 1,
            Err(error) => tracing::warn!(%agent, %error, "could not embed an Agent's knowledge anew; next sweep"),
        }
    }
    Ok(switched)
}

/// Embeds one Agent's documents with `embedder` (outside any transaction: a
/// remote model may take its time), then, under the Agent's merge lock,
/// embeds the few promoted meanwhile, writes a block of the model for every
/// fresh document and segment that has none, and switches the Agent over.
async fn embed_agent<E: Embedder>(pool: &PgPool, embedder: &E, agent: AgentId) -> Result<()> {
    let model = embedder.model();
    let mut vectors = {
        let mut conn = crate::connection(pool).await?;
        embed_texts(embedder, store::texts(&mut conn, agent, None).await?).await?
    };
    let mut conn = crate::connection(pool).await?;
    let mut tx = conn.begin().await?;
    segments_store::lock_merge(&mut tx, agent).await?;
    // The documents as they stand now: a merge may have moved some into new
    // segments, a promotion added some. The layout is read first, so every
    // document it names is among the members read after it, and embedded.
    let layout = store::layout(&mut tx, agent).await?;
    let members = store::members(&mut tx, agent).await?;
    if members.is_empty() {
        // Deleted meanwhile (or emptied): nothing to answer with.
        tx.rollback().await?;
        return Ok(());
    }
    let late: Vec<i64> = members.iter().map(|m| m.number).filter(|n| !vectors.contains_key(n)).collect();
    if !late.is_empty() {
        let texts = store::texts(&mut tx, agent, Some(&late)).await?;
        vectors.extend(embed_texts(embedder, texts).await?);
    }
    let have: HashSet<(bool, i64)> = store::blocks(&mut tx, model, &layout.segments, &layout.documents)
        .await?
        .into_iter()
        .map(|(segment, key, _)| (segment, key))
        .collect();
    let empty: Vec<Quantized> = Vec::new();
    let of = |number: &i64| vectors.get(number).unwrap_or(&empty).as_slice();
    for number in &layout.documents {
        if !have.contains(&(false, *number)) {
            store::write_document(&mut tx, *number, model, &Block::single(of(number)).to_bytes()).await?;
        }
    }
    for segment in &layout.segments {
        if have.contains(&(true, *segment)) {
            continue;
        }
        let held: Vec<(i64, &[Quantized])> =
            members.iter().filter(|m| m.segment == Some(*segment)).map(|m| (m.number, of(&m.number))).collect();
        let dim = held.iter().find_map(|(_, v)| v.first()).map_or(0, |v| v.values.len());
        store::write_segment(&mut tx, *segment, model, &Block::of(dim, &held)?.to_bytes()).await?;
    }
    store::switch(&mut tx, agent, model).await?;
    tx.commit().await?;
    tracing::info!(%agent, model, documents = members.len(), "embedded an Agent's knowledge with the workers' model");
    Ok(())
}

/// The vectors of each document's passages, by document number.
async fn embed_texts<E: Embedder>(embedder: &E, texts: Vec<DocumentText>) -> Result<HashMap<i64, Vec<Quantized>>> {
    let mut vectors = HashMap::with_capacity(texts.len());
    for document in texts {
        let title = document.title.as_deref().unwrap_or_default();
        let passages: Vec<String> = document
            .headings
            .iter()
            .zip(&document.bodies)
            .map(|(heading, body)| passage_text(title, heading.as_deref(), body))
            .collect();
        vectors.insert(document.number, embed_passages(embedder, &passages).await?);
    }
    Ok(vectors)
}

/// The vectors of `passages`, quantised, a batch at a time.
pub async fn embed_passages<E: Embedder>(embedder: &E, passages: &[String]) -> Result<Vec<Quantized>> {
    let mut embedded = Vec::with_capacity(passages.len());
    for batch in passages.chunks(BATCH) {
        let made = embedder.embed(batch).await.map_err(Error::Embedding)?;
        if made.len() != batch.len() {
            return Err(Error::Embedding(format!("{} vectors for {} texts", made.len(), batch.len())));
        }
        embedded.extend(made.iter().map(|v| svc_embed::quantize(v)));
    }
    Ok(embedded)
}
