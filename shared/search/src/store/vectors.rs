//! The vector store's rows: a block of vectors per fresh document and per
//! segment, by model (`crate::vectors`), and the model each Agent answers with.

use sqlx::PgConnection;
use svc_ids::AgentId;

/// The model an Agent answers with, if it has one yet.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn model_of(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!("SELECT model FROM knowledge_vector_models WHERE agent_id = $1", agent as AgentId)
        .fetch_optional(conn)
        .await
}

/// What a question reads first: the Agent's segments, fresh documents and
/// masked documents, and the model it answers with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layout {
    pub model: Option<String>,
    pub segments: Vec<i64>,
    pub documents: Vec<i64>,
    pub masks: Vec<i64>,
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn layout(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Layout> {
    let rows = sqlx::query!(
        r#"
        SELECT 's' AS "kind!", id AS "key!", NULL::text AS model FROM knowledge_segments WHERE agent_id = $1
        UNION ALL
        SELECT 'd', number, NULL FROM knowledge_documents WHERE agent_id = $1 AND segment_id IS NULL
        UNION ALL
        SELECT 'm', number, NULL FROM knowledge_masks WHERE agent_id = $1
        UNION ALL
        SELECT 'v', 0, model FROM knowledge_vector_models WHERE agent_id = $1
        "#,
        agent as AgentId,
    )
    .fetch_all(conn)
    .await?;
    let mut layout = Layout::default();
    for row in rows {
        match row.kind.as_str() {
            "s" => layout.segments.push(row.key),
            "d" => layout.documents.push(row.key),
            "m" => layout.masks.push(row.key),
            _ => layout.model = row.model,
        }
    }
    Ok(layout)
}

/// The stored blocks of `model` of segments `segments` and fresh documents
/// `documents`: (is a segment, key, bytes).
#[tracing::instrument(level = "debug", skip(conn, segments, documents))]
pub async fn blocks(
    conn: &mut PgConnection,
    model: &str,
    segments: &[i64],
    documents: &[i64],
) -> sqlx::Result<Vec<(bool, i64, Vec<u8>)>> {
    let rows = sqlx::query!(
        r#"
        SELECT true AS "segment!", segment_id AS "key!", vectors AS "vectors!" FROM knowledge_segment_vectors
        WHERE segment_id = ANY($2) AND model = $1
        UNION ALL
        SELECT false, number, vectors FROM knowledge_document_vectors WHERE number = ANY($3) AND model = $1
        "#,
        model,
        segments,
        documents,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.segment, r.key, r.vectors)).collect())
}

/// A stored block: (is a segment, key, model, bytes).
pub type StoredBlock = (bool, i64, String, Vec<u8>);

/// Every stored block of segments `segments` and fresh documents
/// `documents`, of any model: (is a segment, key, model, bytes). What a merge
/// gathers.
#[tracing::instrument(level = "debug", skip(conn, segments, documents))]
pub async fn all_blocks(
    conn: &mut PgConnection,
    segments: &[i64],
    documents: &[i64],
) -> sqlx::Result<Vec<StoredBlock>> {
    let rows = sqlx::query!(
        r#"
        SELECT true AS "segment!", segment_id AS "key!", model AS "model!", vectors AS "vectors!"
        FROM knowledge_segment_vectors WHERE segment_id = ANY($1)
        UNION ALL
        SELECT false, number, model, vectors FROM knowledge_document_vectors WHERE number = ANY($2)
        "#,
        segments,
        documents,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.segment, r.key, r.model, r.vectors)).collect())
}

/// Writes a segment's block of `model`.
#[tracing::instrument(level = "debug", skip(conn, vectors), fields(bytes = vectors.len()))]
pub async fn write_segment(conn: &mut PgConnection, segment: i64, model: &str, vectors: &[u8]) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO knowledge_segment_vectors (segment_id, model, vectors) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        segment,
        model,
        vectors,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes a fresh document's block of `model`.
#[tracing::instrument(level = "debug", skip(conn, vectors), fields(bytes = vectors.len()))]
pub async fn write_document(conn: &mut PgConnection, number: i64, model: &str, vectors: &[u8]) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO knowledge_document_vectors (number, model, vectors) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        number,
        model,
        vectors,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Drops fresh documents' blocks (a merge carried them into its segment's).
#[tracing::instrument(level = "debug", skip(conn, documents), fields(n = documents.len()))]
pub async fn drop_documents(conn: &mut PgConnection, documents: &[i64]) -> sqlx::Result<()> {
    sqlx::query!("DELETE FROM knowledge_document_vectors WHERE number = ANY($1)", documents).execute(conn).await?;
    Ok(())
}

/// Agents that a worker of `model` embeds anew, at most `limit`: those with
/// documents that answer with another model (or none yet), and those with a
/// fresh document or a segment that has no block of `model` (a block is
/// complete or absent: `crate::merge`). Reads the fresh documents and the
/// segments, not every document.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn agents_to_embed(conn: &mut PgConnection, model: &str, limit: i64) -> sqlx::Result<Vec<AgentId>> {
    sqlx::query_scalar!(
        r#"
        SELECT agent_id AS "agent_id!: AgentId" FROM (SELECT DISTINCT agent_id FROM (
            SELECT d.agent_id FROM knowledge_documents d
            WHERE d.segment_id IS NULL AND NOT EXISTS (
                SELECT 1 FROM knowledge_document_vectors v WHERE v.number = d.number AND v.model = $1)
            UNION ALL
            SELECT s.agent_id FROM knowledge_segments s
            WHERE NOT EXISTS (SELECT 1 FROM knowledge_segment_vectors v WHERE v.segment_id = s.id AND v.model = $1)
            UNION ALL
            SELECT m.agent_id FROM knowledge_vector_models m WHERE m.model <> $1
              AND EXISTS (SELECT 1 FROM knowledge_documents d WHERE d.agent_id = m.agent_id)
        ) due) agents
        -- In no fixed order: Agents that fail every time (an endpoint that
        -- refuses one of their passages) cannot keep the others waiting.
        ORDER BY random()
        LIMIT $2
        "#,
        model,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// An Agent's document (by number), with the segment holding it (`None`:
/// fresh).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub number: i64,
    pub segment: Option<i64>,
}

#[tracing::instrument(level = "debug", skip(conn))]
pub async fn members(conn: &mut PgConnection, agent: AgentId) -> sqlx::Result<Vec<Member>> {
    sqlx::query_as!(
        Member,
        "SELECT number, segment_id AS segment FROM knowledge_documents WHERE agent_id = $1",
        agent as AgentId,
    )
    .fetch_all(conn)
    .await
}

/// A document's title and passages' text in ordinal order: what its vectors
/// are made of.
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentText {
    pub number: i64,
    pub title: Option<String>,
    pub headings: Vec<Option<String>>,
    pub bodies: Vec<String>,
}

/// The texts of an Agent's documents: all of them, or those of `numbers`.
#[tracing::instrument(level = "debug", skip(conn, numbers))]
pub async fn texts(
    conn: &mut PgConnection,
    agent: AgentId,
    numbers: Option<&[i64]>,
) -> sqlx::Result<Vec<DocumentText>> {
    sqlx::query_as!(
        DocumentText,
        r#"
        SELECT d.number, d.title,
               coalesce(array_agg(p.heading ORDER BY p.ordinal) FILTER (WHERE p.ordinal IS NOT NULL), '{}')
                   AS "headings!: Vec<Option<String>>",
               coalesce(array_agg(p.body ORDER BY p.ordinal) FILTER (WHERE p.ordinal IS NOT NULL), '{}') AS "bodies!"
        FROM knowledge_documents d LEFT JOIN knowledge_passages p ON p.revision_id = d.revision_id
        WHERE d.agent_id = $1 AND ($2::bigint[] IS NULL OR d.number = ANY($2))
        GROUP BY d.number
        "#,
        agent as AgentId,
        numbers,
    )
    .fetch_all(conn)
    .await
}

/// Sets the model an Agent answers with, and drops its blocks of any other.
#[tracing::instrument(level = "debug", skip(conn))]
pub async fn switch(conn: &mut PgConnection, agent: AgentId, model: &str) -> sqlx::Result<()> {
    sqlx::query!(
        r#"
        WITH chosen AS (
            INSERT INTO knowledge_vector_models (agent_id, model) VALUES ($1, $2)
            ON CONFLICT (agent_id) DO UPDATE SET model = EXCLUDED.model
        ), segments AS (
            DELETE FROM knowledge_segment_vectors v USING knowledge_segments s
            WHERE v.segment_id = s.id AND s.agent_id = $1 AND v.model <> $2
        )
        DELETE FROM knowledge_document_vectors v USING knowledge_documents d
        WHERE v.number = d.number AND d.agent_id = $1 AND v.model <> $2
        "#,
        agent as AgentId,
        model,
    )
    .execute(conn)
    .await?;
    Ok(())
}
