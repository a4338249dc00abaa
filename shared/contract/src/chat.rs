//! Public Chat and the embeddable Widget: configuration as returned, the partial
//! shape `widget.configure` accepts, and the integration manifest.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resources::Language;
use crate::schema::not_null;

/// Largest `allowedOrigins`.
pub const MAX_ALLOWED_ORIGINS: usize = 50;
/// Pattern of a brand colour.
pub const BRAND_COLOR_PATTERN: &str = "^#[0-9a-fA-F]{6}$";

/// A port of 1 to 65535, in at most 5 digits (leading zeros allowed).
macro_rules! port_1_to_65535 {
    () => {
        "(?:0{0,4}[1-9]|0{0,3}[1-9][0-9]|0{0,2}[1-9][0-9]{2}|0?[1-9][0-9]{3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
    };
}

/// Characters of a URI's path, query or fragment (RFC 3986), or a
/// percent-encoded octet.
macro_rules! uri_characters {
    () => {
        r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*"
    };
}

/// Pattern of a web address a tenant gives (`website`, `logoUrl`; contract
/// §12), declared with `format: uri`: `http://` or `https://` (any case), a
/// host of letters, digits, `.`, `_`, `~` and `-` (an international domain in
/// its `xn--` form) or a bracketed IPv6 address, a port of 1 to 65535, then
/// URI characters only: no user name or password, no whitespace, nothing a
/// URI must percent-encode. The server also parses the host as the URL
/// standard does, which no pattern states (e.g. `1.2.3.4.5`).
pub const URL_PATTERN: &str = concat!(
    r"^[Hh][Tt][Tt][Pp][Ss]?://(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::",
    port_1_to_65535!(),
    // `(?:/|\?)` rather than `[/?]`: the API reference's link check reads
    // `](` as a Markdown link.
    r")?(?:(?:/|\?)",
    uri_characters!(),
    r")?(?:#",
    uri_characters!(),
    r")?$"
);

/// Characters of a host name beyond ASCII (an international name as written):
/// anything but controls and whitespace.
macro_rules! non_ascii {
    () => {
        r"[^\x00-\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]"
    };
}

/// A host name: non-empty labels of letters, digits, `_` and `-`, the last
/// one not all digits. (Where a `-` may stand depends on IDNA: `épa-` is a
/// good label, `pa-` is not; the server checks that.)
macro_rules! host_name {
    () => {
        concat!(
            r"(?:(?:[A-Za-z0-9_-]|",
            non_ascii!(),
            r")+\.)*",
            r"(?:[A-Za-z0-9_-]|",
            non_ascii!(),
            r")*",
            r"(?:[A-Za-z_-]|",
            non_ascii!(),
            r")",
            r"(?:[A-Za-z0-9_-]|",
            non_ascii!(),
            r")*"
        )
    };
}

/// A dotted-decimal IPv4 address.
macro_rules! ipv4 {
    () => {
        r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
    };
}

/// Pattern of a Widget origin (contract §12): `https://host[:port]`, or
/// `http://` for `localhost` and `127.0.0.1`; no path, not even `/`. A host is
/// a name (labels of letters, digits, `_` and `-`, the last not all digits;
/// an international one as written or in its `xn--` form), a dotted-decimal
/// IPv4 address or a bracketed IPv6 address. The server also checks what no
/// pattern states: IDNA (and with it where a `-` may stand), the lengths of
/// labels and names, the groups of an IPv6 address.
pub const ORIGIN_PATTERN: &str = concat!(
    r"^(?:[Hh][Tt][Tt][Pp][Ss]://(?:",
    host_name!(),
    "|",
    ipv4!(),
    r"|\[[0-9A-Fa-f:.]+\])",
    r"|[Hh][Tt][Tt][Pp]://(?:[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]|127\.0\.0\.1))(?::",
    port_1_to_65535!(),
    r")?$"
);

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PublicChat {
    pub agent_id: String,
    pub enabled: bool,
    /// Stable public address of the chat page.
    #[schemars(url)]
    pub url: String,
    pub website: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Theme {
    Light,
    Dark,
    Auto,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Orientation {
    Left,
    Right,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BubbleStyle {
    Icon,
    Pill,
}

/// The effective, canonical Widget configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WidgetConfiguration {
    /// Exact origins (`scheme://host[:port]`) the Widget may be embedded on.
    #[schemars(length(max = 50))]
    pub allowed_origins: Vec<String>,
    /// Read-only: domains imported from legacy settings.
    #[schemars(inner(length(min = 1)))]
    pub legacy_allowed_domains: Vec<String>,
    /// Read-only: legacy settings allowed any origin.
    pub legacy_allows_any_origin: bool,
    pub show_branding: bool,
    pub default_language: Language,
    pub website: Option<String>,
    pub appearance: Appearance,
    pub behavior: Behavior,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Appearance {
    pub headline: String,
    pub description: String,
    pub welcome_message: String,
    #[schemars(regex(pattern = BRAND_COLOR_PATTERN))]
    pub brand_color: String,
    pub theme: Theme,
    pub orientation: Orientation,
    pub logo_url: String,
    pub bubble_style: BubbleStyle,
    pub bubble_label: Option<String>,
    pub use_brand_color: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Behavior {
    pub instructions: String,
    #[schemars(range(min = 0, max = 1))]
    pub conversation_temperature: f64,
    #[schemars(range(min = 0, max = 1))]
    pub conversation_creativity: f64,
    pub welcome_popup: WelcomePopup,
    pub collect_user_info: CollectUserInfo,
    pub lead_capture: LeadCapture,
    #[schemars(length(max = 4))]
    pub predefined_questions: Vec<PredefinedQuestion>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WelcomePopup {
    pub enabled: bool,
    #[schemars(range(min = 0, max = 30))]
    pub seconds: f64,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CollectUserInfo {
    pub enabled: bool,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeadCapture {
    pub enabled: bool,
    /// An e-mail address, or empty.
    #[schemars(extend("anyOf" = [{ "format": "email" }, { "const": "" }]))]
    pub contact_email: String,
    /// A URI, or empty.
    #[schemars(extend("anyOf" = [{ "format": "uri" }, { "const": "" }]))]
    pub calendar_link: String,
    pub phone_number: String,
    pub custom_message: String,
    pub email_notification_enabled: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PredefinedQuestion {
    #[schemars(length(min = 1))]
    pub question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = not_null)]
    pub order: Option<f64>,
}

/// The partial configuration `widget.configure` merges into the stored one.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WidgetConfigurationPatch {
    /// The complete new list of allowed origins.
    #[serde(default)]
    #[schemars(transform = not_null, length(max = 50), inner(regex(pattern = ORIGIN_PATTERN)))]
    pub allowed_origins: Option<Vec<String>>,
    /// Origins whose removal by this call the caller confirms.
    #[serde(default)]
    #[schemars(transform = not_null, inner(length(min = 1), regex(pattern = ORIGIN_PATTERN)))]
    pub confirm_removed_origins: Option<Vec<String>>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub show_branding: Option<bool>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub default_language: Option<Language>,
    /// An absolute `http`/`https` URL, or `null` to clear it.
    #[serde(default)]
    #[schemars(length(min = 1, max = 2000), url, regex(pattern = URL_PATTERN))]
    pub website: crate::patch::Patch<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub appearance: Option<AppearancePatch>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub behavior: Option<BehaviorPatch>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppearancePatch {
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub headline: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub description: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub welcome_message: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null, regex(pattern = BRAND_COLOR_PATTERN))]
    pub brand_color: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub theme: Option<Theme>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub orientation: Option<Orientation>,
    /// An absolute `http`/`https` URL, or empty for no logo.
    #[serde(default)]
    #[schemars(transform = not_null, length(max = 2000), extend("anyOf" = [{ "const": "" }, { "format": "uri", "pattern": URL_PATTERN }]))]
    pub logo_url: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub bubble_style: Option<BubbleStyle>,
    #[serde(default)]
    pub bubble_label: crate::patch::Patch<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub use_brand_color: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BehaviorPatch {
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub instructions: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null, range(min = 0, max = 1))]
    pub conversation_temperature: Option<f64>,
    #[serde(default)]
    #[schemars(transform = not_null, range(min = 0, max = 1))]
    pub conversation_creativity: Option<f64>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub welcome_popup: Option<WelcomePopupPatch>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub collect_user_info: Option<CollectUserInfoPatch>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub lead_capture: Option<LeadCapturePatch>,
    /// The complete new list of suggested questions.
    #[serde(default)]
    #[schemars(transform = not_null, length(max = 4))]
    pub predefined_questions: Option<Vec<PredefinedQuestion>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WelcomePopupPatch {
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub enabled: Option<bool>,
    #[serde(default)]
    #[schemars(transform = not_null, range(min = 0, max = 30))]
    pub seconds: Option<f64>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub message: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CollectUserInfoPatch {
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub enabled: Option<bool>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub message: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeadCapturePatch {
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub enabled: Option<bool>,
    #[serde(default)]
    #[schemars(transform = not_null, extend("anyOf" = [{ "format": "email" }, { "const": "" }]))]
    pub contact_email: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null, extend("anyOf" = [{ "format": "uri" }, { "const": "" }]))]
    pub calendar_link: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub phone_number: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub custom_message: Option<String>,
    #[serde(default)]
    #[schemars(transform = not_null)]
    pub email_notification_enabled: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ManifestRef {
    pub id: String,
    pub slug: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WidgetPackage {
    #[schemars(extend("const" = "svc-widget-react"))]
    pub package_name: &'static str,
    #[schemars(extend("const" = "2.0.5"))]
    pub version: &'static str,
    #[schemars(extend("const" = "SvcChat"))]
    pub component: &'static str,
    #[schemars(extend("const" = "embedId"))]
    pub agent_id_prop: &'static str,
}

impl WidgetPackage {
    pub const CURRENT: WidgetPackage = WidgetPackage {
        package_name: "svc-widget-react",
        version: "2.0.5",
        component: "SvcChat",
        agent_id_prop: "embedId",
    };
}

/// Everything a page needs to embed the Widget; no secrets. The Widget's
/// `baseUrl` is `publicChat.url` without its `/chat/{agentId}`: the spec
/// lists exactly these five fields.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WidgetManifest {
    pub workspace: ManifestRef,
    pub agent: ManifestRef,
    pub package: WidgetPackage,
    pub configuration: WidgetConfiguration,
    pub public_chat: PublicChat,
}

/// What `GET {base_url}/api/public/chat/{agentId}/widget` answers (contract
/// §12; not a catalog operation): the parts of the Widget configuration a
/// visitor sees. Never its instructions, temperatures, origins or website.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PublicWidget {
    pub agent_id: String,
    pub default_language: Language,
    pub show_branding: bool,
    pub appearance: Appearance,
    pub welcome_popup: WelcomePopup,
    #[schemars(length(max = 4))]
    pub predefined_questions: Vec<PredefinedQuestion>,
    pub collect_user_info: CollectUserInfo,
    pub lead_capture: PublicLeadCapture,
}

/// The lead-capture details a visitor is shown (the notification switch is
/// the Workspace's business).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PublicLeadCapture {
    pub enabled: bool,
    pub contact_email: String,
    pub calendar_link: String,
    pub phone_number: String,
    pub custom_message: String,
}

impl PublicWidget {
    /// The public parts of `configuration`, the Widget of Agent `agent_id`.
    pub fn of(agent_id: String, configuration: &WidgetConfiguration) -> Self {
        let behavior = &configuration.behavior;
        let lead = &behavior.lead_capture;
        Self {
            agent_id,
            default_language: configuration.default_language,
            show_branding: configuration.show_branding,
            appearance: configuration.appearance.clone(),
            welcome_popup: behavior.welcome_popup.clone(),
            predefined_questions: behavior.predefined_questions.clone(),
            collect_user_info: behavior.collect_user_info.clone(),
            lead_capture: PublicLeadCapture {
                enabled: lead.enabled,
                contact_email: lead.contact_email.clone(),
                calendar_link: lead.calendar_link.clone(),
                phone_number: lead.phone_number.clone(),
                custom_message: lead.custom_message.clone(),
            },
        }
    }
}

/// Longest question the public may ask, in characters (as `widget.verify`).
pub const MAX_PUBLIC_QUESTION_CHARS: usize = 2000;

/// The body of `POST {base_url}/api/public/chat/{agentId}/answers` (contract
/// §12; not a catalog operation).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PublicQuestion {
    #[schemars(length(min = 1, max = 2000))]
    pub question: String,
    /// The conversation this question continues, as an earlier answer gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
}

/// What the answers endpoint answers.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PublicAnswer {
    pub answer: String,
    pub conversation_id: String,
    /// The sources the answer drew on, best first, at most 5; empty when
    /// nothing matched.
    pub sources: Vec<AnswerSource>,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AnswerSource {
    pub source_id: String,
    pub title: String,
    pub uri: String,
}
