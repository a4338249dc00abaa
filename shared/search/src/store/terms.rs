//! Passages and their term counts, written when a revision is promoted, and
//! what ranking reads of them.

use futures_util::stream::BoxStream;
use sqlx::PgConnection;
use svc_ids::{AgentId, RevisionId, SourceId};
use uuid::Uuid;

use super::segments::Backlog;
use crate::Language;

/// The passages of one revision, column by column.
pub struct Passages<'a> {
    pub revision: RevisionId,
    pub source: SourceId,
    pub agent: AgentId,
    pub language: Language,
    pub title: &'a str,
    pub headings: Vec<Option<String>>,
    pub bodies: Vec<String>,
    /// Words of each passage, title and heading included: its length for BM25.
    pub words: Vec<i32>,
    /// Each passage's vector (of [`crate::passage_text`]), and the model that
    /// made them; `None` when vectors are off.
    pub vectors: Option<Embedded<'a>>,
}

/// Passages' vectors and the model that made them.
pub struct Embedded<'a> {
    pub model: &'a str,
    pub vectors: Vec<svc_embed::Quantized>,
}

/// What [`index`] wrote, and the Agent's merge backlog beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indexed {
    /// Passages that have any indexable word.
    pub passages: i64,
    /// Word occurrences of those passages.
    pub tokens: i64,
    /// The Agent's merge backlog, this document among its fresh ones.
    pub backlog: Backlog,
}

/// Writes a revision's passages, indexed in its language (the revision's title
/// first, weighted `A` so ranking can tell title words apart, then heading and
/// body), and their term counts. Counts the Agent's merge backlog in the same
/// statement (what the merge after the promotion starts from, one round trip
/// fewer per promotion): the fresh documents, this one included, and masks,
/// as this statement's snapshot sees them. Writes the passages' vectors as the
/// document's block, and for an Agent with no document yet (a new one, or one
/// emptied), makes their model the one it answers with (an Agent that has some is embedded anew by the
/// sweep when its model is not the worker's: `crate::embed_due`).
#[tracing::instrument(level = "debug", skip(conn, passages), fields(revision = %passages.revision, n = passages.bodies.len()))]
pub async fn index(conn: &mut PgConnection, passages: &Passages<'_>) -> sqlx::Result<Indexed> {
    let config = passages.language.search_config();
    let model = passages.vectors.as_ref().map(|v| v.model);
    let block = passages.vectors.as_ref().map(|v| crate::vectors::Block::single(&v.vectors).to_bytes());
    // One statement: the passages, their term counts (read from each
    // passage's tsvector as it goes in; the tsvector is not stored, an empty
    // one stands in for it, migration 0025) and the revision as a fresh
    // document of the Agent's index (migration 0017: its knowledge_terms rows
    // are its postings until a merge takes them; their reference to the
    // revision is checked once, by the document's foreign key, migration
    // 0022). A passage written by an attempt that did not finish is gone with
    // its transaction: this runs in the promotion's.
    let indexed = sqlx::query!(
        r#"
        WITH input AS (
            SELECT ordinality::integer - 1 AS ordinal, heading, body, tokens,
                   setweight(to_tsvector($5::regconfig, $6), 'A')
                   || to_tsvector($5::regconfig, coalesce(heading || E'\n', '') || body) AS search
            FROM unnest($7::text[], $8::text[], $9::int[]) WITH ORDINALITY AS p(heading, body, tokens)
        ), passages AS (
            INSERT INTO knowledge_passages (revision_id, ordinal, agent_id, source_id, language, heading, body, search, tokens)
            SELECT $1, ordinal, $2, $3, $4, heading, body, '', tokens
            FROM input
        ), terms AS (
            INSERT INTO knowledge_terms (agent_id, language, lexeme, revision_id, passages,
                                         ordinals, counts, title_counts, lengths)
            SELECT $2, $4, t.lexeme, $1, count(*)::integer,
                   array_agg(p.ordinal ORDER BY p.ordinal),
                   array_agg(cardinality(t.positions)::smallint ORDER BY p.ordinal),
                   array_agg(cardinality(array_positions(t.weights, 'A'))::smallint ORDER BY p.ordinal),
                   array_agg(p.tokens ORDER BY p.ordinal)
            FROM input p, unnest(p.search) AS t
            GROUP BY t.lexeme
        ), sizes AS (
            SELECT count(*) FILTER (WHERE search <> ''::tsvector) AS passages,
                   coalesce(sum(tokens), 0)::bigint AS tokens
            FROM input
        ), document AS (
            INSERT INTO knowledge_documents (revision_id, source_id, agent_id, language, passages, tokens, title)
            SELECT $1, $3, $2, $4, least(passages, 2147483647)::integer, tokens, $6 FROM sizes
            RETURNING number
        ), vectors AS (
            INSERT INTO knowledge_document_vectors (number, model, vectors)
            SELECT number, $10, $11 FROM document WHERE $11::bytea IS NOT NULL
        ), first_model AS (
            INSERT INTO knowledge_vector_models (agent_id, model)
            SELECT $2, $10 WHERE $10::text IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM knowledge_documents WHERE agent_id = $2)
            ON CONFLICT (agent_id) DO UPDATE SET model = EXCLUDED.model
        )
        SELECT passages AS "passages!", tokens AS "tokens!",
               (SELECT count(*) FROM knowledge_documents WHERE agent_id = $2 AND segment_id IS NULL) + 1 AS "fresh!",
               (SELECT count(*) FROM knowledge_masks WHERE agent_id = $2) AS "masks!"
        FROM sizes
        "#,
        passages.revision as RevisionId,
        passages.agent as AgentId,
        passages.source as SourceId,
        passages.language as Language,
        config as &str,
        passages.title,
        &passages.headings as &[Option<String>],
        &passages.bodies,
        &passages.words,
        model,
        block.as_deref(),
    )
    .fetch_one(&mut *conn)
    .await?;
    let backlog = Backlog { fresh: indexed.fresh, masks: indexed.masks };
    Ok(Indexed { passages: indexed.passages, tokens: indexed.tokens, backlog })
}

/// The languages an Agent's indexed documents are in.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn languages(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Vec<Language>> {
    sqlx::query_scalar!(
        r#"
        SELECT language AS "language!: Language" FROM knowledge_segments WHERE agent_id = $1
        UNION
        SELECT language FROM knowledge_documents WHERE agent_id = $1 AND segment_id IS NULL
        "#,
        agent as AgentId,
    )
    .fetch_all(conn)
    .await
}

/// What ranking needs to know of a question's words in an Agent's passages of
/// one language: the passages there are, their mean length, each word of the
/// question that occurs (rarest first), and the documents masked.
#[derive(Clone, Debug, PartialEq)]
pub struct Vocabulary {
    /// Passages of the Agent's active revisions in the language.
    pub passages: f64,
    /// Their mean length in words.
    pub mean_length: f64,
    /// (lexeme, passages holding it), rarest first. The counts include the
    /// passages of masked documents (retired, not merged away yet): they
    /// order the words; ranking counts the exact frequencies from the postings.
    pub terms: Vec<(String, f64)>,
    /// Documents retired but still stored, ascending: their postings are skipped.
    pub masked: Vec<i64>,
    /// Their passages in the language: no word's count above is more than this
    /// over its exact frequency.
    pub masked_passages: f64,
}

impl Vocabulary {
    /// BM25's inverse document frequency of a word held by `df` passages.
    pub fn idf(&self, df: f64) -> f64 {
        (1.0 + (self.passages - df + 0.5) / (df + 0.5)).ln()
    }
}

/// The question's words as the Agent's passages in `language` hold them.
/// Every figure is read from a few rows per word, whatever the number of
/// sources: segments' sizes and words, fresh documents' and masks'.
#[tracing::instrument(level = "debug", skip(conn, question))]
pub async fn vocabulary(
    conn: &mut PgConnection,
    agent: AgentId,
    language: Language,
    question: &str,
) -> sqlx::Result<Vocabulary> {
    // One statement: the sizes ride along on every term's row (no row, no
    // term, and then they are not needed).
    let rows = sqlx::query!(
        r#"
        WITH sizes AS (
            SELECT coalesce(sum(s.passages), 0)::float8 AS passages, coalesce(sum(s.tokens), 0)::float8 AS tokens
            FROM (
                SELECT passages::bigint, tokens FROM knowledge_segments WHERE agent_id = $1 AND language = $2
                UNION ALL
                SELECT passages, tokens FROM knowledge_documents
                WHERE agent_id = $1 AND segment_id IS NULL AND language = $2
                UNION ALL
                SELECT -passages, -tokens FROM knowledge_masks WHERE agent_id = $1 AND language = $2
            ) s
        ), stats AS (
            SELECT passages, tokens / greatest(passages, 1) AS mean_length,
                   (SELECT coalesce(sum(passages), 0)::float8 FROM knowledge_masks
                    WHERE agent_id = $1 AND language = $2) AS masked
            FROM sizes
        )
        SELECT l.lexeme AS "lexeme!", f.df + g.df AS "df!", stats.passages AS "passages!",
               stats.mean_length AS "mean_length!", stats.masked AS "masked!"
        FROM (SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(to_tsvector($3::regconfig, $4))) AS l(lexeme)) l
        CROSS JOIN stats
        CROSS JOIN LATERAL (
            SELECT coalesce(sum(s.passages), 0)::float8 AS df FROM knowledge_segment_terms s
            WHERE s.agent_id = $1 AND s.language = $2 AND s.lexeme = l.lexeme
        ) f
        CROSS JOIN LATERAL (
            SELECT coalesce(sum(k.passages), 0)::float8 AS df FROM knowledge_terms k
            WHERE k.agent_id = $1 AND k.language = $2 AND k.lexeme = l.lexeme
        ) g
        WHERE f.df + g.df > 0
        ORDER BY f.df + g.df, l.lexeme COLLATE "C"
        "#,
        agent as AgentId,
        language as Language,
        language.search_config() as &str,
        question,
    )
    .fetch_all(&mut *conn)
    .await?;
    let masked = if rows.is_empty() {
        Vec::new()
    } else {
        sqlx::query_scalar!("SELECT number FROM knowledge_masks WHERE agent_id = $1 ORDER BY number", agent as AgentId)
            .fetch_all(conn)
            .await?
    };
    let (passages, mean_length, masked_passages) =
        rows.first().map_or((0.0, 0.0, 0.0), |r| (r.passages, r.mean_length, r.masked));
    let terms = rows.into_iter().map(|r| (r.lexeme, r.df)).collect();
    Ok(Vocabulary { passages, mean_length, terms, masked, masked_passages })
}

/// The postings of `lexemes` in the Agent's segments of `language`: one row
/// per word and segment, (lexeme, encoded postings; see
/// `knowledge::postings`). One index lookup per word on the whole key prefix
/// (`OFFSET 0` keeps the subquery per word): with `lexeme = ANY($3)`, or a
/// plain join, and no statistics PostgreSQL 15 estimates one row for the
/// Agent and language, and scans every word of them.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn segment_postings(
    conn: &mut PgConnection,
    agent: AgentId,
    language: Language,
    lexemes: &[String],
) -> sqlx::Result<Vec<(String, Vec<u8>)>> {
    let rows = sqlx::query!(
        r#"
        SELECT s.lexeme, s.postings
        FROM unnest($3::text[]) AS l(lexeme)
        CROSS JOIN LATERAL (
            SELECT lexeme, postings FROM knowledge_segment_terms
            WHERE agent_id = $1 AND language = $2 AND lexeme = l.lexeme
            OFFSET 0
        ) s
        "#,
        agent as AgentId,
        language as Language,
        lexemes,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.lexeme, r.postings)).collect())
}

/// The postings of one lexeme in one fresh document: the passages holding it
/// (by ordinal, ascending), with its occurrences in each, those in the
/// revision's title, and each passage's length in words.
#[derive(Clone, Debug, PartialEq)]
pub struct Postings {
    pub lexeme: String,
    pub document: i64,
    pub ordinals: Vec<i32>,
    pub counts: Vec<i16>,
    pub title_counts: Vec<i16>,
    pub lengths: Vec<i32>,
}

/// The postings of `lexemes` in the Agent's fresh documents of `language`,
/// one row per lexeme and document (a merge keeps them under a few hundred).
pub fn postings<'a>(
    conn: &'a mut PgConnection,
    agent: AgentId,
    language: Language,
    lexemes: &'a [String],
) -> BoxStream<'a, sqlx::Result<Postings>> {
    sqlx::query_as!(
        Postings,
        r#"
        SELECT k.lexeme AS "lexeme!", k.number AS "document!", k.ordinals AS "ordinals!", k.counts AS "counts!",
               k.title_counts AS "title_counts!", k.lengths AS "lengths!"
        FROM unnest($3::text[]) AS l(lexeme)
        CROSS JOIN LATERAL (
            SELECT k.lexeme, d.number, k.ordinals, k.counts, k.title_counts, k.lengths
            FROM knowledge_terms k JOIN knowledge_documents d ON d.revision_id = k.revision_id
            WHERE k.agent_id = $1 AND k.language = $2 AND k.lexeme = l.lexeme
            OFFSET 0
        ) k
        "#,
        agent as AgentId,
        language as Language,
        lexemes,
    )
    .fetch(conn)
}

/// A document's revision, source and language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Of {
    pub revision: RevisionId,
    pub source: SourceId,
    pub language: Language,
}

/// The revisions, sources and languages of documents, by number.
#[tracing::instrument(level = "debug", skip(conn, numbers), fields(n = numbers.len()))]
pub async fn documents(conn: &mut PgConnection, numbers: &[i64]) -> sqlx::Result<Vec<(i64, Of)>> {
    let rows = sqlx::query!(
        r#"
        SELECT number, revision_id AS "revision_id: RevisionId", source_id AS "source_id: SourceId",
               language AS "language: Language"
        FROM knowledge_documents WHERE number = ANY($1)
        "#,
        numbers,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.number, Of { revision: r.revision_id, source: r.source_id, language: r.language }))
        .collect())
}

/// A ranked passage's text.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub revision_id: RevisionId,
    pub ordinal: i32,
    pub heading: Option<String>,
    pub body: String,
}

/// The text of passages (`revisions` and `ordinals` aligned).
#[tracing::instrument(level = "debug", skip(conn, revisions, ordinals), fields(n = ordinals.len()))]
pub async fn shown(conn: &mut PgConnection, revisions: &[Uuid], ordinals: &[i32]) -> sqlx::Result<Vec<Shown>> {
    sqlx::query_as!(
        Shown,
        r#"
        SELECT p.revision_id AS "revision_id: RevisionId", p.ordinal, p.heading, p.body
        FROM unnest($1::uuid[], $2::int[]) AS w(revision_id, ordinal)
        JOIN knowledge_passages p ON p.revision_id = w.revision_id AND p.ordinal = w.ordinal
        "#,
        revisions,
        ordinals,
    )
    .fetch_all(conn)
    .await
}
