//! The answer engine's retrieval: a small labelled set of questions over a few
//! realistic sources, in English and in Spanish, where the right source must
//! rank first. Questions share only some of their words with the right
//! passage (requiring every word, as `websearch_to_tsquery` does, finds little).

use std::collections::HashMap;

use serde_json::json;
use sqlx::PgPool;
use svc_core::ids::{AgentId, RevisionId};
use svc_core::knowledge::process;
use uuid::Uuid;

use crate::helpers::{PASSAGES_WITH_WORDS, TestApp, TestUser, assert_ok};
use crate::knowledge::{add_input, processing};

pub const ENGLISH: &[(&str, &str, &str)] = &[
    (
        "shipping",
        "Shipping policy",
        "# Shipping\n\nWe ship to the United States, Canada and the European Union. Standard delivery takes three to five \
         business days; express delivery arrives the next business day.\n\nShipping is free on orders over 50 dollars. \
         Below that, a flat fee of 6 dollars applies, and international parcels cost 15 dollars.",
    ),
    (
        "returns",
        "Returns and refunds",
        "# Returns\n\nYou can return any item within 30 days of delivery, unused and in its original packaging. Start a \
         return from the Orders page and print the prepaid label.\n\nRefunds reach your card within five business days \
         after the parcel arrives at our warehouse.",
    ),
    (
        "hours",
        "Opening hours",
        "# When we are open\n\nThe support desk answers from 9:00 to 18:00, Monday to Friday. On Saturdays the desk opens \
         from 10:00 to 14:00. We are closed on Sundays and public holidays.",
    ),
    (
        "security",
        "Account security",
        "# Passwords\n\nIf you forgot your password, choose “Reset password” on the sign-in page: we e-mail you a link \
         that works for one hour.\n\n# Two-factor authentication\n\nTurn on two-factor authentication in Settings to \
         protect your account with a code from an authenticator app.",
    ),
    (
        "pricing",
        "Plans and pricing",
        "# Plans\n\nThe Basic plan costs 9 dollars a month and includes one seat. The Premium plan costs 29 dollars a \
         month and includes five seats, priority support and the analytics dashboard. Annual billing saves two months.",
    ),
    (
        "api",
        "API rate limits",
        "# Rate limits\n\nEach integration may send 600 requests per minute. Past that, the API answers 429 with a \
         Retry-After header; wait that many seconds before trying again. Bulk endpoints count as ten requests.",
    ),
];

const ENGLISH_QUESTIONS: &[(&str, &str)] = &[
    ("How many days do I have to return something I bought?", "returns"),
    ("Is the desk open on Saturday mornings?", "hours"),
    ("I forgot my password, how do I get back in?", "security"),
    ("Roughly what would delivery to Canada cost?", "shipping"),
    ("What exactly does the Premium plan give me?", "pricing"),
    ("How many requests per minute can my integration make?", "api"),
    ("How quickly will my refund show up on my card?", "returns"),
    ("Where do I switch on two-factor codes for my account?", "security"),
];

const SPANISH: &[(&str, &str, &str)] = &[
    (
        "envios",
        "Política de envíos",
        "# Envíos\n\nEnviamos a España, Portugal y Francia. La entrega estándar tarda de tres a cinco días hábiles y la \
         urgente llega al día siguiente.\n\nEl envío es gratuito en pedidos de más de 40 euros; por debajo cuesta 5 euros.",
    ),
    (
        "devoluciones",
        "Devoluciones y reembolsos",
        "# Devoluciones\n\nPuedes devolver cualquier artículo durante 30 días desde la entrega, sin usar y en su embalaje \
         original. El reembolso llega a tu tarjeta en cinco días hábiles.",
    ),
    (
        "horario",
        "Horario de atención",
        "# Horario\n\nEl servicio de atención al cliente abre de lunes a viernes de 9:00 a 18:00. Los sábados abrimos de \
         10:00 a 14:00 y los domingos cerramos.",
    ),
    (
        "seguridad",
        "Seguridad de la cuenta",
        "# Contraseñas\n\nSi olvidaste tu contraseña, pulsa «Restablecer contraseña» en la página de acceso y te enviaremos \
         un enlace por correo electrónico válido durante una hora.",
    ),
    (
        "precios",
        "Planes y precios",
        "# Planes\n\nEl plan Básico cuesta 9 euros al mes e incluye un usuario. El plan Premium cuesta 29 euros al mes e \
         incluye cinco usuarios y soporte prioritario.",
    ),
];

const SPANISH_QUESTIONS: &[(&str, &str)] = &[
    ("¿Cuántos días tengo para devolver un producto?", "devoluciones"),
    ("¿Abrís los sábados?", "horario"),
    ("He olvidado mi contraseña, ¿qué hago?", "seguridad"),
    ("¿Cuánto cuesta el envío a Francia?", "envios"),
    ("¿Qué incluye el plan premium?", "precios"),
];

struct Setup {
    app: TestApp,
    owner: TestUser,
    ws: String,
}

async fn setup(pool: PgPool) -> Setup {
    let app = TestApp::new(pool).await;
    let (owner, ws) = app.owner("alice").await;
    Setup { app, owner, ws }
}

impl Setup {
    /// An Agent in `language` whose sources are all active; returns its id and
    /// each source's id by key.
    async fn agent(
        &self,
        name: &str,
        language: &str,
        sources: &[(&str, &str, &str)],
    ) -> (String, Vec<(String, String)>) {
        let created = self
            .app
            .op(
                "agents/create",
                &self.owner.token,
                Some(&self.ws),
                json!({ "name": name, "defaultLanguage": language }),
            )
            .await;
        let agent = assert_ok("agents/create", &created)["agent"]["id"].as_str().unwrap().to_owned();
        let mut ids = Vec::new();
        for (key, title, content) in sources {
            let mut input = add_input(&agent, key, content);
            input["title"] = json!(title);
            let added = self.app.op("knowledge-sources/add", &self.owner.token, Some(&self.ws), input).await;
            let source = assert_ok("knowledge-sources/add", &added)["knowledgeSource"].clone();
            let revision = RevisionId::parse(source["pendingRevision"]["id"].as_str().unwrap()).unwrap();
            process(&self.app.pool, revision, &processing("test")).await.unwrap();
            ids.push((key.to_string(), source["id"].as_str().unwrap().to_owned()));
        }
        (agent, ids)
    }

    /// The key of the best source for `question`.
    async fn best(&self, agent: &str, ids: &[(String, String)], question: &str) -> Option<String> {
        let agent = AgentId::parse(agent).unwrap();
        let found = svc_core::answers::retrieve(&self.app.pool, None, agent, question).await.unwrap();
        let best = found.first()?.source_id.to_string();
        ids.iter().find(|(_, id)| *id == best).map(|(key, _)| key.clone())
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn the_right_source_ranks_first_in_english_and_spanish(pool: PgPool) {
    let s = setup(pool).await;
    let (english, english_ids) = s.agent("Support", "en", ENGLISH).await;
    let (spanish, spanish_ids) = s.agent("Soporte", "es", SPANISH).await;
    for (agent, ids, questions) in
        [(&english, &english_ids, ENGLISH_QUESTIONS), (&spanish, &spanish_ids, SPANISH_QUESTIONS)]
    {
        for (question, expected) in questions {
            assert_eq!(s.best(agent, ids, question).await.as_deref(), Some(*expected), "{question}");
        }
    }
    // Nothing in the Knowledge: nothing found.
    assert_eq!(s.best(&english, &english_ids, "Quantum chromodynamics of gluons").await, None);
}

#[sqlx::test(migrations = "../migrations")]
async fn answers_stay_right_after_the_agents_language_changes(pool: PgPool) {
    let s = setup(pool).await;
    let (agent, ids) = s.agent("Support", "en", ENGLISH).await;
    let changed = s
        .app
        .op("agents/configure", &s.owner.token, Some(&s.ws), json!({ "agentId": agent, "defaultLanguage": "es" }))
        .await;
    assert_ok("agents/configure", &changed);
    // The English passages stay indexed in English and keep answering.
    assert_eq!(s.best(&agent, &ids, "When are you open on Saturday?").await.as_deref(), Some("hours"));
    // A source added now is indexed in Spanish, and found in Spanish.
    let (_, more) = {
        let mut input = add_input(&agent, "horario", SPANISH[2].2);
        input["title"] = json!(SPANISH[2].1);
        let added = s.app.op("knowledge-sources/add", &s.owner.token, Some(&s.ws), input).await;
        let source = assert_ok("knowledge-sources/add", &added)["knowledgeSource"].clone();
        let revision = RevisionId::parse(source["pendingRevision"]["id"].as_str().unwrap()).unwrap();
        process(&s.app.pool, revision, &processing("test")).await.unwrap();
        ((), vec![("horario".to_owned(), source["id"].as_str().unwrap().to_owned())])
    };
    assert_eq!(s.best(&agent, &more, "¿Abrís los sábados?").await.as_deref(), Some("horario"));
    let languages: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT language::text FROM knowledge_passages ORDER BY 1")
            .fetch_all(&s.app.pool)
            .await
            .unwrap();
    assert_eq!(languages, ["en", "es"]);
}

/// Ranking from the stored postings is BM25F over every passage: the same
/// sources in the same order as scoring each passage's own tsvector here, title
/// occurrences counted twice, for questions of rare words, common words and
/// title words.
#[sqlx::test(migrations = "../migrations")]
async fn ranking_from_postings_is_bm25f_over_every_passage(pool: PgPool) {
    let s = setup(pool).await;
    let (agent, _) = s.agent("Support", "en", ENGLISH).await;
    let agent = AgentId::parse(&agent).unwrap();
    let (capped, answered) = assert_bm25f(&s.app.pool, agent).await;
    assert!(capped, "a question of more than MAX_TERMS known words was asked");
    assert_eq!(answered, questions().len(), "every question finds something");
}

/// Questions of rare words, common words, title words, and one of more than
/// `MAX_TERMS` known words.
pub fn questions() -> Vec<String> {
    let long = format!("{} {}", ENGLISH[1].2, ENGLISH[4].2);
    ENGLISH_QUESTIONS
        .iter()
        .map(|(q, _)| (*q).to_owned())
        .chain(
            [
                "What do you know about the plans and what they cost per month?",
                "days business delivery support the",
                "Do you ship parcels to the European Union, and how long does it take?",
                "Opening hours, shipping policy, returns and refunds",
                long.as_str(),
            ]
            .map(str::to_owned),
        )
        .collect()
}

/// Asserts that ranking, and retrieval, give the Agent's English passages as
/// BM25F computed here from each passage's own tsvector ranks them; returns
/// whether a question had more than `MAX_TERMS` known words, and how many
/// questions found something.
pub async fn assert_bm25f(pool: &PgPool, agent: AgentId) -> (bool, usize) {
    let mut conn = pool.acquire().await.unwrap();
    // Every (passage, lexeme) of the Agent, straight from the passages.
    let held: Vec<(Uuid, Uuid, i32, i32, String, i32, i32)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT p.source_id, p.revision_id, p.ordinal, p.tokens, t.lexeme, cardinality(t.positions),
                coalesce(cardinality(array_positions(t.weights, 'A')), 0)
         FROM {PASSAGES_WITH_WORDS} p, unnest(p.search) AS t WHERE p.agent_id = $1"
    )))
    .bind(agent.0)
    .fetch_all(pool)
    .await
    .unwrap();
    let (n, mean): (f64, f64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FILTER (WHERE search <> '')::float8,
                sum(tokens)::float8 / count(*) FILTER (WHERE search <> '')
         FROM {PASSAGES_WITH_WORDS} p WHERE agent_id = $1"
    )))
    .bind(agent.0)
    .fetch_one(pool)
    .await
    .unwrap();
    let mut capped = false;
    let mut answered = 0;
    let questions = questions();
    for question in &questions {
        let question = question.as_str();
        let words: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', $1)))")
                .bind(question)
                .fetch_all(pool)
                .await
                .unwrap();
        let df = |word: &str| held.iter().filter(|h| h.4 == word).count();
        let mut words: Vec<(usize, String)> =
            words.into_iter().map(|w| (df(&w), w)).filter(|(df, _)| *df > 0).collect();
        words.sort();
        capped |= words.len() > svc_search::testing::MAX_TERMS;
        words.truncate(svc_search::testing::MAX_TERMS);
        let mut scores: HashMap<(Uuid, Uuid, i32), f64> = HashMap::new();
        for (df, lexeme) in &words {
            let idf = (1.0 + (n - *df as f64 + 0.5) / (*df as f64 + 0.5)).ln();
            for (source, revision, ordinal, length, _, count, title) in held.iter().filter(|h| &h.4 == lexeme) {
                let tf = f64::from(*count + *title);
                let norm = 1.2 * (1.0 - 0.75 + 0.75 * f64::from(*length) / mean);
                *scores.entry((*source, *revision, *ordinal)).or_default() += idf * tf * 2.2 / (tf + norm);
            }
        }
        let mut best: HashMap<Uuid, f64> = HashMap::new();
        for ((source, _, _), score) in scores {
            let kept = best.entry(source).or_default();
            *kept = kept.max(score);
        }
        let mut expected: Vec<(Uuid, f64)> = best.into_iter().collect();
        // Equal to 9 decimal places: by source id, as ranking does.
        expected.sort_by(|a, b| (b.1 * 1e9).round().total_cmp(&(a.1 * 1e9).round()).then(a.0.cmp(&b.0)));
        expected.truncate(svc_core::answers::MAX_SOURCES);
        let vocabulary =
            svc_search::testing::vocabulary(&mut conn, agent, svc_search::Language::En, question).await.unwrap();
        let ranked = svc_search::testing::rank(
            &mut conn,
            agent,
            svc_search::Language::En,
            &vocabulary,
            svc_core::answers::MAX_SOURCES,
        )
        .await
        .unwrap();
        assert_eq!(ranked.is_empty(), expected.is_empty(), "{question}");
        answered += usize::from(!ranked.is_empty());
        let ranked: Vec<(Uuid, f64)> = ranked.iter().map(|r| (r.source_id.0, r.score)).collect();
        assert_eq!(ranked.len(), expected.len(), "{question}");
        for (got, want) in ranked.iter().zip(&expected) {
            assert!(got.0 == want.0 && (got.1 - want.1).abs() < 1e-9, "{question}: {ranked:?} != {expected:?}");
        }
        let found = svc_core::answers::retrieve(pool, None, agent, question).await.unwrap();
        let found: Vec<Uuid> = found.iter().map(|f| f.source_id.0).collect();
        assert_eq!(found, expected.iter().map(|e| e.0).collect::<Vec<_>>(), "{question}");
    }
    (capped, answered)
}

/// Requiring every word finds little: the same questions through
/// `websearch_to_tsquery` miss most of these passages (so the test above
/// measures something).
#[sqlx::test(migrations = "../migrations")]
async fn requiring_every_word_would_miss_most_of_these(pool: PgPool) {
    let s = setup(pool).await;
    s.agent("Support", "en", ENGLISH).await;
    let mut found = 0;
    for (question, _) in ENGLISH_QUESTIONS {
        let hits: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {PASSAGES_WITH_WORDS} p WHERE search @@ websearch_to_tsquery('english', $1)"
        )))
        .bind(question)
        .fetch_one(&s.app.pool)
        .await
        .unwrap();
        found += usize::from(hits > 0);
    }
    assert!(found * 2 < ENGLISH_QUESTIONS.len(), "{found} of {} found with every word", ENGLISH_QUESTIONS.len());
}
