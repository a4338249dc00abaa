//! Who is calling: bearer credentials, User sessions and Workspace API keys.

pub mod api_key;
pub mod callers;
pub mod jwks;
pub mod jwt;
pub mod relying_party;

use svc_contract::{Problem, ProblemCode};

/// A bearer credential as presented, before it is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential<'a> {
    /// A Workspace API key (`svck_...`).
    ApiKey(&'a str),
    /// Anything else is treated as a JWT access token.
    Jwt(&'a str),
}

impl<'a> Credential<'a> {
    /// The credential as presented.
    pub fn text(&self) -> &'a str {
        match *self {
            Self::ApiKey(text) | Self::Jwt(text) => text,
        }
    }
}

/// The prefix of every Workspace API key.
pub const API_KEY_PREFIX: &str = "svck_";

fn missing() -> Problem {
    Problem::new(
        ProblemCode::AuthenticationRequired,
        "Authentication is required: send `Authorization: Bearer <credential>`.",
    )
    .with_detail("reason", "missing_credential")
}

/// Reads an `Authorization` header value. A missing header, another scheme, an
/// empty token or an unexpanded placeholder (`${SVC_API_KEY}`) is
/// `authentication_required`.
pub fn parse_bearer(header: Option<&str>) -> Result<Credential<'_>, Problem> {
    let header = header.ok_or_else(missing)?;
    let (scheme, token) = header.split_once(' ').ok_or_else(missing)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(missing());
    }
    if token.starts_with("${") || token.starts_with('$') {
        return Err(Problem::new(
            ProblemCode::AuthenticationRequired,
            "The credential is an unexpanded placeholder; set the environment variable it names.",
        )
        .with_detail("reason", "unexpanded_placeholder"));
    }
    Ok(if token.starts_with(API_KEY_PREFIX) { Credential::ApiKey(token) } else { Credential::Jwt(token) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing() {
        assert_eq!(parse_bearer(Some("Bearer svck_abc")), Ok(Credential::ApiKey("svck_abc")));
        assert_eq!(parse_bearer(Some("bearer eyJ.x.y")), Ok(Credential::Jwt("eyJ.x.y")));
        for bad in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer "),
            Some("Basic abc"),
            Some("Bearer ${SVC_API_KEY}"),
            Some("Bearer $SVC_API_KEY"),
        ] {
            assert_eq!(parse_bearer(bad).unwrap_err().code, ProblemCode::AuthenticationRequired, "{bad:?}");
        }
    }
}
