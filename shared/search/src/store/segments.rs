//! The merged index (migration 0017): documents, masks and segments, as
//! promotion, retirement and the background merge (`crate::merge`) write
//! them. What ranking reads of them is in `terms`.

use sqlx::PgConnection;
use svc_ids::{AgentId, RevisionId};

use crate::Language;

/// The advisory lock one merge of an Agent's index holds at a time.
fn merge_key(agent: AgentId) -> i64 {
    svc_ids::lock_key(&[b"knowledge-merge", agent.0.as_bytes()])
}

/// Takes the Agent's merge lock for this transaction without waiting; `false`
/// when another merge holds it.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn try_lock_merge(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<bool> {
    sqlx::query_scalar!(r#"SELECT pg_try_advisory_xact_lock($1) AS "locked!""#, merge_key(agent)).fetch_one(conn).await
}

/// Takes the Agent's merge lock for this transaction, waiting for it.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn lock_merge(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock($1)", merge_key(agent)).execute(conn).await?;
    Ok(())
}

/// Masks a retired revision's document: from this transaction's commit on,
/// ranking skips its postings and leaves its sizes out, until a merge drops
/// both. (Once per revision: a revision is retired once.)
#[tracing::instrument(level = "debug", skip(conn))]
async fn mask(conn: &mut PgConnection, revision: RevisionId) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        INSERT INTO knowledge_masks (number, agent_id, language, passages, tokens)
        SELECT number, agent_id, language, passages, tokens FROM knowledge_documents WHERE revision_id = $1
        ON CONFLICT (number) DO NOTHING
        "#,
        revision as RevisionId,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Retires a revision's document: its passages are dropped, and its postings
/// masked until a merge drops them (writing no row another promotion or
/// retirement writes).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn retire(conn: &mut PgConnection, revision: RevisionId) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM knowledge_passages WHERE revision_id = $1", revision as RevisionId)
        .execute(&mut *conn)
        .await?;
    mask(conn, revision).await
}

/// Drops an Agent's whole index: its documents' passages and postings, its
/// segments and masks, under its merge lock (no merge runs beside it).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn drop_agent(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<()> {
    // Passages exist for the documents of the index only.
    sqlx::query!(
        "DELETE FROM knowledge_passages WHERE revision_id IN
           (SELECT revision_id FROM knowledge_documents WHERE agent_id = $1)",
        agent as AgentId,
    )
    .execute(&mut *conn)
    .await?;
    lock_merge(conn, agent).await?;
    sqlx::query!("DELETE FROM knowledge_terms WHERE agent_id = $1", agent as AgentId).execute(&mut *conn).await?;
    sqlx::query!("DELETE FROM knowledge_vector_models WHERE agent_id = $1", agent as AgentId)
        .execute(&mut *conn)
        .await?;
    // Their vectors go with the documents and segments (ON DELETE CASCADE).
    drop_index_of(conn, agent).await
}

/// Drops an Agent's documents, segments and masks. The caller holds the
/// Agent's merge lock.
async fn drop_index_of(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM knowledge_segment_terms WHERE agent_id = $1", agent as AgentId)
        .execute(&mut *conn)
        .await?;
    sqlx::query!("DELETE FROM knowledge_segments WHERE agent_id = $1", agent as AgentId).execute(&mut *conn).await?;
    sqlx::query!("DELETE FROM knowledge_masks WHERE agent_id = $1", agent as AgentId).execute(&mut *conn).await?;
    sqlx::query!("DELETE FROM knowledge_documents WHERE agent_id = $1", agent as AgentId).execute(&mut *conn).await?;
    Ok(())
}

/// What a merge of an Agent's index would take in (the index statement
/// counts the same, `search::index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backlog {
    /// Fresh documents.
    pub fresh: i64,
    /// Masks.
    pub masks: i64,
}

/// An Agent's fresh documents and masks: what a merge would take in.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn merge_backlog(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Backlog> {
    let row = sqlx::query!(
        r#"
        SELECT (SELECT count(*) FROM knowledge_documents WHERE agent_id = $1 AND segment_id IS NULL) AS "fresh!",
               (SELECT count(*) FROM knowledge_masks WHERE agent_id = $1) AS "masks!"
        "#,
        agent as AgentId,
    )
    .fetch_one(conn)
    .await?;
    Ok(Backlog { fresh: row.fresh, masks: row.masks })
}

/// Agents with at least `fresh` fresh documents or `masks` masks.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn agents_to_merge(
    conn: &mut PgConnection,
    fresh: i64,
    masks: i64,
    limit: i64,
) -> sqlx::Result<Vec<AgentId>> {
    sqlx::query_scalar!(
        r#"
        SELECT agent_id AS "agent_id!: AgentId" FROM (
            SELECT agent_id FROM knowledge_documents WHERE segment_id IS NULL
            GROUP BY agent_id HAVING count(*) >= $1
            UNION
            SELECT agent_id FROM knowledge_masks GROUP BY agent_id HAVING count(*) >= $2
        ) a
        LIMIT $3
        "#,
        fresh,
        masks,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// A document as a merge takes it in.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub number: i64,
    pub revision_id: RevisionId,
    pub language: Language,
    pub passages: i32,
    pub tokens: i64,
}

/// The oldest `limit` fresh documents of an Agent.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn fresh_documents(conn: &mut PgConnection, agent: AgentId, limit: i64) -> sqlx::Result<Vec<Document>> {
    sqlx::query_as!(
        Document,
        r#"
        SELECT number, revision_id AS "revision_id: RevisionId", language AS "language: Language",
               passages, tokens
        FROM knowledge_documents WHERE agent_id = $1 AND segment_id IS NULL
        ORDER BY number LIMIT $2
        "#,
        agent as AgentId,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// An Agent's masked documents, with the segment holding each (`None`: fresh).
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn masked_documents(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Vec<(i64, Option<i64>)>> {
    let rows = sqlx::query!(
        r#"
        SELECT m.number AS "number!", d.segment_id FROM knowledge_masks m LEFT JOIN knowledge_documents d USING (number)
        WHERE m.agent_id = $1
        "#,
        agent as AgentId,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.number, r.segment_id)).collect())
}

/// A segment by its size.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub id: i64,
    pub language: Language,
    pub documents: i32,
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn segments_of(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Vec<Segment>> {
    sqlx::query_as!(
        Segment,
        r#"
        SELECT id, language AS "language: Language", documents FROM knowledge_segments
        WHERE agent_id = $1 ORDER BY documents, id
        "#,
        agent as AgentId,
    )
    .fetch_all(conn)
    .await
}

/// A new, empty segment; its sizes are set by [`finish_segment`].
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn new_segment(conn: &mut PgConnection, agent: AgentId, language: Language) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO knowledge_segments (agent_id, language, documents, passages, tokens)
        VALUES ($1, $2, 0, 0, 0) RETURNING id
        "#,
        agent as AgentId,
        language as Language,
    )
    .fetch_one(conn)
    .await
}

/// Moves the documents of segments `from` into `into`, returning them.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn move_segments(conn: &mut PgConnection, from: &[i64], into: i64) -> sqlx::Result<Vec<Document>> {
    sqlx::query_as!(
        Document,
        r#"
        UPDATE knowledge_documents SET segment_id = $2 WHERE segment_id = ANY($1)
        RETURNING number, revision_id AS "revision_id: RevisionId", language AS "language: Language",
                  passages, tokens
        "#,
        from,
        into,
    )
    .fetch_all(conn)
    .await
}

/// Moves fresh documents into segment `into`.
#[tracing::instrument(level = "debug", skip(conn, numbers), fields(n = numbers.len()))]
pub async fn move_fresh(conn: &mut PgConnection, numbers: &[i64], into: i64) -> sqlx::Result<u64> {
    let moved = sqlx::query!(
        "UPDATE knowledge_documents SET segment_id = $2 WHERE number = ANY($1) AND segment_id IS NULL",
        numbers,
        into,
    )
    .execute(conn)
    .await?;
    Ok(moved.rows_affected())
}

/// A fresh document's postings of one word (its knowledge_terms row).
#[derive(Clone, Debug, PartialEq)]
pub struct FreshTerm {
    pub lexeme: String,
    pub revision_id: RevisionId,
    pub ordinals: Vec<i32>,
    pub counts: Vec<i16>,
    pub title_counts: Vec<i16>,
    pub lengths: Vec<i32>,
}

/// Deletes and returns the knowledge_terms rows of the Agent's `revisions` in
/// `language`, found by the primary key's (agent, language) range (the rows
/// have no index by revision, migration 0026).
#[tracing::instrument(level = "debug", skip(conn, revisions), fields(n = revisions.len()))]
pub async fn take_fresh_terms(
    conn: &mut PgConnection,
    agent: AgentId,
    language: Language,
    revisions: &[uuid::Uuid],
) -> sqlx::Result<Vec<FreshTerm>> {
    sqlx::query_as!(
        FreshTerm,
        r#"
        DELETE FROM knowledge_terms WHERE agent_id = $1 AND language = $2 AND revision_id = ANY($3)
        RETURNING lexeme, revision_id AS "revision_id: RevisionId", ordinals, counts, title_counts, lengths
        "#,
        agent as AgentId,
        language as Language,
        revisions,
    )
    .fetch_all(conn)
    .await
}

/// Deletes and returns the words of segments `from`, with their postings.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn take_segment_terms(conn: &mut PgConnection, from: &[i64]) -> sqlx::Result<Vec<(String, Vec<u8>)>> {
    let rows = sqlx::query!(
        "DELETE FROM knowledge_segment_terms WHERE segment_id = ANY($1) RETURNING lexeme, postings",
        from,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.lexeme, r.postings)).collect())
}

/// Writes a segment's words: `lexemes`, the passages holding each, and their
/// encoded postings (aligned).
#[tracing::instrument(level = "debug", skip(conn, lexemes, passages, postings), fields(n = lexemes.len()))]
pub async fn write_segment_terms(
    conn: &mut PgConnection,
    agent: AgentId,
    language: Language,
    segment: i64,
    lexemes: &[String],
    passages: &[i32],
    postings: &[Vec<u8>],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        INSERT INTO knowledge_segment_terms (agent_id, language, lexeme, segment_id, passages, postings)
        SELECT $1, $2, t.lexeme, $3, t.passages, t.postings
        FROM unnest($4::text[], $5::int[], $6::bytea[]) AS t(lexeme, passages, postings)
        "#,
        agent as AgentId,
        language as Language,
        segment,
        lexemes,
        passages,
        postings,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes documents dropped by a merge (retired, now out of every segment),
/// with their masks.
#[tracing::instrument(level = "debug", skip(conn, numbers), fields(n = numbers.len()))]
pub async fn drop_documents(conn: &mut PgConnection, numbers: &[i64]) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM knowledge_masks WHERE number = ANY($1)", numbers).execute(&mut *conn).await?;
    sqlx::query!("DELETE FROM knowledge_documents WHERE number = ANY($1)", numbers).execute(conn).await?;
    Ok(())
}

/// Sets a merged segment's sizes, or deletes it when it holds nothing.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn finish_segment(
    conn: &mut PgConnection,
    segment: i64,
    documents: i64,
    passages: i64,
    tokens: i64,
) -> sqlx::Result<()> {
    if documents == 0 {
        sqlx::query!("DELETE FROM knowledge_segments WHERE id = $1", segment).execute(conn).await?;
        return Ok(());
    }
    sqlx::query!(
        "UPDATE knowledge_segments SET documents = $2, passages = $3, tokens = $4 WHERE id = $1",
        segment,
        i32::try_from(documents).unwrap_or(i32::MAX),
        passages,
        tokens,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes segments merged into another.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn drop_segments(conn: &mut PgConnection, ids: &[i64]) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM knowledge_segments WHERE id = ANY($1)", ids).execute(conn).await?;
    Ok(())
}
