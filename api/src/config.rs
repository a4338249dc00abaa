//! The API process's configuration: read once from flags or the environment.
//! `svc-api serve --help` lists every setting with its variable and default.

use std::net::SocketAddr;
use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretString};
use svc_core::{CoreConfig, JwksSource, OidcConfig};

/// Where the database is (shared by every subcommand).
#[derive(Clone, Debug, clap::Args)]
pub struct DatabaseArgs {
    /// PostgreSQL connection URL.
    #[arg(
        long = "database-url",
        env = "DATABASE_URL",
        default_value = "postgres://localhost/svc",
        hide_env_values = true
    )]
    pub database_url: SecretString,
    /// Most connections the pool opens.
    #[arg(long, env = "SVC_DATABASE_MAX_CONNECTIONS", default_value_t = 16)]
    pub database_max_connections: u32,
}

#[derive(Clone, Debug, clap::Args)]
pub struct ServeConfig {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Redis URL (database index honoured); `/readyz` checks it.
    #[arg(long = "redis-url", env = "REDIS_URL", default_value = "redis://127.0.0.1:6379", hide_env_values = true)]
    pub redis_url: SecretString,
    /// Address to listen on.
    #[arg(long, env = "SVC_BIND", default_value = "127.0.0.1:8080")]
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
    /// Seconds in-flight requests get to finish after SIGTERM.
    #[arg(long, env = "SVC_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    pub shutdown_grace_secs: u64,
}

impl ServeConfig {
    pub fn public_base_url(&self) -> String {
        let url = self.public_base_url.clone().unwrap_or_else(|| format!("http://{}", self.bind));
        url.trim_end_matches('/').to_owned()
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
        Ok(CoreConfig::new(self.public_base_url(), self.oidc()?))
    }

    pub fn redis_url(&self) -> &str {
        self.redis_url.expose_secret()
    }
}

impl DatabaseArgs {
    pub fn url(&self) -> &str {
        self.database_url.expose_secret()
    }
}
