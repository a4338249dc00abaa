//! The merged index (migration 0017, `knowledge::merge`): what answers find
//! follows the active revisions exactly, however the index is split between
//! fresh documents, segments and masks, and however promotions and merges
//! interleave.

use std::collections::HashMap;

use serde_json::{Value, json};
use sqlx::PgPool;
use svc_core::ids::{AgentId, RevisionId};
use svc_core::knowledge::{Outcome, process};
use svc_search::testing::{decode, merge};

use crate::answers::{ENGLISH, assert_bm25f};
use crate::helpers::{PASSAGES_WITH_WORDS, Tenant};
use crate::knowledge::{add_input, processing};

fn digest(content: &str) -> String {
    svc_contract::digest::sha256_prefixed(content.as_bytes())
}

fn pending_of(source: &Value) -> RevisionId {
    RevisionId::parse(source["pendingRevision"]["id"].as_str().expect("a pending revision")).unwrap()
}

struct Index {
    t: Tenant,
    agent: AgentId,
}

impl Index {
    async fn new(pool: PgPool) -> Self {
        let t = Tenant::new(pool).await;
        let agent = AgentId::parse(&t.agent).unwrap();
        Self { t, agent }
    }

    fn pool(&self) -> &PgPool {
        &self.t.app.pool
    }

    /// Adds a source (titled `title`), returning it with its pending revision.
    async fn add(&self, key: &str, title: &str, content: &str) -> Value {
        let mut input = add_input(&self.t.agent, key, content);
        input["title"] = json!(title);
        self.t.ok("knowledge-sources/add", input).await["knowledgeSource"].clone()
    }

    async fn add_active(&self, key: &str, title: &str, content: &str) -> String {
        let source = self.add(key, title, content).await;
        assert_eq!(process(self.pool(), pending_of(&source), &processing("test")).await.unwrap(), Outcome::Promoted);
        source["id"].as_str().unwrap().to_owned()
    }

    async fn replace(&self, source: &str, revision: &str, content: &str) -> RevisionId {
        let input = json!({
            "agentId": self.t.agent, "sourceId": source, "title": "Replaced",
            "provenance": { "kind": "manual", "uri": "notes" },
            "revision": revision, "digest": digest(content), "content": content,
        });
        pending_of(&self.t.ok("knowledge-sources/replace", input).await["knowledgeSource"])
    }

    async fn delete(&self, source: &str) {
        let input =
            json!({ "agentId": self.t.agent, "sourceId": source, "tombstone": true, "prune": true, "confirm": source });
        self.t.ok("knowledge-sources/delete", input).await;
    }

    async fn merge(&self, purge: bool) -> merge::Merged {
        merge::merge(self.pool(), self.agent, purge).await.unwrap().expect("no other merge runs")
    }

    /// The sources found for `question`, best first.
    async fn found(&self, question: &str) -> Vec<String> {
        let found = svc_core::answers::retrieve(self.pool(), None, self.agent, question).await.unwrap();
        found.iter().map(|f| f.source_id.to_string()).collect()
    }

    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).bind(self.agent.0).fetch_one(self.pool()).await.unwrap()
    }

    /// Every document number of the Agent's segments, with the word: each
    /// posting must be in one segment only.
    async fn segment_postings(&self) -> Vec<(String, i64, i64, i32)> {
        let rows: Vec<(String, i64, i32, Vec<u8>)> = sqlx::query_as(
            "SELECT lexeme, segment_id, passages, postings FROM knowledge_segment_terms WHERE agent_id = $1",
        )
        .bind(self.agent.0)
        .fetch_all(self.pool())
        .await
        .unwrap();
        let mut out = Vec::new();
        for (lexeme, segment, passages, bytes) in rows {
            let mut n = 0;
            decode(&bytes, |p| {
                out.push((lexeme.clone(), segment, p.document, p.ordinal));
                n += 1;
            })
            .unwrap();
            assert_eq!(n, passages, "a segment's count of {lexeme} is its postings'");
        }
        out
    }

    /// Document frequencies and sizes, as the index keeps them (with no masks
    /// left), beside those of the active passages themselves.
    async fn assert_exact(&self) {
        assert_eq!(self.count("SELECT count(*) FROM knowledge_masks WHERE agent_id = $1").await, 0);
        // Passages keep their text only: their words are in the postings.
        let stored = "SELECT count(*) FROM knowledge_passages WHERE agent_id = $1 AND search <> ''";
        assert_eq!(self.count(stored).await, 0, "a passage stored its tsvector");
        let stored: Vec<(String, i64)> = sqlx::query_as(
            "SELECT lexeme, sum(passages)::bigint FROM (
                 SELECT lexeme, passages FROM knowledge_segment_terms WHERE agent_id = $1
                 UNION ALL SELECT lexeme, passages FROM knowledge_terms WHERE agent_id = $1) t
             GROUP BY lexeme ORDER BY lexeme",
        )
        .bind(self.agent.0)
        .fetch_all(self.pool())
        .await
        .unwrap();
        let actual: Vec<(String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT t.lexeme, count(*) FROM {PASSAGES_WITH_WORDS} p, unnest(p.search) AS t
             WHERE p.agent_id = $1 GROUP BY t.lexeme ORDER BY t.lexeme"
        )))
        .bind(self.agent.0)
        .fetch_all(self.pool())
        .await
        .unwrap();
        assert_eq!(stored, actual, "document frequencies");
        let sizes = |sql: String| async move {
            let row: (i64, i64) =
                sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.agent.0).fetch_one(self.pool()).await.unwrap();
            row
        };
        let kept = sizes(
            "SELECT coalesce(sum(passages), 0)::bigint, coalesce(sum(tokens), 0)::bigint FROM (
                 SELECT passages::bigint, tokens FROM knowledge_segments WHERE agent_id = $1
                 UNION ALL SELECT passages, tokens FROM knowledge_documents WHERE agent_id = $1 AND segment_id IS NULL) s"
                .to_owned(),
        )
        .await;
        let actual = sizes(format!(
            "SELECT count(*) FILTER (WHERE search <> ''), coalesce(sum(tokens), 0)::bigint
             FROM {PASSAGES_WITH_WORDS} p WHERE agent_id = $1"
        ))
        .await;
        assert_eq!(kept, actual, "passages and words");
        let active = self
            .count(
                "SELECT count(*) FROM knowledge_sources s JOIN knowledge_revisions r ON r.id = s.active_revision_id
                 WHERE s.agent_id = $1 AND s.deleted_at IS NULL",
            )
            .await;
        assert_eq!(self.count("SELECT count(*) FROM knowledge_documents WHERE agent_id = $1").await, active);
        let mut postings = self.segment_postings().await;
        let all = postings.len();
        postings.sort_by(|a, b| (&a.0, a.2, a.3).cmp(&(&b.0, b.2, b.3)));
        postings.dedup_by(|a, b| (&a.0, a.2, a.3) == (&b.0, b.2, b.3));
        assert_eq!(postings.len(), all, "no posting is in two segments");
    }
}

/// Ranking is BM25F over every active passage whether the postings are fresh,
/// merged, masked in a segment or in a fresh document, or purged.
#[sqlx::test(migrations = "../migrations")]
async fn ranking_stays_bm25f_through_merges_and_masks(pool: PgPool) {
    let s = Index::new(pool).await;
    let mut ids = HashMap::new();
    for (key, title, content) in &ENGLISH[..3] {
        ids.insert(key.to_string(), s.add_active(key, title, content).await);
    }
    assert_bm25f(s.pool(), s.agent).await;
    assert_eq!(s.merge(false).await, merge::Merged { fresh: 3, segments: 0, dropped: 0 });
    assert_eq!(s.count("SELECT count(*) FROM knowledge_terms WHERE agent_id = $1").await, 0, "all merged");
    assert_bm25f(s.pool(), s.agent).await;
    for (key, title, content) in &ENGLISH[3..] {
        ids.insert(key.to_string(), s.add_active(key, title, content).await);
    }
    assert_eq!(assert_bm25f(s.pool(), s.agent).await, (true, 13), "a segment and fresh documents");
    // The three fresh documents into a segment of their own: one segment as
    // large as they are waits for two more (merges gather four at a time).
    assert_eq!(s.merge(false).await, merge::Merged { fresh: 3, segments: 0, dropped: 0 });
    assert_eq!(assert_bm25f(s.pool(), s.agent).await, (true, 13), "two segments of three");
    for (key, title, content) in &ENGLISH[3..] {
        let key = format!("{key}-2");
        ids.insert(key.clone(), s.add_active(&key, title, content).await);
    }
    // Retired revisions in a segment (replaced, deleted) and a fresh one.
    let replaced = s.replace(&ids["shipping"], "r2", "We ship to Mars and the Moon only, by rocket.").await;
    assert_eq!(process(s.pool(), replaced, &processing("test")).await.unwrap(), Outcome::Promoted);
    s.delete(&ids["hours"]).await;
    s.delete(&ids["pricing-2"]).await;
    assert_eq!(s.count("SELECT count(*) FROM knowledge_masks WHERE agent_id = $1").await, 3);
    assert_bm25f(s.pool(), s.agent).await;
    // Fresh documents (one masked, dropped), and the first segment of three,
    // two thirds of it masked; the other, unmasked, waits.
    assert_eq!(s.merge(false).await, merge::Merged { fresh: 4, segments: 1, dropped: 3 });
    assert_eq!(s.count("SELECT count(*) FROM knowledge_segments WHERE agent_id = $1").await, 2);
    assert_eq!(s.count("SELECT count(*) FROM knowledge_masks WHERE agent_id = $1").await, 0);
    assert_bm25f(s.pool(), s.agent).await;
    s.assert_exact().await;
    // One masked document of the four in the newer segment: a quarter of it,
    // so it is rewritten without a purge (below a quarter it waits for one;
    // merge::tests::a_purge_stays_within_the_cap).
    s.delete(&ids["returns"]).await;
    assert_eq!(s.merge(false).await, merge::Merged { fresh: 0, segments: 1, dropped: 1 });
    assert_bm25f(s.pool(), s.agent).await;
    assert_eq!(s.merge(true).await, merge::Merged::default(), "no mask is left to purge");
    assert_bm25f(s.pool(), s.agent).await;
    s.assert_exact().await;
}

/// A replaced revision's words stop matching as soon as its replacement is
/// active, before and after the merge, and the replacement's match.
#[sqlx::test(migrations = "../migrations")]
async fn a_superseded_revision_stops_matching(pool: PgPool) {
    let s = Index::new(pool).await;
    let id = s.add_active("faq", "Questions", "Our zeppelin tours leave from the hangar at dawn.").await;
    s.add_active("other", "Other", "Gift cards never expire.").await;
    s.merge(false).await;
    assert_eq!(s.found("zeppelin").await, [id.as_str()]);
    let candidate = s.replace(&id, "r2", "Our balloon tours leave from the meadow at noon.").await;
    // The last good revision answers while its replacement waits.
    assert_eq!(s.found("zeppelin").await, [id.as_str()]);
    assert!(s.found("balloon").await.is_empty());
    assert_eq!(process(s.pool(), candidate, &processing("test")).await.unwrap(), Outcome::Promoted);
    assert!(s.found("zeppelin").await.is_empty(), "masked in its segment");
    assert_eq!(s.found("balloon").await, [id.as_str()]);
    s.merge(true).await;
    assert!(s.found("zeppelin").await.is_empty(), "merged away");
    assert_eq!(s.found("balloon").await, [id.as_str()]);
    assert_eq!(
        s.count("SELECT count(*) FROM knowledge_segment_terms WHERE agent_id = $1 AND lexeme = 'zeppelin'").await,
        0
    );
    s.assert_exact().await;
}

/// A deleted source stops matching at once, fresh or merged, and deleting the
/// Agent leaves nothing of its index.
#[sqlx::test(migrations = "../migrations")]
async fn a_deleted_source_stops_matching(pool: PgPool) {
    let s = Index::new(pool).await;
    let merged = s.add_active("merged", "Merged", "The aquarium feeds its octopus at four.").await;
    s.merge(false).await;
    let fresh = s.add_active("fresh", "Fresh", "The aquarium opens its octopus tank at noon.").await;
    let mut both = s.found("octopus aquarium").await;
    both.sort();
    let mut want = vec![merged.clone(), fresh.clone()];
    want.sort();
    assert_eq!(both, want);
    s.delete(&merged).await;
    assert_eq!(s.found("octopus aquarium").await, [fresh.as_str()], "the merged one is masked");
    s.delete(&fresh).await;
    assert!(s.found("octopus aquarium").await.is_empty(), "the fresh one is masked too");
    s.merge(true).await;
    assert!(s.found("octopus aquarium").await.is_empty());
    s.assert_exact().await;
    s.add_active("again", "Again", "Penguins parade at five.").await;
    s.t.ok("agents/delete", json!({ "agentId": s.t.agent, "confirm": true })).await;
    for table in
        ["knowledge_documents", "knowledge_segments", "knowledge_segment_terms", "knowledge_masks", "knowledge_terms"]
    {
        let left = s.count(&format!("SELECT count(*) FROM {table} WHERE agent_id = $1")).await;
        assert_eq!(left, 0, "{table}");
    }
}

/// A worker of this release may promote before migration 0025 has run (a
/// rolling update starts it beside the migration): its passages satisfy the
/// NOT NULL their tsvector column had until then.
#[sqlx::test(migrations = "../migrations")]
async fn promotions_work_on_the_schema_before_migration_0025(pool: PgPool) {
    sqlx::query("ALTER TABLE knowledge_passages ALTER COLUMN search SET NOT NULL").execute(&pool).await.unwrap();
    let s = Index::new(pool).await;
    let first = s.add_active("first", "First", "The aquarium feeds its octopus at four.").await;
    assert_eq!(s.found("octopus").await, [first.as_str()]);
    s.assert_exact().await;
}

/// A revision's job run twice, one after the other and side by side, and
/// merges run side by side, index it once.
#[sqlx::test(migrations = "../migrations")]
async fn a_revision_processed_twice_counts_once(pool: PgPool) {
    let s = Index::new(pool).await;
    let source = s.add("faq", "Questions", "Walruses nap on the pier.").await;
    let revision = pending_of(&source);
    let mut jobs = tokio::task::JoinSet::new();
    for i in 0..4 {
        let pool = s.pool().clone();
        jobs.spawn(async move { process(&pool, revision, &processing(&format!("w{i}"))).await.unwrap() });
    }
    let outcomes = jobs.join_all().await;
    assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Promoted).count(), 1, "{outcomes:?}");
    assert_eq!(process(s.pool(), revision, &processing("late")).await.unwrap(), Outcome::Skipped);
    let mut merges = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let (pool, agent) = (s.pool().clone(), s.agent);
        merges.spawn(async move { merge::merge(&pool, agent, false).await.unwrap() });
    }
    merges.join_all().await;
    s.merge(false).await;
    s.merge(true).await;
    assert_eq!(s.count("SELECT count(*) FROM knowledge_documents WHERE agent_id = $1").await, 1);
    assert_eq!(
        s.count("SELECT sum(passages)::bigint FROM knowledge_segment_terms WHERE agent_id = $1 AND lexeme = 'walrus'")
            .await,
        1
    );
    s.assert_exact().await;
}

/// Many sources promoted at once, with merges running among the promotions:
/// every document frequency and size is exact after, and ranking is BM25F.
#[sqlx::test(migrations = "../migrations")]
async fn document_frequencies_are_exact_after_concurrent_promotions(pool: PgPool) {
    let s = Index::new(pool).await;
    let mut revisions = Vec::new();
    for i in 0..48 {
        let (key, title, content) = ENGLISH[i % ENGLISH.len()];
        let content = format!("{content}\n\nVariant {i}: note number n{} of the {key} pages.", i % 7);
        revisions.push(pending_of(&s.add(&format!("{key}-{i}"), title, &content).await));
    }
    let pool = s.pool().clone();
    let agent = s.agent;
    let merging = tokio::spawn(async move {
        let mut runs = 0;
        for _ in 0..40 {
            if merge::merge(&pool, agent, runs % 3 == 2).await.unwrap().is_some() {
                runs += 1;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        runs
    });
    let mut workers = tokio::task::JoinSet::new();
    for (w, chunk) in revisions.chunks(6).enumerate() {
        let pool = s.pool().clone();
        let chunk = chunk.to_vec();
        workers.spawn(async move {
            let mut n = 0;
            for revision in chunk {
                let outcome = process(&pool, revision, &processing(&format!("w{w}"))).await.unwrap();
                n += usize::from(outcome == Outcome::Promoted);
            }
            n
        });
    }
    let promoted = workers.join_all().await;
    assert_eq!(promoted.iter().sum::<usize>(), 48);
    assert!(merging.await.unwrap() > 0);
    s.merge(false).await;
    s.assert_exact().await;
    assert_eq!(s.count("SELECT count(*) FROM knowledge_documents WHERE agent_id = $1 AND segment_id IS NULL").await, 0);
    assert!(!s.found("note pages variant").await.is_empty());
}

/// The promotion that leaves the Agent [`merge::FRESH_LIMIT`] fresh documents
/// merges them, from the backlog its own statement counted (its document
/// included), and a replacement's counts the mask it adds: neither waits for
/// another promotion or the sweep.
#[sqlx::test(migrations = "../migrations")]
async fn the_promotion_that_reaches_a_limit_merges(pool: PgPool) {
    let s = Index::new(pool).await;
    let limits = [format!("knowledge_sources={}", merge::FRESH_LIMIT + 10)];
    svc_core::admin::plan_set(s.pool(), &s.t.ws, "pro", &limits).await.unwrap();
    let fresh = "SELECT count(*) FROM knowledge_documents WHERE agent_id = $1 AND segment_id IS NULL";
    let masks = "SELECT count(*) FROM knowledge_masks WHERE agent_id = $1";
    let mut sources = Vec::new();
    for i in 1..merge::FRESH_LIMIT {
        sources.push(s.add_active(&format!("k{i}"), "Note", &format!("word{i} shared note")).await);
    }
    assert_eq!(s.count(fresh).await, merge::FRESH_LIMIT - 1);
    let last = s.add_active("last", "Note", "last shared note").await;
    assert_eq!(s.count(fresh).await, 0, "the promotion that reached the limit merged");
    s.assert_exact().await;

    // Masks: one short of the limit, then the replacement that reaches it.
    for source in sources.iter().take(merge::MASK_LIMIT as usize - 1) {
        s.delete(source).await;
    }
    assert_eq!(s.count(masks).await, merge::MASK_LIMIT - 1);
    let revision = s.replace(&last, "v2", "replaced shared note").await;
    assert_eq!(process(s.pool(), revision, &processing("test")).await.unwrap(), Outcome::Promoted);
    assert_eq!(s.count(masks).await, 0, "the replacement that reached the mask limit merged");
    s.assert_exact().await;
}
