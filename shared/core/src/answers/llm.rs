//! An OpenAI-compatible chat-completions endpoint that writes answers from the
//! retrieved passages (`SVC_LLM_BASE_URL`, `SVC_LLM_MODEL`, `SVC_LLM_API_KEY`).

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use svc_contract::resources::Language;
use svc_contract::{Problem, ProblemCode};

use super::Found;
use super::Speaker;
use crate::error::Result;

/// Where the model is.
#[derive(Clone)]
pub struct LlmConfig {
    /// Up to `/v1` (or wherever `chat/completions` lives), without a trailing slash.
    pub base_url: String,
    pub model: String,
    /// Sent as a bearer token; never logged.
    pub api_key: Option<String>,
    /// Longest wait for one attempt.
    pub timeout: Duration,
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

pub struct Llm {
    config: LlmConfig,
    client: HttpsClient,
}

/// Why an attempt failed, and whether another may succeed.
struct Failed {
    retry: bool,
    reason: String,
}

impl Llm {
    pub fn new(mut config: LlmConfig) -> Result<Self, String> {
        while config.base_url.ends_with('/') {
            config.base_url.pop();
        }
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| format!("no TLS root certificates: {e}"))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self { config, client: Client::builder(TokioExecutor::new()).build(connector) })
    }

    /// The model's answer from `found`, in the Agent's language, following its
    /// instructions at its temperature. Two attempts at most (a timeout, a
    /// transport failure, a 429 or 5xx is tried again once); then
    /// `processing_failed`.
    pub async fn answer(&self, speaker: &Speaker, question: &str, found: &[Found]) -> Result<String> {
        let body = request(&self.config.model, speaker, question, found).to_string();
        for attempt in 0..2 {
            match self.attempt(&body).await {
                Ok(text) => return Ok(text),
                Err(failed) => {
                    // The cause is the operator's to read, never the caller's.
                    tracing::warn!(attempt, reason = %failed.reason, "the language model did not answer");
                    if !failed.retry {
                        break;
                    }
                }
            }
        }
        Err(Problem::new(ProblemCode::ProcessingFailed, "The language model did not answer; try again shortly.")
            .with_detail("reason", "model_unavailable")
            .into())
    }

    async fn attempt(&self, body: &str) -> Result<String, Failed> {
        let fail = |retry: bool, reason: String| Failed { retry, reason };
        let mut request = hyper::Request::post(format!("{}/chat/completions", self.config.base_url))
            .header("content-type", "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .map_err(|e| fail(false, format!("bad request: {e}")))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| fail(true, format!("transport: {e}")))?;
            let status = response.status();
            let bytes = response.into_body().collect().await.map_err(|e| fail(true, format!("body: {e}")))?.to_bytes();
            Ok::<_, Failed>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.config.timeout, exchange)
            .await
            .map_err(|_| fail(true, format!("no answer within {:?}", self.config.timeout)))??;
        if !status.is_success() {
            let retry = status.as_u16() == 429 || status.is_server_error();
            return Err(fail(retry, format!("status {status}")));
        }
        let reply: Value = serde_json::from_slice(&bytes).map_err(|e| fail(false, format!("not JSON: {e}")))?;
        let text = reply.pointer("/choices/0/message/content").and_then(Value::as_str).map(str::trim).unwrap_or("");
        if text.is_empty() {
            return Err(fail(false, "no choices[0].message.content".into()));
        }
        Ok(text.to_owned())
    }
}

/// The chat-completions request: the Agent's instructions and the rules of the
/// answer as the system message, the passages and the question as the user's.
fn request(model: &str, speaker: &Speaker, question: &str, found: &[Found]) -> Value {
    let language = match speaker.language {
        Language::En => "English",
        Language::Es => "Spanish",
    };
    let mut system = String::new();
    if let Some(instructions) = &speaker.instructions {
        system.push_str(instructions.trim());
        system.push_str("\n\n");
    }
    system.push_str(&format!(
        "Answer in {language}, using only the numbered passages the user gives. Name the titles of the passages you \
         use. If they do not contain the answer, say briefly that you don't know yet."
    ));
    let mut passages = String::new();
    for (i, f) in found.iter().enumerate() {
        let heading = f.heading.as_deref().map(|h| format!(" — {h}")).unwrap_or_default();
        passages.push_str(&format!("[{}] “{}”{heading}\n{}\n\n", i + 1, f.title, f.body));
    }
    let mut request = json!({
        "model": model,
        "temperature": speaker.temperature,
        "messages": [
            { "role": "system", "content": system },
            { "role": "user", "content": format!("Passages:\n\n{passages}Question: {question}") },
        ],
    });
    if let Some(top_p) = speaker.top_p {
        request["top_p"] = json!(top_p);
    }
    request
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use svc_tests::llm::{Reply, start};

    use super::*;
    use crate::ids::{AgentId, RevisionId, SourceId};

    fn found() -> Vec<Found> {
        vec![Found {
            source_id: SourceId::new(),
            revision_id: RevisionId::new(),
            ordinal: 0,
            title: "Returns".into(),
            uri: "kb/returns.md".into(),
            heading: Some("Refunds".into()),
            body: "Refunds reach your card within five days.".into(),
            snippet: String::new(),
        }]
    }

    fn speaker() -> Speaker {
        Speaker {
            id: AgentId::new(),
            language: Language::Es,
            instructions: Some("Be brief.".into()),
            temperature: 0.7,
            top_p: Some(0.4),
        }
    }

    fn llm(base_url: &str, timeout: Duration) -> Llm {
        Llm::new(LlmConfig {
            base_url: format!("{base_url}/"),
            model: "stand-in-1".into(),
            api_key: Some("sk-test".into()),
            timeout,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn the_request_carries_the_agent_the_passages_and_the_question() {
        let stand_in = start(vec![Reply::Content("Cinco días.".into())]).await;
        let answer = llm(&stand_in.base_url, Duration::from_secs(5))
            .answer(&speaker(), "¿Cuándo llega el reembolso?", &found())
            .await
            .unwrap();
        assert_eq!(answer, "Cinco días.");
        let requests = stand_in.requests();
        assert_eq!(requests.len(), 1);
        let (auth, body) = &requests[0];
        assert_eq!(auth, "Bearer sk-test");
        assert_eq!(body["model"], "stand-in-1");
        assert_eq!(body["temperature"], 0.7);
        assert_eq!(body["top_p"], 0.4);
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert_eq!(body["messages"][0]["role"], "system");
        assert!(system.starts_with("Be brief.") && system.contains("Answer in Spanish"), "{system}");
        let user = body["messages"][1]["content"].as_str().unwrap();
        assert!(user.contains("[1] “Returns” — Refunds\nRefunds reach your card within five days."), "{user}");
        assert!(user.ends_with("Question: ¿Cuándo llega el reembolso?"), "{user}");
    }

    #[tokio::test]
    async fn one_retry_then_processing_failed() {
        // A 503 then an answer: the retry answers.
        let stand_in = start(vec![Reply::Status(503), Reply::Content("Five days.".into())]).await;
        let answer = llm(&stand_in.base_url, Duration::from_secs(5)).answer(&speaker(), "q", &found()).await.unwrap();
        assert_eq!((answer.as_str(), stand_in.requests().len()), ("Five days.", 2));
        // Down twice: processing_failed, after exactly two attempts.
        let stand_in = start(vec![Reply::Status(500)]).await;
        let error =
            llm(&stand_in.base_url, Duration::from_secs(5)).answer(&speaker(), "q", &found()).await.unwrap_err();
        let problem = error.into_problem();
        assert_eq!(problem.code, ProblemCode::ProcessingFailed);
        assert_eq!(stand_in.requests().len(), 2);
        // A model that never answers: each attempt times out.
        let stand_in = start(vec![Reply::Stall(Duration::from_secs(30))]).await;
        let problem = llm(&stand_in.base_url, Duration::from_millis(200))
            .answer(&speaker(), "q", &found())
            .await
            .unwrap_err()
            .into_problem();
        assert_eq!(problem.code, ProblemCode::ProcessingFailed);
        assert_eq!(stand_in.requests().len(), 2);
        // A refusal that another try cannot fix (400) is not tried again.
        let stand_in = start(vec![Reply::Status(400)]).await;
        let problem = llm(&stand_in.base_url, Duration::from_secs(5))
            .answer(&speaker(), "q", &found())
            .await
            .unwrap_err()
            .into_problem();
        assert_eq!((problem.code, stand_in.requests().len()), (ProblemCode::ProcessingFailed, 1));
    }
}
