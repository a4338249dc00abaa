//! An OpenAI-compatible chat-completions endpoint that writes answers from the
//! retrieved passages (`SVC_LLM_BASE_URL`, `SVC_LLM_MODEL`, `SVC_LLM_API_KEY`;
//! see [`crate::openai`]).

use serde_json::{Value, json};
use svc_contract::resources::Language;
use svc_contract::{Problem, ProblemCode};

use super::Found;
use super::Speaker;
use crate::error::Result;
use crate::openai::{Endpoint, EndpointConfig};

/// The answer model.
pub struct Llm {
    endpoint: Endpoint,
}

impl Llm {
    pub fn new(config: EndpointConfig) -> Result<Self, String> {
        Ok(Self { endpoint: Endpoint::new(config)? })
    }

    /// The model's answer from `found`, in the Agent's language, following its
    /// instructions at its temperature (two attempts at most, see
    /// [`Endpoint::post`]); else `processing_failed`.
    pub async fn answer(&self, speaker: &Speaker, question: &str, found: &[Found]) -> Result<String> {
        let body = request(self.endpoint.model(), speaker, question, found);
        let read = |reply: Value| {
            let text = reply.pointer("/choices/0/message/content").and_then(Value::as_str).map(str::trim);
            match text {
                Some(text) if !text.is_empty() => Ok(text.to_owned()),
                _ => Err("no choices[0].message.content".to_owned()),
            }
        };
        self.endpoint.post("chat/completions", &body, read).await.map_err(|_| {
            Problem::new(ProblemCode::ProcessingFailed, "The language model did not answer; try again shortly.")
                .with_detail("reason", "model_unavailable")
                .into()
        })
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
        Llm::new(EndpointConfig {
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
