//! Which credential a call presents (contract §14), first found wins:
//! `SVC_API_KEY`, the profile's API key, the profile's User session (refreshed
//! when its access token has expired).

use std::time::{SystemTime, UNIX_EPOCH};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use svc_contract::{Problem, ProblemCode};

use crate::config::{api_key_account, session_account};
use crate::context::Context;
use crate::outcome::Failure;
use crate::secrets::Location;

/// Refresh this long before the access token expires, so it is still good when
/// the request arrives.
const EXPIRY_MARGIN_SECS: u64 = 5;

/// A bearer credential and where it came from.
pub struct Credential {
    pub bearer: SecretString,
    pub location: Location,
}

/// A User session as kept in the credential store: both tokens are secrets, so
/// the whole record is one secret. No `Debug`, so it cannot be printed by mistake.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    pub issuer: String,
    pub client_id: String,
    pub token_endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
}

/// The answer of an OAuth token endpoint (RFC 6749 §5.1).
#[derive(Deserialize)]
pub struct TokenAnswer {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub expires_in: Option<u64>,
}

pub fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Session {
    /// A session from a token answer; a refresh that returns no new refresh token
    /// keeps the old one.
    pub fn from_answer(answer: TokenAnswer, previous_refresh: Option<String>, template: SessionOrigin) -> Self {
        Self {
            access_token: answer.access_token,
            refresh_token: answer.refresh_token.or(previous_refresh),
            expires_at: answer.expires_in.map(|s| now_secs() + s),
            issuer: template.issuer,
            client_id: template.client_id,
            token_endpoint: template.token_endpoint,
            revocation_endpoint: template.revocation_endpoint,
        }
    }

    fn origin(&self) -> SessionOrigin {
        SessionOrigin {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            token_endpoint: self.token_endpoint.clone(),
            revocation_endpoint: self.revocation_endpoint.clone(),
        }
    }

    fn is_expiring(&self) -> bool {
        self.expires_at.is_some_and(|at| now_secs() + EXPIRY_MARGIN_SECS >= at)
    }

    pub fn encode(&self) -> Result<String, Failure> {
        serde_json::to_string(self).map_err(|e| Failure::transport(format!("Cannot encode the session: {e}")))
    }
}

/// Where a session's tokens come from and go to.
pub struct SessionOrigin {
    pub issuer: String,
    pub client_id: String,
    pub token_endpoint: String,
    pub revocation_endpoint: Option<String>,
}

/// A credential the client could present, in the order it looks for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `SVC_API_KEY`.
    Environment,
    /// The API key a profile saved with `--save-as`.
    ProfileApiKey(String),
    /// The User session of a profile (`svc auth login`).
    ProfileSession(String),
}

impl Source {
    /// What it is, in words a user recognises.
    pub fn describe(&self) -> String {
        match self {
            Self::Environment => "SVC_API_KEY from the environment".into(),
            Self::ProfileApiKey(profile) => format!("the API key of profile {profile} (saved with --save-as)"),
            Self::ProfileSession(profile) => format!("the session of profile {profile} (svc auth login)"),
        }
    }

    /// How to make the client use this one instead of `used`.
    fn how_to_prefer(&self, used: &Self) -> &'static str {
        match used {
            Self::Environment => "unset SVC_API_KEY to use it",
            Self::ProfileApiKey(_) if matches!(self, Self::ProfileSession(_)) => {
                "use a profile without an API key (svc profile select --name NAME) to use it"
            }
            _ => "",
        }
    }
}

/// Every credential available to the next call, first the one it uses
/// (contract §14: `SVC_API_KEY`, the profile's API key, its session). Nothing
/// is read from the credential store: this says only where they would come from.
pub fn sources(ctx: &Context) -> Result<Vec<Source>, Failure> {
    let profile = ctx.profile()?;
    let mut found = Vec::new();
    if ctx.env.api_key.is_some() {
        found.push(Source::Environment);
    }
    if profile.api_key.is_some() {
        found.push(Source::ProfileApiKey(ctx.profile_name.clone()));
    }
    if profile.session.is_some() {
        found.push(Source::ProfileSession(ctx.profile_name.clone()));
    }
    Ok(found)
}

/// Lines saying which credential a call used and which it ignored, so a
/// session shadowed by `SVC_API_KEY` is never a surprise.
pub fn precedence_note(ctx: &Context) -> String {
    let Ok(sources) = sources(ctx) else {
        return String::new();
    };
    let Some((used, ignored)) = sources.split_first() else {
        return String::new();
    };
    let mut note = format!("Credential used: {}\n", used.describe());
    for other in ignored {
        let hint = other.how_to_prefer(used);
        let hint = if hint.is_empty() { String::new() } else { format!("; {hint}") };
        note.push_str(&format!("Ignored: {}, which comes after it{hint}\n", other.describe()));
    }
    note
}

/// The credential for the next call.
pub fn resolve(ctx: &mut Context) -> Result<Credential, Failure> {
    if let Some(key) = &ctx.env.api_key {
        return Ok(Credential { bearer: key.clone(), location: Location::Environment });
    }
    let profile = ctx.profile()?;
    if let Some(stored) = &profile.api_key {
        let key = ctx.secrets.load(stored.location, &api_key_account(&ctx.profile_name))?.ok_or_else(|| {
            Failure::authentication(
                "credential_missing",
                format!(
                    "The API key of profile {:?} is no longer in the credential store (the Linux kernel keyring forgets at reboot); save it again with --save-as.",
                    ctx.profile_name
                ),
            )
        })?;
        return Ok(Credential { bearer: key, location: stored.location });
    }
    if let Some(stored) = &profile.session {
        let session = load_session(ctx, stored.location)?;
        return session_credential(ctx, session, stored.location);
    }
    Err(Failure::authentication(
        "missing_credential",
        "No credential: set SVC_API_KEY, run `svc auth login`, or use a profile saved with --save-as.",
    ))
}

/// A session's access token as a credential, renewed first when it has
/// expired or is about to (and a refresh token is there to renew it).
pub fn session_credential(ctx: &mut Context, session: Session, location: Location) -> Result<Credential, Failure> {
    let session =
        if session.is_expiring() && session.refresh_token.is_some() { refresh(ctx, session)? } else { session };
    Ok(Credential { bearer: session.access_token.into(), location })
}

pub fn load_session(ctx: &Context, location: Location) -> Result<Session, Failure> {
    let secret = ctx
        .secrets
        .load(location, &session_account(&ctx.profile_name))?
        .ok_or_else(|| reauthentication("The session is no longer in the credential store; run `svc auth login`."))?;
    serde_json::from_str(secret.expose_secret())
        .map_err(|_| reauthentication("The stored session is unreadable; run `svc auth login`."))
}

/// Stores a session for the profile in use and records where it went.
pub fn save_session(ctx: &mut Context, session: &Session) -> Result<Location, Failure> {
    let location = ctx.secrets.save(&session_account(&ctx.profile_name), &session.encode()?)?;
    let stored = crate::config::StoredSecret { location, key_prefix: None };
    if ctx.profile().ok().and_then(|p| p.session) != Some(stored.clone()) {
        ctx.update_profile(|profile| profile.session = Some(stored))?;
    }
    Ok(location)
}

/// Trades the refresh token for a new access token (RFC 6749 §6) and stores the
/// result, the rotated refresh token included.
fn refresh(ctx: &mut Context, session: Session) -> Result<Session, Failure> {
    let Some(refresh_token) = session.refresh_token.clone() else {
        return Ok(session);
    };
    let answer = ctx.http.post_form(
        &session.token_endpoint,
        &[("grant_type", "refresh_token"), ("refresh_token", &refresh_token), ("client_id", &session.client_id)],
    )?;
    if !answer.is_success() {
        return Err(reauthentication("The session has expired and could not be renewed; run `svc auth login`."));
    }
    let tokens: TokenAnswer = serde_json::from_value(answer.body)
        .map_err(|_| Failure::transport("The identity provider answered the refresh without an access token."))?;
    let renewed = Session::from_answer(tokens, Some(refresh_token), session.origin());
    save_session(ctx, &renewed)?;
    Ok(renewed)
}

fn reauthentication(message: &'static str) -> Failure {
    Failure::local(Problem::new(ProblemCode::ReauthenticationRequired, message))
}
