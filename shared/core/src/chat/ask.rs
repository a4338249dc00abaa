//! One public answer: the conversation it belongs to, counted toward the
//! Workspace's `usage.conversations` when it is new, then the answer engine.
//!
//! Shared by the answers endpoint and `widget.verify`. A new conversation is
//! counted before the answer is computed, within the quota, in one statement,
//! so concurrent askers can never spend more than the quota; when the answer
//! then fails (the model is down), the count is given back, because the asker
//! got nothing for it.

use serde_json::Value;
use svc_contract::chat::MAX_PUBLIC_QUESTION_CHARS;
use svc_contract::{Issue, Problem, ProblemCode};

use super::PublicAgent;
use crate::answers::{self, Answer, Engine, Speaker};
use crate::entitlements::{Entitlement, LimitKey};
use crate::error::Result;
use crate::ids::ConversationId;
use crate::store;

/// An answer and the conversation it belongs to.
#[derive(Clone, Debug)]
pub struct Asked {
    pub conversation: ConversationId,
    pub answer: Answer,
}

/// Who answers the public: the Agent, speaking through its Widget. The
/// Widget's `defaultLanguage` is the answer's language; its `instructions`
/// follow the Agent's own (both apply). Once the Widget is configured its
/// `conversationTemperature` is the temperature and its
/// `conversationCreativity` the nucleus (`top_p`) of the model's sampling;
/// before that the Agent's temperature stands and `top_p` is the model's own.
pub fn speaker(agent: &PublicAgent) -> Speaker {
    let row = &agent.agent;
    let behavior = &agent.widget.behavior;
    let instructions = [row.instructions.as_deref().unwrap_or(""), behavior.instructions.as_str()]
        .iter()
        .map(|text| text.trim())
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    Speaker {
        id: row.id,
        language: agent.widget.default_language,
        instructions: (!instructions.is_empty()).then_some(instructions),
        temperature: if agent.widget_stored { behavior.conversation_temperature } else { row.temperature },
        top_p: agent.widget_stored.then(|| behavior.conversation_creativity.max(MIN_TOP_P)),
    }
}

/// Smallest `top_p` sent: 0 is refused by some models and means "one token"
/// to the others.
const MIN_TOP_P: f64 = 0.01;

/// Answers `question` as `agent`, within `conversation` when it is one of this
/// Agent's, else in a new conversation counted toward the Workspace's quota
/// (`entitlement_required` with `details.reason` `quota_spent` when it is
/// spent). Takes pooled connections only while it reads or writes: none is
/// held while a model answers.
pub async fn ask(
    engine: Engine<'_>,
    public: &PublicAgent,
    question: &str,
    conversation: Option<ConversationId>,
) -> Result<Asked> {
    let (agent, entitlement) = (&public.agent, &public.entitlement);
    let (conversation, new) = {
        let mut conn = crate::runtime::connection(engine.pool).await?;
        match conversation {
            Some(id) if store::conversations::exists(&mut conn, id, agent.id).await? => (id, false),
            _ => {
                let id = ConversationId::new();
                let limit = i64::try_from(entitlement.limit(LimitKey::Conversations)).unwrap_or(i64::MAX);
                if !store::conversations::start(&mut conn, id, agent.workspace_id, agent.id, limit).await? {
                    return Err(quota_spent(entitlement).into());
                }
                (id, true)
            }
        }
    };
    match answers::answer(engine.pool, engine.llm, engine.meaning, &speaker(public), question).await {
        Ok(answer) => Ok(Asked { conversation, answer }),
        Err(error) => {
            if new {
                give_back(engine.pool, conversation).await;
            }
            Err(error)
        }
    }
}

/// Uncounts a conversation that got no answer. Best effort: the error that
/// ended the conversation is what the caller hears about.
async fn give_back(pool: &sqlx::PgPool, conversation: ConversationId) {
    let given_back = async {
        let mut conn = crate::runtime::connection(pool).await?;
        store::conversations::give_back(&mut conn, conversation).await
    };
    if let Err(error) = given_back.await {
        tracing::warn!(%error, %conversation, "could not give back an unanswered conversation");
    }
}

fn quota_spent(entitlement: &Entitlement) -> Problem {
    Problem::new(
        ProblemCode::EntitlementRequired,
        "The Workspace has used all the conversations its plan allows this month.",
    )
    .with_detail("reason", "quota_spent")
    .with_detail("limit", LimitKey::Conversations.as_str())
    .with_detail("max", entitlement.limit(LimitKey::Conversations))
}

/// A question from the public, read from the answers endpoint's body.
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    pub text: String,
    /// The conversation it continues, if the asker named one.
    pub conversation: Option<ConversationId>,
}

/// Reads the answers endpoint's body (`svc_contract::chat::PublicQuestion`):
/// `invalid_request` naming every broken rule at once, as the operations do.
pub fn read_question(body: &[u8]) -> Result<Question, Problem> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Err(Problem::invalid("malformed_json", "The request body is not a JSON object."));
    };
    let Value::Object(object) = value else {
        return Err(Problem::invalid("malformed_json", "The request body is not a JSON object."));
    };
    let mut issues = Vec::new();
    let mut issue = |path: &str, message: &str| issues.push(Issue { path: path.into(), message: message.into() });
    for key in object.keys().filter(|k| !matches!(k.as_str(), "question" | "conversationId")) {
        issue(&format!("/{}", pointer_escape(key)), "is not a known property");
    }
    let text = match object.get("question") {
        None => {
            issue("", "`question` is required");
            None
        }
        Some(Value::String(text)) => {
            let chars = text.chars().count();
            if !(1..=MAX_PUBLIC_QUESTION_CHARS).contains(&chars) {
                issue("/question", "must be 1 to 2000 characters long");
            }
            Some(text.clone())
        }
        Some(_) => {
            issue("/question", "must be a string");
            None
        }
    };
    let conversation = match object.get("conversationId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => {
            let parsed = ConversationId::parse(id);
            if parsed.is_none() {
                issue("/conversationId", "is not a conversation id (one an earlier answer gave)");
            }
            parsed
        }
        Some(_) => {
            issue("/conversationId", "must be a string");
            None
        }
    };
    match text {
        Some(text) if issues.is_empty() => Ok(Question { text, conversation }),
        _ => Err(Problem::schema_violation(issues)),
    }
}

/// A property name as a JSON pointer token (RFC 6901).
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(body: &str) -> Vec<String> {
        let problem = read_question(body.as_bytes()).unwrap_err();
        match problem.details.and_then(|d| d.get("issues").cloned()) {
            Some(Value::Array(issues)) => issues.iter().map(|i| i["path"].as_str().unwrap().to_owned()).collect(),
            _ => vec![problem.message.into_owned()],
        }
    }

    #[test]
    fn questions_are_read_at_their_bounds() {
        let at_limit = "é".repeat(MAX_PUBLIC_QUESTION_CHARS);
        let read = read_question(format!(r#"{{"question":"{at_limit}"}}"#).as_bytes()).unwrap();
        assert_eq!((read.text.chars().count(), read.conversation), (2000, None));
        let over = "é".repeat(MAX_PUBLIC_QUESTION_CHARS + 1);
        assert_eq!(issues(&format!(r#"{{"question":"{over}"}}"#)), ["/question"]);
        assert_eq!(issues(r#"{"question":""}"#), ["/question"]);
        let id = ConversationId::new();
        let read = read_question(format!(r#"{{"question":"q","conversationId":"{id}"}}"#).as_bytes()).unwrap();
        assert_eq!(read.conversation, Some(id));
        assert!(read_question(br#"{"question":"q","conversationId":null}"#).unwrap().conversation.is_none());
    }

    #[test]
    fn every_broken_rule_is_named() {
        assert_eq!(issues(r#"{"conversationId":"conv_nope","a/b":1}"#), ["/a~1b", "", "/conversationId"]);
        assert_eq!(issues(r#"{"question":7,"conversationId":7}"#), ["/question", "/conversationId"]);
        assert_eq!(issues("[1]"), ["The request body is not a JSON object."]);
        assert_eq!(issues("{"), ["The request body is not a JSON object."]);
    }
}
