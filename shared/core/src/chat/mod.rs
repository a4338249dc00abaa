//! Public Chat and the Widget configuration of an Agent (contract §12): the
//! defaults, the merge of a partial configuration with its removal
//! confirmation, and what the public side (the answers endpoint, the chat page)
//! reads about an Agent.
//!
//! An Agent has no stored state until a call writes some: Public Chat is then
//! disabled without a website, and the Widget has [`default_configuration`],
//! computed from the Agent. `widget.configure` stores the whole configuration.

mod ask;
mod origin;
mod website;

pub use ask::{Asked, Question, ask, read_question, speaker};
pub use origin::{Origin, OriginError};
pub use website::{MAX_URL_CHARS, UrlError, check_url};

use std::collections::HashSet;

use sqlx::PgConnection;
use svc_contract::Problem;
use svc_contract::chat::{
    Appearance, AppearancePatch, Behavior, BehaviorPatch, BubbleStyle, CollectUserInfo, LeadCapture, Orientation,
    PublicChat, Theme, WelcomePopup, WidgetConfiguration, WidgetConfigurationPatch,
};
use svc_contract::patch::Patch;
use svc_contract::resources::{Language, WorkspaceStatus};
use time::OffsetDateTime;

use crate::entitlements::Entitlement;
use crate::error::Result;
use crate::ids::{AgentId, WorkspaceId};
use crate::store;
use crate::store::agents::AgentRow;
use crate::store::chat::ChatRow;

/// Brand colour of a new Widget.
pub const DEFAULT_BRAND_COLOR: &str = "#2563eb";
/// Seconds before the welcome popup shows, once enabled.
pub const DEFAULT_WELCOME_POPUP_SECONDS: f64 = 5.0;
/// `conversationTemperature` and `conversationCreativity` of a new Widget: the
/// Agent's own default temperature (contract §8), on the Widget's 0..1 scale.
pub const DEFAULT_CONVERSATION_TEMPERATURE: f64 = 0.2;
pub const DEFAULT_CONVERSATION_CREATIVITY: f64 = 0.2;

/// The greeting of a new Widget, in its language.
pub fn default_greeting(language: Language) -> &'static str {
    match language {
        Language::En => "Hi! How can I help you today?",
        Language::Es => "¡Hola! ¿En qué puedo ayudarte hoy?",
    }
}

/// The configuration of a Widget nobody configured yet: no origins, branding
/// shown, the Agent's language, its name as the headline.
pub fn default_configuration(agent_name: &str, language: Language) -> WidgetConfiguration {
    WidgetConfiguration {
        allowed_origins: Vec::new(),
        legacy_allowed_domains: Vec::new(),
        legacy_allows_any_origin: false,
        show_branding: true,
        default_language: language,
        website: None,
        appearance: Appearance {
            headline: agent_name.to_owned(),
            description: String::new(),
            welcome_message: default_greeting(language).to_owned(),
            brand_color: DEFAULT_BRAND_COLOR.to_owned(),
            theme: Theme::Auto,
            orientation: Orientation::Right,
            logo_url: String::new(),
            bubble_style: BubbleStyle::Icon,
            bubble_label: None,
            use_brand_color: true,
        },
        behavior: Behavior {
            instructions: String::new(),
            conversation_temperature: DEFAULT_CONVERSATION_TEMPERATURE,
            conversation_creativity: DEFAULT_CONVERSATION_CREATIVITY,
            welcome_popup: WelcomePopup {
                enabled: false,
                seconds: DEFAULT_WELCOME_POPUP_SECONDS,
                message: default_greeting(language).to_owned(),
            },
            collect_user_info: CollectUserInfo { enabled: false, message: String::new() },
            lead_capture: LeadCapture {
                enabled: false,
                contact_email: String::new(),
                calendar_link: String::new(),
                phone_number: String::new(),
                custom_message: String::new(),
                email_notification_enabled: false,
            },
            predefined_questions: Vec::new(),
        },
    }
}

/// The stored configuration, or the default one of the Agent.
pub fn effective_configuration(
    stored: Option<WidgetConfiguration>,
    agent_name: &str,
    language: Language,
) -> WidgetConfiguration {
    stored.unwrap_or_else(|| default_configuration(agent_name, language))
}

/// The stable address of an Agent's Public Chat page: the same across rename,
/// disable and enable, because it names the Agent by id.
pub fn public_chat_url(base_url: &str, agent: AgentId) -> String {
    format!("{}/chat/{agent}", base_url.trim_end_matches('/'))
}

/// The Public Chat resource of an Agent.
pub fn public_chat(base_url: &str, agent: AgentId, enabled: bool, website: Option<String>) -> PublicChat {
    PublicChat { agent_id: agent.to_string(), enabled, url: public_chat_url(base_url, agent), website }
}

/// `invalid_request` for a web address, naming where it is.
pub fn url_problem(path: &str, error: UrlError) -> Problem {
    Problem::invalid("invalid_url", format!("`{}` {}.", field_name(path), error.message()))
        .with_detail("path", path)
        .with_detail("rule", error.as_str())
}

/// `invalid_request` for the origin at `index` of the list at `path`.
pub fn origin_problem(path: &str, index: usize, error: OriginError) -> Problem {
    Problem::invalid("invalid_origin", format!("`{}[{index}]` {}.", field_name(path), error.message()))
        .with_detail("path", format!("{path}/{index}"))
        .with_detail("index", index)
        .with_detail("rule", error.as_str())
}

/// The last token of a JSON pointer, for messages.
fn field_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A website as `public_chat.enable` or `widget.configure` received it,
/// checked: a new value must be a web address; `null` clears.
pub fn check_website(website: &Patch<String>, path: &str) -> Result<(), Problem> {
    match website {
        Patch::Set(url) => check_url(url).map_err(|e| url_problem(path, e)),
        Patch::Keep | Patch::Clear => Ok(()),
    }
}

/// Parses a list of origins, each normalised; duplicates (after
/// normalisation) are collapsed, keeping the first one's place.
pub fn parse_origins(origins: &[String], path: &str) -> Result<Vec<Origin>, Problem> {
    let mut seen = HashSet::new();
    let mut parsed = Vec::with_capacity(origins.len());
    for (index, text) in origins.iter().enumerate() {
        let origin = Origin::parse(text).map_err(|e| origin_problem(path, index, e))?;
        if seen.insert(origin.clone()) {
            parsed.push(origin);
        }
    }
    Ok(parsed)
}

/// A `widget.configure` input whose values are checked: origins parsed and
/// normalised, web addresses valid. Made before anything is read, so a bad
/// input is `invalid_request` whatever the Agent.
#[derive(Debug)]
pub struct CheckedPatch {
    origins: Option<Vec<Origin>>,
    /// Normalised.
    confirmed: HashSet<String>,
    rest: WidgetConfigurationPatch,
}

impl CheckedPatch {
    pub fn new(mut patch: WidgetConfigurationPatch) -> Result<Self, Problem> {
        const AT: &str = "/configuration";
        let origins =
            patch.allowed_origins.take().map(|o| parse_origins(&o, &format!("{AT}/allowedOrigins"))).transpose()?;
        let confirmed = parse_origins(
            &patch.confirm_removed_origins.take().unwrap_or_default(),
            &format!("{AT}/confirmRemovedOrigins"),
        )?
        .into_iter()
        .map(Origin::into_string)
        .collect();
        check_website(&patch.website, &format!("{AT}/website"))?;
        if let Some(logo) = patch.appearance.as_ref().and_then(|a| a.logo_url.as_deref())
            && !logo.is_empty()
        {
            // Empty means no logo.
            check_url(logo).map_err(|e| url_problem(&format!("{AT}/appearance/logoUrl"), e))?;
        }
        Ok(Self { origins, confirmed, rest: patch })
    }

    /// The configuration after this patch, or `confirmation_required` when it
    /// drops allowed origins that `confirmRemovedOrigins` does not list.
    pub fn apply(self, current: WidgetConfiguration) -> Result<WidgetConfiguration, Problem> {
        let mut next = current;
        if let Some(origins) = self.origins {
            let kept: HashSet<&str> = origins.iter().map(Origin::as_str).collect();
            // Stored origins are normalised; compare them the same way anyway,
            // so a value stored before a rule changed is still recognised.
            let removed: Vec<String> = next
                .allowed_origins
                .iter()
                .map(|stored| Origin::parse(stored).map(Origin::into_string).unwrap_or_else(|_| stored.clone()))
                .filter(|stored| !kept.contains(stored.as_str()))
                .collect();
            let unconfirmed: Vec<&String> = removed.iter().filter(|o| !self.confirmed.contains(*o)).collect();
            if !unconfirmed.is_empty() {
                return Err(Problem::confirmation_required(
                    "This removes allowed origins: list every one of them in `confirmRemovedOrigins`.",
                )
                .with_detail("removedOrigins", removed.clone())
                .with_detail("unconfirmedOrigins", unconfirmed.into_iter().cloned().collect::<Vec<_>>()));
            }
            next.allowed_origins = origins.into_iter().map(Origin::into_string).collect();
        }
        let patch = self.rest;
        set(&mut next.show_branding, patch.show_branding);
        set(&mut next.default_language, patch.default_language);
        next.website = patch.website.apply(next.website);
        if let Some(appearance) = patch.appearance {
            merge_appearance(&mut next.appearance, appearance);
        }
        if let Some(behavior) = patch.behavior {
            merge_behavior(&mut next.behavior, behavior);
        }
        Ok(next)
    }
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

fn merge_appearance(a: &mut Appearance, p: AppearancePatch) {
    set(&mut a.headline, p.headline);
    set(&mut a.description, p.description);
    set(&mut a.welcome_message, p.welcome_message);
    set(&mut a.brand_color, p.brand_color);
    set(&mut a.theme, p.theme);
    set(&mut a.orientation, p.orientation);
    set(&mut a.logo_url, p.logo_url);
    set(&mut a.bubble_style, p.bubble_style);
    a.bubble_label = p.bubble_label.apply(a.bubble_label.take());
    set(&mut a.use_brand_color, p.use_brand_color);
}

fn merge_behavior(b: &mut Behavior, p: BehaviorPatch) {
    set(&mut b.instructions, p.instructions);
    set(&mut b.conversation_temperature, p.conversation_temperature);
    set(&mut b.conversation_creativity, p.conversation_creativity);
    if let Some(popup) = p.welcome_popup {
        set(&mut b.welcome_popup.enabled, popup.enabled);
        set(&mut b.welcome_popup.seconds, popup.seconds);
        set(&mut b.welcome_popup.message, popup.message);
    }
    if let Some(info) = p.collect_user_info {
        set(&mut b.collect_user_info.enabled, info.enabled);
        set(&mut b.collect_user_info.message, info.message);
    }
    if let Some(lead) = p.lead_capture {
        let l = &mut b.lead_capture;
        set(&mut l.enabled, lead.enabled);
        set(&mut l.contact_email, lead.contact_email);
        set(&mut l.calendar_link, lead.calendar_link);
        set(&mut l.phone_number, lead.phone_number);
        set(&mut l.custom_message, lead.custom_message);
        set(&mut l.email_notification_enabled, lead.email_notification_enabled);
    }
    set(&mut b.predefined_questions, p.predefined_questions);
}

/// An Agent of the caller's Workspace with its Public Chat and Widget state.
#[derive(Clone, Debug)]
pub struct AgentChat {
    pub agent_id: AgentId,
    pub agent_slug: String,
    pub enabled: bool,
    pub website: Option<String>,
    /// The effective configuration (stored, or the default).
    pub configuration: WidgetConfiguration,
}

impl From<ChatRow> for AgentChat {
    fn from(row: ChatRow) -> Self {
        let configuration =
            effective_configuration(row.configuration.map(|c| c.0), &row.agent_name, row.default_language.into());
        Self {
            agent_id: row.agent_id,
            agent_slug: row.agent_slug,
            enabled: row.enabled.unwrap_or(false),
            website: row.website,
            configuration,
        }
    }
}

/// A live Agent of `workspace` with its chat state; `None` when the Workspace
/// has no such Agent (another Workspace's included).
pub async fn agent_chat(conn: &mut PgConnection, workspace: WorkspaceId, agent: AgentId) -> Result<Option<AgentChat>> {
    Ok(store::chat::get(conn, workspace, agent).await?.map(Into::into))
}

/// Everything the public side needs about an Agent it knows only by id (the
/// answers endpoint and the chat page have no credential and no Workspace).
/// Whether to answer is the caller's decision: this reports the facts.
#[derive(Clone, Debug)]
pub struct PublicAgent {
    /// The Agent: its Workspace, name, language, instructions, temperature.
    pub agent: AgentRow,
    pub workspace_status: WorkspaceStatus,
    /// The Workspace's Entitlement (plan, limits), for `is_active` and quotas.
    pub entitlement: Entitlement,
    pub public_chat_enabled: bool,
    /// The Public Chat's website.
    pub website: Option<String>,
    /// The Widget's allowed origins, normalised (compare with `==` against
    /// [`Origin::parse`] of a request's `Origin` header).
    pub allowed_origins: Vec<Origin>,
    /// The effective Widget configuration.
    pub widget: WidgetConfiguration,
    /// Whether the Widget was configured (else `widget` is the default).
    pub widget_stored: bool,
}

impl PublicAgent {
    pub fn workspace_id(&self) -> WorkspaceId {
        self.agent.workspace_id
    }

    pub fn is_archived(&self) -> bool {
        self.workspace_status == WorkspaceStatus::Archived
    }

    /// Whether `origin` is exactly one of the Widget's allowed origins.
    pub fn allows_origin(&self, origin: &Origin) -> bool {
        self.allowed_origins.contains(origin)
    }

    /// Whether the public may be answered now: Public Chat enabled, the
    /// Workspace not archived and its Entitlement active.
    pub fn is_answering(&self, now: OffsetDateTime) -> bool {
        self.public_chat_enabled && !self.is_archived() && self.entitlement.is_active(now)
    }

    /// Whether a browser request with this `Origin` header may be answered: it
    /// comes from the Public Chat page (`chat_page_origin`, see
    /// [`chat_page_origin`]) or from an exact allowed Widget origin.
    pub fn admits(&self, origin: &str, chat_page_origin: &str) -> bool {
        if !origin.is_empty() && origin == chat_page_origin {
            return true;
        }
        // A browser sends the normalised form, so a header that does not parse,
        // or normalises to something else, is not the one allowed.
        Origin::parse(origin).is_ok_and(|o| o.as_str() == origin && self.allows_origin(&o))
    }
}

/// The origin of the Public Chat page, as a browser serialises it in `Origin`:
/// the public base URL's scheme, host and port (default port dropped).
pub fn chat_page_origin(base_url: &str) -> String {
    url::Url::parse(base_url).map(|url| url.origin().ascii_serialization()).unwrap_or_default()
}

/// The live Agent with this id, in whichever Workspace, with its Workspace's
/// status and Entitlement and its chat state, in one statement; `None` when no
/// live Agent has the id (deleted Agents included).
pub async fn public_agent(conn: &mut PgConnection, agent: AgentId) -> Result<Option<PublicAgent>> {
    let Some(row) = store::chat::find_public(conn, agent).await? else {
        return Ok(None);
    };
    let widget_stored = row.configuration.is_some();
    let widget =
        effective_configuration(row.configuration.map(|c| c.0), &row.agent.name, row.agent.default_language.into());
    // Stored origins were normalised when written; one that no longer parses
    // (a rule tightened since) is left out rather than trusted.
    let allowed_origins = widget.allowed_origins.iter().filter_map(|o| Origin::parse(o).ok()).collect();
    Ok(Some(PublicAgent {
        agent: row.agent,
        workspace_status: row.workspace_status.into(),
        entitlement: row.entitlement,
        public_chat_enabled: row.enabled.unwrap_or(false),
        website: row.website,
        allowed_origins,
        widget,
        widget_stored,
    }))
}

/// The Agent with this id if it answers the public now (see
/// [`PublicAgent::is_answering`]).
pub async fn answering_agent(conn: &mut PgConnection, agent: AgentId) -> Result<Option<PublicAgent>> {
    let now = OffsetDateTime::now_utc();
    Ok(public_agent(conn, agent).await?.filter(|agent| agent.is_answering(now)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patch(value: serde_json::Value) -> WidgetConfigurationPatch {
        serde_json::from_value(value).unwrap()
    }

    fn configured(current: WidgetConfiguration, value: serde_json::Value) -> Result<WidgetConfiguration, Problem> {
        CheckedPatch::new(patch(value))?.apply(current)
    }

    fn with_origins(origins: &[&str]) -> WidgetConfiguration {
        let mut c = default_configuration("Helper", Language::En);
        c.allowed_origins = origins.iter().map(|o| (*o).to_owned()).collect();
        c
    }

    #[test]
    fn an_empty_patch_changes_nothing() {
        let current = with_origins(&["https://a.example"]);
        assert_eq!(configured(current.clone(), json!({})).unwrap(), current);
    }

    #[test]
    fn nested_objects_merge_field_by_field() {
        let current = default_configuration("Helper", Language::Es);
        let next = configured(
            current.clone(),
            json!({ "appearance": { "theme": "dark" }, "behavior": { "welcomePopup": { "seconds": 12 } } }),
        )
        .unwrap();
        assert_eq!(next.appearance.theme, Theme::Dark);
        assert_eq!(next.appearance.headline, "Helper");
        assert_eq!(next.behavior.welcome_popup.seconds, 12.0);
        assert_eq!(next.behavior.welcome_popup.message, default_greeting(Language::Es));
        assert_eq!(next.behavior.lead_capture, current.behavior.lead_capture);
    }

    #[test]
    fn removals_need_every_removed_origin_confirmed() {
        let current = with_origins(&["https://a.example", "https://b.example", "https://c.example"]);
        let problem = configured(current.clone(), json!({ "allowedOrigins": ["https://a.example"] })).unwrap_err();
        assert_eq!(problem.code, svc_contract::ProblemCode::ConfirmationRequired);
        let details = problem.to_json()["details"].clone();
        assert_eq!(details["removedOrigins"], json!(["https://b.example", "https://c.example"]));
        let partial =
            json!({ "allowedOrigins": ["https://a.example"], "confirmRemovedOrigins": ["https://B.example:443"] });
        let problem = configured(current.clone(), partial).unwrap_err();
        assert_eq!(problem.to_json()["details"]["unconfirmedOrigins"], json!(["https://c.example"]));
        let complete = json!({
            "allowedOrigins": ["HTTPS://A.example"],
            "confirmRemovedOrigins": ["https://c.example", "https://b.example", "https://unrelated.example"],
        });
        assert_eq!(configured(current, complete).unwrap().allowed_origins, ["https://a.example"]);
    }

    #[test]
    fn equal_origins_after_normalising_are_one() {
        let next = configured(
            with_origins(&[]),
            json!({ "allowedOrigins": ["https://A.example", "https://a.example:443", "http://localhost:3000"] }),
        )
        .unwrap();
        assert_eq!(next.allowed_origins, ["https://a.example", "http://localhost:3000"]);
        // Re-stating an origin in another writing removes nothing.
        assert!(configured(next, json!({ "allowedOrigins": ["HTTPS://a.EXAMPLE", "http://LOCALHOST:3000"] })).is_ok());
    }

    #[test]
    fn urls() {
        assert_eq!(
            public_chat_url("https://svc.example/", AgentId(uuid::Uuid::nil())),
            "https://svc.example/chat/agt_00000000000000000000000000"
        );
        let problem = configured(with_origins(&[]), json!({ "appearance": { "logoUrl": "logo.png" } })).unwrap_err();
        assert_eq!(problem.to_json()["details"]["path"], "/configuration/appearance/logoUrl");
        assert!(configured(with_origins(&[]), json!({ "appearance": { "logoUrl": "" } })).is_ok());
    }
}
