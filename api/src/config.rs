//! The API process's configuration: read once from flags or the environment.
//! `svc-api serve --help` lists every setting with its variable and default.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use svc_core::answers::{Llm, Meaning};
use svc_core::embeddings::EmbeddingsArgs;
use svc_core::openai::EndpointConfig;
use svc_core::runtime::Timeouts;
use svc_core::{CoreConfig, JwksSource, OidcConfig};

use crate::body::BodyPolicy;

// Defaults of the settings, shared by the flags and `Default`.
pub const DEFAULT_DATABASE_URL: &str = "postgres://localhost/svc";
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
pub const DEFAULT_QUEUE_NAMESPACE: &str = "svc";
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;
pub const DEFAULT_STATEMENT_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_LOCK_TIMEOUT_MS: u64 = 5_000;
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 20;
pub const DEFAULT_HEADER_READ_TIMEOUT_SECS: u64 = 30;
pub const DEFAULT_BODY_READ_TIMEOUT_SECS: u64 = 30;
pub const DEFAULT_LARGE_BODY_BUDGET_MIB: u64 = 1024;
pub const DEFAULT_LARGE_BODY_WAIT_SECS: u64 = 10;
pub const DEFAULT_WORKSPACE_TURN_WAIT_SECS: u64 = 10;
pub const DEFAULT_WORKSPACE_WRITES: usize = 8;
pub const DEFAULT_LLM_TIMEOUT_SECS: u64 = 20;
/// 256 MiB keeps the vectors of about a million passages (256 bytes each, plus
/// 4 of scale).
pub const DEFAULT_VECTOR_CACHE_MB: usize = 256;
pub const DEFAULT_PUBLIC_ANSWERS_PER_MINUTE: u32 = 30;
pub const DEFAULT_WAIT_CACHE_ENTRIES: usize = 10_000;
pub const DEFAULT_WAIT_CACHE_MAX_AGE_MS: u64 = 1_000;
pub const DEFAULT_CALLER_CACHE_ENTRIES: usize = 10_000;
pub const DEFAULT_CALLER_CACHE_MAX_AGE_MS: u64 = 1_000;
/// The core's own default (`svc_core::runtime::warm::FRESH`), in milliseconds.
pub const DEFAULT_DB_WARM_MS: u64 = svc_core::runtime::warm::FRESH.as_millis() as u64;
pub const DEFAULT_DEV_ENV_FILE: &str = ".svc-dev.env";
/// The client id the development identity provider knows when `SVC_OIDC_CLIENT_ID` is unset.
pub const DEFAULT_DEV_CLIENT_ID: &str = "svc-cli";

/// Where the database is (shared by every subcommand).
#[derive(Clone, Debug, clap::Args)]
pub struct DatabaseArgs {
    /// PostgreSQL connection URL.
    #[arg(
        long = "database-url",
        env = "DATABASE_URL",
        default_value = DEFAULT_DATABASE_URL,
        hide_env_values = true
    )]
    pub database_url: SecretString,
    /// Most connections the pool opens.
    #[arg(long, env = "SVC_DATABASE_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub database_max_connections: u32,
    /// Longest SQL statement, in milliseconds (PostgreSQL `statement_timeout`).
    #[arg(long, env = "SVC_DB_STATEMENT_TIMEOUT_MS", default_value_t = DEFAULT_STATEMENT_TIMEOUT_MS)]
    pub db_statement_timeout_ms: u64,
    /// Longest wait for a row lock, in milliseconds (PostgreSQL `lock_timeout`).
    #[arg(long, env = "SVC_DB_LOCK_TIMEOUT_MS", default_value_t = DEFAULT_LOCK_TIMEOUT_MS)]
    pub db_lock_timeout_ms: u64,
}

#[derive(Clone, Debug, clap::Args)]
pub struct ServeConfig {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Redis URL (database index honoured); `/readyz` checks it.
    #[arg(long = "redis-url", env = "REDIS_URL", default_value = DEFAULT_REDIS_URL, hide_env_values = true)]
    pub redis_url: SecretString,
    /// Prefix of every job-queue key in Redis: deployments (or test runs)
    /// sharing a Redis use different ones.
    #[arg(long, env = "SVC_QUEUE_NAMESPACE", default_value = DEFAULT_QUEUE_NAMESPACE)]
    pub queue_namespace: String,
    /// Address to listen on.
    #[arg(long, env = "SVC_BIND", default_value = DEFAULT_BIND)]
    pub bind: SocketAddr,
    /// Base URL clients reach the service at; defaults to `http://{SVC_BIND}`.
    #[arg(long, env = "SVC_PUBLIC_BASE_URL")]
    pub public_base_url: Option<String>,
    /// OpenID Connect issuer of User access tokens. Without it only API keys authenticate.
    #[arg(long, env = "SVC_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// Audience (`aud`) access tokens must carry.
    #[arg(long, env = "SVC_OIDC_AUDIENCE")]
    pub oidc_audience: Option<String>,
    /// A local JWKS file with the issuer's keys; without it keys are discovered
    /// from `{issuer}/.well-known/openid-configuration`.
    #[arg(long, env = "SVC_OIDC_JWKS_FILE")]
    pub oidc_jwks_file: Option<PathBuf>,
    /// OAuth client id the command-line client signs in with (published in client-config).
    #[arg(long, env = "SVC_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// OAuth scopes the client requests (comma-separated).
    #[arg(long, env = "SVC_OIDC_SCOPES", value_delimiter = ',', default_value = "openid,profile,email,offline_access")]
    pub oidc_scopes: Vec<String>,
    /// OAuth client id of the web application at `/account` (sign-up and
    /// setup); defaults to `SVC_OIDC_CLIENT_ID`.
    #[arg(long, env = "SVC_ACCOUNT_CLIENT_ID")]
    pub account_client_id: Option<String>,
    /// Its client secret, where the provider wants a confidential client
    /// (sent as `client_secret_basic`); unset: a public client with PKCE.
    #[arg(long, env = "SVC_ACCOUNT_CLIENT_SECRET", hide_env_values = true)]
    pub account_client_secret: Option<SecretString>,
    /// Its redirect URI, registered at the provider; defaults to
    /// `{base_url}/account/callback`.
    #[arg(long, env = "SVC_ACCOUNT_REDIRECT_URI")]
    pub account_redirect_uri: Option<String>,
    /// Seconds in-flight requests get to finish after SIGTERM.
    #[arg(long, env = "SVC_SHUTDOWN_GRACE_SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS)]
    pub shutdown_grace_secs: u64,
    /// Seconds a request head may take to arrive (also how long an idle
    /// keep-alive connection stays open).
    #[arg(long, env = "SVC_HEADER_READ_TIMEOUT_SECS", default_value_t = DEFAULT_HEADER_READ_TIMEOUT_SECS)]
    pub header_read_timeout_secs: u64,
    /// Seconds a request body may take to arrive, plus one per MiB of its size.
    #[arg(long, env = "SVC_BODY_READ_TIMEOUT_SECS", default_value_t = DEFAULT_BODY_READ_TIMEOUT_SECS)]
    pub body_read_timeout_secs: u64,
    /// MiB of memory large request bodies (over 1 MiB) may take at once; a body
    /// is counted at three times its size. Past it, requests wait for room.
    #[arg(long, env = "SVC_LARGE_BODY_BUDGET_MIB", default_value_t = DEFAULT_LARGE_BODY_BUDGET_MIB)]
    pub large_body_budget_mib: u64,
    /// Seconds a large body waits for room before 503 with `Retry-After`.
    #[arg(long, env = "SVC_LARGE_BODY_WAIT_SECS", default_value_t = DEFAULT_LARGE_BODY_WAIT_SECS)]
    pub large_body_wait_secs: u64,
    /// Seconds a limit-consuming write (agent.create, knowledge_source.add, ...)
    /// waits for its Workspace's turn before 503 with `Retry-After`.
    #[arg(long, env = "SVC_WORKSPACE_TURN_WAIT_SECS", default_value_t = DEFAULT_WORKSPACE_TURN_WAIT_SECS)]
    pub workspace_turn_wait_secs: u64,
    /// Places at a Workspace's gate in this process: a source's add takes one,
    /// any other limit-consuming write two, and each write inside holds a pooled
    /// connection; at most half of `SVC_DATABASE_MAX_CONNECTIONS` is used, so
    /// one Workspace cannot take the pool.
    #[arg(long, env = "SVC_WORKSPACE_WRITES", default_value_t = DEFAULT_WORKSPACE_WRITES)]
    pub workspace_writes: usize,
    /// Sources still being processed whose `knowledge_source.wait` answer this
    /// process keeps until PostgreSQL says they changed (0: every wait reads
    /// PostgreSQL).
    #[arg(long, env = "SVC_WAIT_CACHE_ENTRIES", default_value_t = DEFAULT_WAIT_CACHE_ENTRIES)]
    pub wait_cache_entries: usize,
    /// Milliseconds a kept answer is used at most: how late `wait` can be
    /// should PostgreSQL's notifications stop without the connection failing.
    #[arg(long, env = "SVC_WAIT_CACHE_MAX_AGE_MS", default_value_t = DEFAULT_WAIT_CACHE_MAX_AGE_MS)]
    pub wait_cache_max_age_ms: u64,
    /// Authenticated callers (credential and Workspace header, kept by their
    /// SHA-256) this process keeps until PostgreSQL says a key, User,
    /// membership or Workspace changed (0: every request authenticates from
    /// PostgreSQL).
    #[arg(long, env = "SVC_CALLER_CACHE_ENTRIES", default_value_t = DEFAULT_CALLER_CACHE_ENTRIES)]
    pub caller_cache_entries: usize,
    /// Milliseconds a kept caller is used at most: how long a revoked
    /// credential can still work should PostgreSQL's notifications stop
    /// without the connection failing.
    #[arg(long, env = "SVC_CALLER_CACHE_MAX_AGE_MS", default_value_t = DEFAULT_CALLER_CACHE_MAX_AGE_MS)]
    pub caller_cache_max_age_ms: u64,
    /// Milliseconds after it came from the pool that a connection may go
    /// from request to request instead of back to the pool (at most 1,000;
    /// 0: never; see `svc_core::runtime::warm`).
    #[arg(long, env = "SVC_DB_WARM_MS", default_value_t = DEFAULT_DB_WARM_MS)]
    pub db_warm_ms: u64,
    /// Base URL of an OpenAI-compatible API (up to where `chat/completions`
    /// lives, e.g. `https://api.openai.com/v1`). Unset: extractive answers.
    #[arg(long, env = "SVC_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,
    /// Model of chat completions (required with the base URL).
    #[arg(long, env = "SVC_LLM_MODEL")]
    pub llm_model: Option<String>,
    /// Bearer key of the model API.
    #[arg(long, env = "SVC_LLM_API_KEY", hide_env_values = true)]
    pub llm_api_key: Option<SecretString>,
    /// Seconds one attempt at the model may take (two attempts at most).
    #[arg(long, env = "SVC_LLM_TIMEOUT_SECS", default_value_t = DEFAULT_LLM_TIMEOUT_SECS)]
    pub llm_timeout_secs: u64,

    #[command(flatten)]
    pub embeddings: EmbeddingsArgs,

    /// Memory for the Agents' vectors this process keeps between questions (MiB).
    #[arg(long, env = "SVC_VECTOR_CACHE_MB", default_value_t = DEFAULT_VECTOR_CACHE_MB)]
    pub vector_cache_mb: usize,
    /// Public answers a client (IP address) may ask of one Agent per minute.
    #[arg(long, env = "SVC_PUBLIC_ANSWERS_PER_MINUTE", default_value_t = DEFAULT_PUBLIC_ANSWERS_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub public_answers_per_minute: u32,
    /// Header a trusted reverse proxy puts the client's address in (e.g.
    /// `X-Forwarded-For`; its rightmost address is used). Unset: the
    /// connection's peer address, which behind a proxy is the proxy's.
    #[arg(long, env = "SVC_CLIENT_IP_HEADER")]
    pub client_ip_header: Option<String>,
    /// Development only: run a built-in OpenID Connect issuer at
    /// `{base_url}/dev/oidc` that signs in one local User without a password,
    /// trust its tokens, and seed that User, a Workspace and an operator API key.
    /// Refused unless `SVC_BIND` and the base URL are loopback addresses, and
    /// with `SVC_OIDC_ISSUER`.
    #[arg(long, env = "SVC_DEV_IDP", value_parser = clap::builder::BoolishValueParser::new())]
    pub dev_idp: bool,
    /// Where `--dev-idp` writes the shell file to `source` (mode 0600): the
    /// endpoint, the seeded Workspace, a User token and the API key.
    #[arg(long, env = "SVC_DEV_ENV_FILE", default_value = DEFAULT_DEV_ENV_FILE)]
    pub dev_env_file: PathBuf,
}

impl ServeConfig {
    pub fn public_base_url(&self) -> String {
        let url = self.public_base_url.clone().unwrap_or_else(|| format!("http://{}", self.bind));
        url.trim_end_matches('/').to_owned()
    }

    /// The same settings, with the base URL defaulting to the address the
    /// listener got (`SVC_BIND` may ask for port 0).
    pub fn bound_to(&self, addr: SocketAddr) -> Self {
        let mut bound = self.clone();
        bound.bind = addr;
        bound
    }

    /// The issuer of the built-in development identity provider.
    pub fn dev_issuer(&self) -> String {
        format!("{}/dev/oidc", self.public_base_url())
    }

    /// The issuer User tokens come from (and that client-config publishes).
    pub fn issuer(&self) -> Option<String> {
        if self.dev_idp { Some(self.dev_issuer()) } else { self.oidc_issuer.clone() }
    }

    /// The client id published for sign-in.
    pub fn client_id(&self) -> Option<String> {
        match (&self.oidc_client_id, self.dev_idp) {
            (None, true) => Some(DEFAULT_DEV_CLIENT_ID.to_owned()),
            (id, _) => id.clone(),
        }
    }

    /// The web application's client id: its own, else the CLI's.
    pub fn account_client_id(&self) -> Option<String> {
        self.account_client_id.clone().or_else(|| self.client_id())
    }

    pub fn account_client_secret(&self) -> Option<String> {
        self.account_client_secret.as_ref().map(|s| s.expose_secret().to_owned())
    }

    pub fn account_redirect_uri(&self) -> String {
        self.account_redirect_uri.clone().unwrap_or_else(|| format!("{}/account/callback", self.public_base_url()))
    }

    /// The audience tokens of the development identity provider carry:
    /// `SVC_OIDC_AUDIENCE`, else the base URL.
    pub fn dev_audience(&self) -> String {
        self.oidc_audience.clone().unwrap_or_else(|| self.public_base_url())
    }

    pub fn oidc(&self) -> anyhow::Result<Option<OidcConfig>> {
        let Some(issuer) = &self.oidc_issuer else {
            return Ok(None);
        };
        let audience = self
            .oidc_audience
            .clone()
            .ok_or_else(|| anyhow::anyhow!("SVC_OIDC_AUDIENCE is required with SVC_OIDC_ISSUER"))?;
        let jwks = match &self.oidc_jwks_file {
            Some(path) => JwksSource::File(path.clone()),
            None => JwksSource::Discovery,
        };
        Ok(Some(OidcConfig { issuer: issuer.clone(), audience, jwks }))
    }

    pub fn core(&self) -> anyhow::Result<CoreConfig> {
        Ok(self.core_with(self.oidc()?))
    }

    /// The domain's configuration, trusting `oidc` for User sessions.
    pub fn core_with(&self, oidc: Option<OidcConfig>) -> CoreConfig {
        let mut core = CoreConfig::new(self.public_base_url(), oidc);
        core.gate_wait = Duration::from_secs(self.workspace_turn_wait_secs);
        core.workspace_writes = self.workspace_writes();
        core.gated_writes = self.gated_writes();
        core.wait_cache_entries = self.wait_cache_entries;
        core.wait_cache_max_age = Duration::from_millis(self.wait_cache_max_age_ms);
        core.caller_cache_entries = self.caller_cache_entries;
        core.caller_cache_max_age = Duration::from_millis(self.caller_cache_max_age_ms);
        core.warm = Duration::from_millis(self.db_warm_ms);
        core
    }

    /// Writes of one Workspace at once: as configured, but never more than half
    /// the pool, so one tenant's flood leaves the other half to everyone else.
    pub fn workspace_writes(&self) -> usize {
        let half = usize::try_from(self.database.database_max_connections / 2).unwrap_or(usize::MAX);
        self.workspace_writes.min(half.max(1))
    }

    /// Limit-consuming writes of all Workspaces at once: three quarters of the
    /// pool, so however many Workspaces flood at once, a quarter stays for
    /// reads and the other writes.
    pub fn gated_writes(&self) -> usize {
        let pool = usize::try_from(self.database.database_max_connections).unwrap_or(usize::MAX);
        (pool - pool / 4).max(1)
    }

    /// The model answers come from, if one is configured.
    pub fn llm(&self) -> anyhow::Result<Option<Llm>> {
        let Some(base_url) = &self.llm_base_url else { return Ok(None) };
        let model =
            self.llm_model.clone().ok_or_else(|| anyhow::anyhow!("SVC_LLM_MODEL is required with SVC_LLM_BASE_URL"))?;
        let config = EndpointConfig {
            base_url: base_url.clone(),
            model,
            api_key: self.llm_api_key.as_ref().map(|k| k.expose_secret().to_owned()),
            timeout: Duration::from_secs(self.llm_timeout_secs.max(1)),
        };
        Ok(Some(Llm::new(config).map_err(|e| anyhow::anyhow!(e))?))
    }

    /// What questions are searched by besides their words, loaded and
    /// checked (the model file's problem stops the start).
    pub fn meaning(&self) -> anyhow::Result<Option<Meaning>> {
        let Some(models) = self.embeddings.load_for_questions().map_err(anyhow::Error::msg)? else { return Ok(None) };
        Ok(Some(Meaning::new(models, self.vector_cache_mb.saturating_mul(1024 * 1024))))
    }

    pub fn body_policy(&self) -> BodyPolicy {
        BodyPolicy::new(
            Duration::from_secs(self.body_read_timeout_secs),
            self.large_body_budget_mib.saturating_mul(1024 * 1024),
            Duration::from_secs(self.large_body_wait_secs),
        )
    }

    /// The trusted client-address header, checked once at start.
    pub fn client_ip_header(&self) -> anyhow::Result<Option<http::HeaderName>> {
        self.client_ip_header
            .as_deref()
            .map(|name| {
                http::HeaderName::try_from(name)
                    .map_err(|_| anyhow::anyhow!("SVC_CLIENT_IP_HEADER is not a header name"))
            })
            .transpose()
    }

    pub fn redis_url(&self) -> &str {
        self.redis_url.expose_secret()
    }
}

impl DatabaseArgs {
    pub fn url(&self) -> &str {
        self.database_url.expose_secret()
    }

    pub fn timeouts(&self) -> Timeouts {
        Timeouts {
            statement: Duration::from_millis(self.db_statement_timeout_ms),
            lock: Duration::from_millis(self.db_lock_timeout_ms),
            ..Timeouts::SERVING
        }
    }
}

impl Default for DatabaseArgs {
    fn default() -> Self {
        Self {
            database_url: SecretString::from(DEFAULT_DATABASE_URL),
            database_max_connections: DEFAULT_MAX_CONNECTIONS,
            db_statement_timeout_ms: DEFAULT_STATEMENT_TIMEOUT_MS,
            db_lock_timeout_ms: DEFAULT_LOCK_TIMEOUT_MS,
        }
    }
}

/// The flags' defaults with no environment (for tests and the benchmark).
impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            database: DatabaseArgs::default(),
            redis_url: SecretString::from(DEFAULT_REDIS_URL),
            queue_namespace: DEFAULT_QUEUE_NAMESPACE.to_owned(),
            bind: DEFAULT_BIND.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 8080))),
            public_base_url: None,
            oidc_issuer: None,
            oidc_audience: None,
            oidc_jwks_file: None,
            oidc_client_id: None,
            oidc_scopes: vec!["openid".into(), "profile".into(), "email".into(), "offline_access".into()],
            account_client_id: None,
            account_client_secret: None,
            account_redirect_uri: None,
            shutdown_grace_secs: DEFAULT_SHUTDOWN_GRACE_SECS,
            header_read_timeout_secs: DEFAULT_HEADER_READ_TIMEOUT_SECS,
            body_read_timeout_secs: DEFAULT_BODY_READ_TIMEOUT_SECS,
            large_body_budget_mib: DEFAULT_LARGE_BODY_BUDGET_MIB,
            large_body_wait_secs: DEFAULT_LARGE_BODY_WAIT_SECS,
            workspace_turn_wait_secs: DEFAULT_WORKSPACE_TURN_WAIT_SECS,
            workspace_writes: DEFAULT_WORKSPACE_WRITES,
            wait_cache_entries: DEFAULT_WAIT_CACHE_ENTRIES,
            wait_cache_max_age_ms: DEFAULT_WAIT_CACHE_MAX_AGE_MS,
            caller_cache_entries: DEFAULT_CALLER_CACHE_ENTRIES,
            caller_cache_max_age_ms: DEFAULT_CALLER_CACHE_MAX_AGE_MS,
            db_warm_ms: DEFAULT_DB_WARM_MS,
            llm_base_url: None,
            llm_model: None,
            llm_api_key: None,
            llm_timeout_secs: DEFAULT_LLM_TIMEOUT_SECS,
            embeddings: EmbeddingsArgs::default(),
            vector_cache_mb: DEFAULT_VECTOR_CACHE_MB,
            public_answers_per_minute: DEFAULT_PUBLIC_ANSWERS_PER_MINUTE,
            client_ip_header: None,
            dev_idp: false,
            dev_env_file: PathBuf::from(DEFAULT_DEV_ENV_FILE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_writes_leave_room_in_the_pool() {
        let with = |writes, pool| ServeConfig {
            workspace_writes: writes,
            database: DatabaseArgs { database_max_connections: pool, ..DatabaseArgs::default() },
            ..ServeConfig::default()
        };
        assert_eq!(with(DEFAULT_WORKSPACE_WRITES, DEFAULT_MAX_CONNECTIONS).workspace_writes(), 8);
        assert_eq!(with(8, 16).core_with(None).workspace_writes, 8);
        assert_eq!(with(8, 10).workspace_writes(), 5);
        assert_eq!(with(2, 4).workspace_writes(), 2);
        assert_eq!(with(3, 1).workspace_writes(), 1);
        assert_eq!(with(8, 16).gated_writes(), 12);
        assert_eq!(with(8, 16).core_with(None).gated_writes, 12);
        assert_eq!(with(2, 4).gated_writes(), 3);
        assert_eq!(with(1, 1).gated_writes(), 1);
    }
}
