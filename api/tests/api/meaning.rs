//! Retrieval by meaning beside BM25F (`svc_search` vectors, the static model
//! that ships with the service): a question in other words than its answer's
//! is answered on every surface; vectors follow the index's life (replace,
//! delete, merges); Agents never see each other's; and a change of model
//! embeds every Agent anew in the background, answers working throughout.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use http::Request;
use serde_json::{Value, json};
use sqlx::PgPool;
use svc_api::config::ServeConfig;
use svc_core::answers::{Found, Meaning};
use svc_core::embeddings::{Embeddings, EmbeddingsArgs, Models, Switch};
use svc_core::ids::{AgentId, RevisionId};
use svc_core::knowledge::{Outcome, Processing, process};
use svc_core::openai::EndpointConfig;
use svc_search::testing::{Block, merge};
use svc_tests::llm;

use crate::helpers::{Tenant, assert_ok, config};
use crate::knowledge::{add_input, processing};

/// A help centre's passages.
const SHOP: &[(&str, &str, &str)] = &[
    ("returns", "Returns", "Refunds: you can return any item within 30 days of delivery for a full refund."),
    (
        "shipping",
        "Shipping",
        "Orders placed before 2 pm Eastern ship the same day. Standard shipping takes 3 to 5 business days. Express \
         shipping takes 1 to 2 business days from the moment they leave.",
    ),
    ("hours", "Support hours", "Our support desk answers e-mail from 9:00 to 18:00, Monday to Friday."),
    (
        "password",
        "Passwords",
        "Choose Reset password on the sign-in page and we e-mail you a link that works for an hour.",
    ),
];

/// Shares no content word with the returns passage (nor with any other).
const IN_OTHER_WORDS: &str = "Can I send back something I bought?";
const THE_ANSWER: &str = "Refunds: you can return any item within 30 days of delivery for a full refund.";
const ORIGIN: &str = "https://shop.example";

/// The static model, loaded once for the whole test binary.
fn model() -> Arc<Embeddings> {
    static MODEL: OnceLock<Arc<Embeddings>> = OnceLock::new();
    MODEL.get_or_init(|| Arc::new(Embeddings::load(&svc_tests::model_dir()).expect("scripts/fetch-model"))).clone()
}

fn with_meaning() -> ServeConfig {
    ServeConfig {
        embeddings: EmbeddingsArgs {
            switch: Switch::On,
            embeddings_model_dir: svc_tests::model_dir(),
            ..Default::default()
        },
        ..config()
    }
}

fn embedding(embeddings: Arc<Embeddings>) -> Processing {
    Processing { embeddings: Some(embeddings), ..processing("meaning") }
}

fn meaning(models: Vec<Arc<Embeddings>>) -> Meaning {
    Meaning::new(Models(models), 64 << 20)
}

fn pending_of(source: &Value) -> RevisionId {
    RevisionId::parse(source["pendingRevision"]["id"].as_str().expect("a pending revision")).unwrap()
}

/// Adds `SHOP` to `agent` and processes it with `processing`; returns the
/// sources' ids by key.
async fn knowledge(t: &Tenant, agent: &str, processing: &Processing) -> Vec<(String, String)> {
    let mut ids = Vec::new();
    for (key, title, content) in SHOP {
        let mut input = add_input(agent, key, content);
        input["title"] = json!(title);
        let source = t.ok("knowledge-sources/add", input).await["knowledgeSource"].clone();
        assert_eq!(process(&t.app.pool, pending_of(&source), processing).await.unwrap(), Outcome::Promoted);
        ids.push((key.to_string(), source["id"].as_str().unwrap().to_owned()));
    }
    ids
}

async fn found(pool: &PgPool, meaning: Option<&Meaning>, agent: &str, question: &str) -> Vec<Found> {
    svc_core::answers::retrieve(pool, meaning, AgentId::parse(agent).unwrap(), question).await.unwrap()
}

fn id_of<'a>(ids: &'a [(String, String)], key: &str) -> &'a str {
    &ids.iter().find(|(k, _)| k == key).expect("a source of that key").1
}

#[sqlx::test(migrations = "../migrations")]
async fn a_question_in_other_words_is_answered_over_http_mcp_and_the_widget(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    let ids = knowledge(&t, &t.agent, &embedding(model())).await;
    // By its words alone, the question finds nothing: what follows is meaning's.
    assert!(found(&t.app.pool, None, &t.agent, IN_OTHER_WORDS).await.is_empty());
    t.ok("public-chats/enable", json!({ "agentId": t.agent })).await;
    t.ok("widgets/configure", json!({ "agentId": t.agent, "configuration": { "allowedOrigins": [ORIGIN] } })).await;
    let quoted = format!("From “Returns”: {THE_ANSWER}");

    // Through the Widget (Public Chat's answers endpoint).
    let request = Request::builder()
        .method("POST")
        .uri(format!("/api/public/chat/{}/answers", t.agent))
        .header("origin", ORIGIN)
        .header("content-type", "application/json")
        .body(Body::from(json!({ "question": IN_OTHER_WORDS }).to_string()))
        .unwrap();
    let response = t.app.send(request).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["sources"][0]["sourceId"], id_of(&ids, "returns"), "{body}");
    assert!(body["answer"].as_str().unwrap().starts_with(&quoted), "{body}");

    // widget.verify over HTTP, then over MCP.
    let input = json!({ "agentId": t.agent, "origin": ORIGIN, "question": IN_OTHER_WORDS });
    let verified = t.ok("widgets/verify", input.clone()).await;
    assert!(verified["answer"].as_str().unwrap().starts_with(&quoted), "{verified}");
    let mcp = t.app.tool(&t.owner.token, Some(&t.ws), "svc_widget_verify", input).await;
    let answer = &mcp.json()["result"]["structuredContent"]["data"]["answer"];
    assert!(answer.as_str().is_some_and(|a| a.starts_with(&quoted)), "{}", mcp.text());

    // A question about nothing the Agent knows is still "I don't know yet":
    // nothing is close enough in meaning.
    let verified = t
        .ok("widgets/verify", json!({ "agentId": t.agent, "origin": ORIGIN, "question": "quantum chromodynamics" }))
        .await;
    assert!(verified["answer"].as_str().unwrap().starts_with("I don't know yet"), "{verified}");
    // The vectors read are kept, and the metrics say how much.
    assert!(t.app.metric("svc_vector_cache_bytes").await > 0.0);
    assert_eq!(t.app.metric("svc_vector_cache_max_bytes").await, (256u64 << 20) as f64);
}

#[sqlx::test(migrations = "../migrations")]
async fn words_still_count_beside_meaning(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    let ids = knowledge(&t, &t.agent, &embedding(model())).await;
    let meaning = meaning(vec![model()]);
    // A question in the answer's own words ranks it first, as by words alone.
    for (question, key) in [("express shipping business days", "shipping"), ("reset password link", "password")] {
        let by_words = found(&t.app.pool, None, &t.agent, question).await;
        let by_both = found(&t.app.pool, Some(&meaning), &t.agent, question).await;
        assert_eq!(by_words[0].source_id.to_string(), id_of(&ids, key));
        assert_eq!(by_both[0].source_id.to_string(), id_of(&ids, key), "{question}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn two_agents_with_the_same_text_get_only_their_own_sources(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    let second = t.app.agent(&t.owner, &t.ws, "Second").await;
    let (other_owner, other_ws) = t.app.owner("bob").await;
    let elsewhere = t.app.agent(&other_owner, &other_ws, "Elsewhere").await;
    let processing = embedding(model());
    let mut own: Vec<(String, HashSet<String>)> = Vec::new();
    for agent in [&t.agent, &second] {
        let ids = knowledge(&t, agent, &processing).await;
        own.push((agent.clone(), ids.into_iter().map(|(_, id)| id).collect()));
    }
    let other = Tenant { app: t.app.clone(), owner: other_owner, ws: other_ws, agent: elsewhere.clone() };
    let ids = knowledge(&other, &elsewhere, &processing).await;
    own.push((elsewhere, ids.into_iter().map(|(_, id)| id).collect()));
    let meaning = meaning(vec![model()]);
    for (agent, sources) in &own {
        for question in [IN_OTHER_WORDS, "When can I reach support?", "shipping"] {
            let found = found(&t.app.pool, Some(&meaning), agent, question).await;
            assert!(!found.is_empty(), "{question}");
            for f in found {
                assert!(sources.contains(&f.source_id.to_string()), "{agent} was answered from another Agent's source");
            }
        }
    }
}

/// The document numbers every stored block of the Agent holds, of any model.
async fn blocks(pool: &PgPool, agent: &str) -> Vec<i64> {
    let rows: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT v.vectors FROM knowledge_segment_vectors v JOIN knowledge_segments s ON s.id = v.segment_id
         WHERE s.agent_id = $1
         UNION ALL
         SELECT v.vectors FROM knowledge_document_vectors v JOIN knowledge_documents d ON d.number = v.number
         WHERE d.agent_id = $1 AND d.segment_id IS NULL",
    )
    .bind(AgentId::parse(agent).unwrap().0)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.iter().flat_map(|bytes| Block::from_bytes(bytes).unwrap().numbers().collect::<Vec<_>>()).collect()
}

/// Replaces the source `returns` with a new text, processed by
/// `processing`; returns the text.
async fn replace_returns(t: &Tenant, ids: &[(String, String)], processing: &Processing) -> &'static str {
    let content = "Refunds: you can return unworn items within 14 days of delivery for store credit.";
    let input = json!({
        "agentId": t.agent, "sourceId": id_of(ids, "returns"), "title": "Returns",
        "provenance": { "kind": "manual", "uri": "notes" },
        "revision": "r2", "digest": svc_contract::digest::sha256_prefixed(content.as_bytes()), "content": content,
    });
    let replaced = t.ok("knowledge-sources/replace", input).await["knowledgeSource"].clone();
    assert_eq!(process(&t.app.pool, pending_of(&replaced), processing).await.unwrap(), Outcome::Promoted);
    content
}

#[sqlx::test(migrations = "../migrations")]
async fn an_agent_embedded_beside_a_retired_document_still_merges(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    let words_only = processing("words-only");
    let ids = knowledge(&t, &t.agent, &words_only).await;
    // The replaced revision's document stays, masked, with no passages left.
    let content = replace_returns(&t, &ids, &words_only).await;
    assert_eq!(svc_search::embed_due(&t.app.pool, &*model(), 10).await.unwrap(), 1);
    let agent = AgentId::parse(&t.agent).unwrap();
    merge::merge(&t.app.pool, agent, true).await.unwrap().expect("no other merge");
    assert_eq!(t.app.count("SELECT count(*) FROM knowledge_segment_vectors").await, 1);
    let answered = found(&t.app.pool, Some(&meaning(vec![model()])), &t.agent, IN_OTHER_WORDS).await;
    assert_eq!(answered[0].body, content);
}

#[sqlx::test(migrations = "../migrations")]
async fn superseded_and_deleted_text_never_answers_by_meaning(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    let ids = knowledge(&t, &t.agent, &embedding(model())).await;
    let meaning = meaning(vec![model()]);
    let agent = AgentId::parse(&t.agent).unwrap();
    // Merged into a segment: its one block carries every document's vectors.
    merge::merge(&t.app.pool, agent, false).await.unwrap().expect("no other merge");
    assert_eq!(t.app.count("SELECT count(*) FROM knowledge_segment_vectors").await, 1);
    assert_eq!(t.app.count("SELECT count(*) FROM knowledge_document_vectors").await, 0);
    let answered = found(&t.app.pool, Some(&meaning), &t.agent, IN_OTHER_WORDS).await;
    assert_eq!(answered[0].body, THE_ANSWER);

    // Replaced: the old text's vectors are masked at once.
    let content = replace_returns(&t, &ids, &embedding(model())).await;
    // Deleted: its vectors never answer again.
    let shipping = id_of(&ids, "shipping");
    t.ok(
        "knowledge-sources/delete",
        json!({ "agentId": t.agent, "sourceId": shipping, "tombstone": true, "prune": true, "confirm": shipping }),
    )
    .await;
    let check = |when: &'static str| {
        let (pool, meaning, agent) = (t.app.pool.clone(), &meaning, t.agent.clone());
        async move {
            for question in [IN_OTHER_WORDS, "How soon will my parcel get to me?", "refund within 30 days"] {
                for f in found(&pool, Some(meaning), &agent, question).await {
                    assert!(!f.body.contains("30 days"), "{when}: superseded text answered {question:?}");
                    assert_ne!(f.source_id.to_string(), shipping, "{when}: a deleted source answered {question:?}");
                }
            }
        }
    };
    check("masked").await;
    // Nothing live is close to a question about parcels: were the deleted
    // source's vectors not masked, their closeness would open the meaning
    // side and bring the live sources in.
    assert!(found(&t.app.pool, Some(&meaning), &t.agent, "How soon will my parcel get to me?").await.is_empty());
    // A purging merge drops them from the blocks; what stays answers alike.
    merge::merge(&t.app.pool, agent, true).await.unwrap().expect("no other merge");
    check("merged").await;
    let live: HashSet<i64> = sqlx::query_scalar("SELECT number FROM knowledge_documents WHERE agent_id = $1")
        .bind(agent.0)
        .fetch_all(&t.app.pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let held = blocks(&t.app.pool, &t.agent).await;
    assert_eq!(held.len(), 3, "the three live documents, once each: {held:?}");
    assert!(held.iter().all(|n| live.contains(n)), "a dropped document's vectors were kept");
    let answered = found(&t.app.pool, Some(&meaning), &t.agent, IN_OTHER_WORDS).await;
    assert_eq!(answered[0].body, content, "the replacing text answers by meaning");
}

/// An embeddings endpoint that embeds with the static model, under another
/// name: vectors of another model as far as the index knows.
async fn stand_in(stall_from: Option<usize>) -> llm::StandIn {
    let model = Arc::new(svc_embed::StaticModel::load(&svc_tests::model_dir()).unwrap());
    llm::start_embeddings(Arc::new(move |text: &str| model.embed(text)), stall_from).await
}

fn remote(stand_in: &llm::StandIn, timeout: Duration) -> Arc<Embeddings> {
    let config = EndpointConfig {
        base_url: stand_in.base_url.clone(),
        model: "stand-in".into(),
        api_key: Some("sk-e".into()),
        timeout,
    };
    Arc::new(Embeddings::remote(config, svc_core::embeddings::STATIC_MIN_SIMILARITY).unwrap())
}

async fn model_of(pool: &PgPool, agent: &str) -> String {
    sqlx::query_scalar("SELECT model FROM knowledge_vector_models WHERE agent_id = $1")
        .bind(AgentId::parse(agent).unwrap().0)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Rows of vectors of `model`, fresh documents' and segments'.
async fn vectors_of(pool: &PgPool, model: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM knowledge_document_vectors WHERE model = $1)
              + (SELECT count(*) FROM knowledge_segment_vectors WHERE model = $1)",
    )
    .bind(model)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = "../migrations")]
async fn a_model_change_embeds_every_agent_anew_without_a_gap(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    knowledge(&t, &t.agent, &embedding(model())).await;
    assert_eq!(model_of(&t.app.pool, &t.agent).await, model().id());
    // The API now embeds with the endpoint, the static model beside it.
    let working = stand_in(None).await;
    let api = meaning(vec![remote(&working, Duration::from_secs(30)), model()]);
    let answers = || async {
        let found = found(&t.app.pool, Some(&api), &t.agent, IN_OTHER_WORDS).await;
        assert_eq!(found.first().map(|f| f.body.as_str()), Some(THE_ANSWER));
    };
    answers().await;
    assert!(working.requests().is_empty(), "the Agent's vectors are the static model's: so is the question's");

    // A worker whose endpoint stops answering mid-way (as one that dies):
    // nothing of the new model is written, the old vectors keep answering.
    let stalled = stand_in(Some(1)).await;
    let dying = remote(&stalled, Duration::from_millis(300));
    assert_eq!(svc_search::embed_due(&t.app.pool, &*dying, 10).await.unwrap(), 0);
    assert!(stalled.requests().len() >= 2, "it embedded, then stalled");
    assert_eq!(model_of(&t.app.pool, &t.agent).await, model().id());
    assert_eq!(vectors_of(&t.app.pool, "remote:stand-in").await, 0);
    answers().await;

    // The next sweep's worker finishes: the switch is one transaction.
    let worker = remote(&working, Duration::from_secs(30));
    assert_eq!(svc_search::embed_due(&t.app.pool, &*worker, 10).await.unwrap(), 1);
    assert_eq!(model_of(&t.app.pool, &t.agent).await, "remote:stand-in");
    assert_eq!(vectors_of(&t.app.pool, model().id()).await, 0, "the old vectors are dropped");
    assert!(vectors_of(&t.app.pool, "remote:stand-in").await > 0);
    let before = working.requests().len();
    answers().await;
    assert!(working.requests().len() > before, "the question is embedded by the endpoint now");
    assert_eq!(working.requests()[before].0, "Bearer sk-e");
    // Nothing left to do.
    assert_eq!(svc_search::embed_due(&t.app.pool, &*worker, 10).await.unwrap(), 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn passages_promoted_without_vectors_are_embedded_by_the_sweep(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    // A worker with vectors off (or whose endpoint was down) promotes them.
    knowledge(&t, &t.agent, &processing("words-only")).await;
    let meaning = meaning(vec![model()]);
    assert!(found(&t.app.pool, Some(&meaning), &t.agent, IN_OTHER_WORDS).await.is_empty());
    assert_eq!(svc_search::embed_due(&t.app.pool, &*model(), 10).await.unwrap(), 1);
    let answered = found(&t.app.pool, Some(&meaning), &t.agent, IN_OTHER_WORDS).await;
    assert_eq!(answered.first().map(|f| f.body.as_str()), Some(THE_ANSWER));
    assert_eq!(svc_search::embed_due(&t.app.pool, &*model(), 10).await.unwrap(), 0);
}

#[sqlx::test(migrations = "../migrations")]
async fn an_answer_quotes_whole_sentences(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    knowledge(&t, &t.agent, &embedding(model())).await;
    t.ok("public-chats/enable", json!({ "agentId": t.agent })).await;
    t.ok("widgets/configure", json!({ "agentId": t.agent, "configuration": { "allowedOrigins": [ORIGIN] } })).await;
    let input = json!({ "agentId": t.agent, "origin": ORIGIN, "question": "How long does express shipping take?" });
    let answer =
        assert_ok("widgets/verify", &t.app.op("widgets/verify", &t.owner.token, Some(&t.ws), input).await)["answer"]
            .as_str()
            .unwrap()
            .to_owned();
    let first = answer.split("\n\n").next().unwrap();
    assert_eq!(
        first,
        "From “Shipping”: … Standard shipping takes 3 to 5 business days. Express shipping takes 1 to 2 business days \
         from the moment they leave."
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_question_the_endpoint_cannot_embed_goes_by_its_words(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    let working = stand_in(None).await;
    knowledge(&t, &t.agent, &embedding(remote(&working, Duration::from_secs(30)))).await;
    assert_eq!(model_of(&t.app.pool, &t.agent).await, "remote:stand-in");
    // The same model behind an endpoint that stopped answering.
    let down = stand_in(Some(0)).await;
    let api = meaning(vec![remote(&down, Duration::from_secs(30))]);
    let by_words = found(&t.app.pool, None, &t.agent, "express shipping").await;
    assert_eq!(found(&t.app.pool, Some(&api), &t.agent, "express shipping").await, by_words);
    assert_eq!(down.requests().len(), 1, "one try for the question");
    // Left alone for a while: the next questions do not wait for it.
    assert_eq!(found(&t.app.pool, Some(&api), &t.agent, "express shipping").await, by_words);
    assert!(found(&t.app.pool, Some(&api), &t.agent, IN_OTHER_WORDS).await.is_empty());
    assert_eq!(down.requests().len(), 1, "no further try while it rests");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_question_holds_no_connection_while_the_endpoint_embeds_it(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    let working = stand_in(None).await;
    knowledge(&t, &t.agent, &embedding(remote(&working, Duration::from_secs(30)))).await;
    // An endpoint that takes its time: the question waits for it.
    let slow = stand_in(Some(0)).await;
    let api = meaning(vec![remote(&slow, Duration::from_secs(30))]);
    // A pool of one connection, which a question holding one would keep.
    let options = (*t.app.pool.connect_options()).clone();
    let one = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    let asking = tokio::spawn({
        let (one, agent) = (one.clone(), t.agent.clone());
        async move { found(&one, Some(&api), &agent, "express shipping").await }
    });
    let asked = async {
        while slow.requests().is_empty() {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), asked).await.expect("the question reaches the endpoint");
    let conn = one.acquire().await.unwrap();
    assert!(!asking.is_finished(), "the connection was free while the endpoint held the question");
    drop(conn);
    let by_words = found(&t.app.pool, None, &t.agent, "express shipping").await;
    assert_eq!(asking.await.unwrap(), by_words, "then the question goes by its words");
}

/// An endpoint embedding with the static model that refuses (413) any input
/// longer than 400 characters, and pads each reply with `pad` bytes.
async fn particular(pad: usize) -> llm::StandIn {
    let model = Arc::new(svc_embed::StaticModel::load(&svc_tests::model_dir()).unwrap());
    llm::start_with(Arc::new(move |body: &Value| {
        let inputs: Vec<&str> =
            body["input"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        if inputs.iter().any(|text| text.chars().count() > 400) {
            return (413, json!({ "error": { "message": "input too long" } }));
        }
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, text)| json!({ "index": index, "embedding": model.embed(text) }))
            .collect();
        (200, json!({ "data": data, "pad": "x".repeat(pad) }))
    }))
    .await
}

#[tokio::test]
async fn a_question_the_endpoint_refuses_leaves_it_answering_the_next() {
    let endpoint = particular(0).await;
    let embeddings = remote(&endpoint, Duration::from_secs(30));
    assert!(embeddings.question(&"why ".repeat(120)).await.is_none(), "refused: by its words");
    assert!(embeddings.question(IN_OTHER_WORDS).await.is_some(), "the next question is asked");
    assert_eq!(endpoint.requests().len(), 2);
}

#[tokio::test]
async fn a_reply_past_its_bound_is_not_read() {
    let within = particular(1 << 20).await;
    assert!(remote(&within, Duration::from_secs(30)).question(IN_OTHER_WORDS).await.is_some());
    let past = particular(svc_core::openai::MAX_REPLY).await;
    let embeddings = remote(&past, Duration::from_secs(30));
    assert!(embeddings.question(IN_OTHER_WORDS).await.is_none());
    // Refused for its size, not given up on for its time: the endpoint is not
    // left alone, and the next question is sent.
    assert!(embeddings.question(IN_OTHER_WORDS).await.is_none());
    assert_eq!(past.requests().len(), 2);
}

#[tokio::test]
async fn an_endpoint_refusing_its_key_is_left_alone() {
    let refusing = llm::start_with(Arc::new(|_: &Value| (401, json!({ "error": { "message": "bad key" } })))).await;
    let embeddings = remote(&refusing, Duration::from_secs(30));
    assert!(embeddings.question(IN_OTHER_WORDS).await.is_none());
    assert!(embeddings.question(IN_OTHER_WORDS).await.is_none());
    assert_eq!(refusing.requests().len(), 1, "no question is sent while it rests");
}

#[sqlx::test(migrations = "../migrations")]
async fn agents_whose_embedding_fails_keep_no_other_waiting(pool: PgPool) {
    let t = Tenant::with_config(pool, with_meaning()).await;
    let words_only = processing("words-only");
    let agent = |name: &'static str| {
        let t = &t;
        async move { t.ok("agents/create", json!({ "name": name })).await["agent"]["id"].as_str().unwrap().to_owned() }
    };
    svc_core::admin::plan_set(&t.app.pool, &t.ws, "pro", &["agents=10".to_owned()]).await.unwrap();
    // Five Agents, each with a passage the endpoint refuses, then one more
    // (made last: in id order, it comes last).
    let long = "A passage longer than the endpoint takes. ".repeat(12);
    for name in ["Refused 1", "Refused 2", "Refused 3", "Refused 4", "Refused 5"] {
        let refused = agent(name).await;
        let source = t.ok("knowledge-sources/add", add_input(&refused, "long", &long)).await["knowledgeSource"].clone();
        assert_eq!(process(&t.app.pool, pending_of(&source), &words_only).await.unwrap(), Outcome::Promoted);
    }
    let last = agent("Last").await;
    knowledge(&t, &last, &words_only).await;
    let endpoint = particular(0).await;
    let worker = remote(&endpoint, Duration::from_secs(30));
    // One Agent a sweep: in no fixed order, the last is taken within 100
    // sweeps but for a chance of (5/6)^100, about 1e-8.
    let mut sweeps = 0;
    while svc_search::embed_due(&t.app.pool, &*worker, 1).await.unwrap() == 0 {
        sweeps += 1;
        assert!(sweeps < 100, "the last Agent waited {sweeps} sweeps behind those that fail");
    }
    assert_eq!(model_of(&t.app.pool, &last).await, "remote:stand-in");
}
