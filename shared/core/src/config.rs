//! What the domain needs to know about its deployment. The binaries read the
//! environment once into their own typed config and build this from it.

use std::path::PathBuf;
use std::time::Duration;

/// Where the signing keys of the identity provider come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    /// A local JWKS JSON file (`SVC_OIDC_JWKS_FILE`).
    File(PathBuf),
    /// `{issuer}/.well-known/openid-configuration` and its `jwks_uri`.
    Discovery,
    /// A JWKS JSON document handed over in memory: the keys of the API's
    /// built-in development issuer (`--dev-idp`), fixed while the process runs.
    Document(String),
}

/// The OpenID Connect issuer whose access tokens are User sessions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OidcConfig {
    pub issuer: String,
    pub audience: String,
    pub jwks: JwksSource,
}

#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// `{base_url}`: the address clients reach this service at, without a trailing slash.
    pub public_base_url: String,
    /// `None` disables User sessions (only Workspace API keys authenticate).
    pub oidc: Option<OidcConfig>,
    /// Longest wait of a limit-consuming write for its Workspace's turn.
    pub gate_wait: Duration,
    /// Places at one Workspace's gate in a process (see `gates`).
    pub workspace_writes: usize,
    /// Limit-consuming writes of all Workspaces that run at once in a process.
    pub gated_writes: usize,
    /// How many `knowledge_source.wait` answers the process keeps (0: none).
    pub wait_cache_entries: usize,
    /// The longest a kept answer is used (see `knowledge::waits`).
    pub wait_cache_max_age: Duration,
    /// How many authenticated callers the process keeps (0: none).
    pub caller_cache_entries: usize,
    /// The longest a kept caller is used (see `auth::callers`).
    pub caller_cache_max_age: Duration,
    /// How long after it came from the pool a connection may go from
    /// request to request (`runtime::warm`, at most a second; zero: never).
    pub warm: Duration,
}

impl CoreConfig {
    pub fn new(public_base_url: impl Into<String>, oidc: Option<OidcConfig>) -> Self {
        let mut public_base_url = public_base_url.into();
        while public_base_url.ends_with('/') {
            public_base_url.pop();
        }
        Self {
            public_base_url,
            oidc,
            gate_wait: Duration::from_secs(10),
            workspace_writes: 8,
            gated_writes: 12,
            wait_cache_entries: 0,
            wait_cache_max_age: Duration::from_secs(1),
            caller_cache_entries: 0,
            caller_cache_max_age: Duration::from_secs(1),
            warm: crate::runtime::warm::FRESH,
        }
    }
}
