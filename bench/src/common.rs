//! What every benchmark needs: a scratch database and the API served in-process.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use sqlx::{Connection, PgConnection, PgPool};
use svc_api::app::Serving;
use svc_api::config::{DatabaseArgs, ServeConfig};
use svc_tests::{AUDIENCE, ISSUER, TestIssuer};

/// A database of the benchmark's own, dropped at the end.
pub struct Scratch {
    pub url: String,
    server: String,
    name: String,
}

impl Scratch {
    pub async fn create(purpose: &str) -> anyhow::Result<Self> {
        let server = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1/postgres".into());
        let name = format!("svc_bench_{purpose}_{}", std::process::id());
        let mut admin = PgConnection::connect(&server).await.context("connect to DATABASE_URL")?;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&mut admin)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await?;
        Ok(Self { url: database_url(&server, &name), server, name })
    }

    pub async fn drop(self) -> anyhow::Result<()> {
        let mut admin = PgConnection::connect(&self.server).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {} WITH (FORCE)", self.name)))
            .execute(&mut admin)
            .await?;
        Ok(())
    }
}

/// `server_url` with its database replaced (any `?query` is kept).
fn database_url(server_url: &str, database: &str) -> String {
    let (base, query) = server_url.split_once('?').map_or((server_url, None), |(base, query)| (base, Some(query)));
    let base = base.rsplit_once('/').map_or(base, |(base, _)| base);
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

/// The API's configuration for a benchmark: User tokens from the test issuer,
/// jobs under a queue namespace of the run's own.
pub fn config(url: &str, namespace: &str) -> ServeConfig {
    ServeConfig {
        database: DatabaseArgs { database_url: url.into(), ..DatabaseArgs::default() },
        bind: "127.0.0.1:0".parse().expect("an address"),
        oidc_issuer: Some(ISSUER.into()),
        oidc_audience: Some(AUDIENCE.into()),
        oidc_jwks_file: Some(TestIssuer::shared().jwks_path().to_owned()),
        shutdown_grace_secs: 1,
        queue_namespace: namespace.to_owned(),
        ..ServeConfig::default()
    }
}

/// Serves `router` with the API's own connection loop on a free port.
pub async fn serve(router: axum::Router) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let serving = Serving {
        header_timeout: Duration::from_secs(30),
        grace: Duration::from_secs(1),
        shutdown: tokio_util::sync::CancellationToken::new(),
    };
    tokio::spawn(svc_api::app::serve(listener, router, serving, std::future::pending()));
    Ok(addr)
}

/// A migrated pool on `url`.
pub async fn migrated(url: &str, connections: u32) -> anyhow::Result<PgPool> {
    let pool = svc_core::runtime::connect(url, connections, svc_core::runtime::Timeouts::SERVING)?;
    sqlx::migrate!("../migrations").run(&pool).await?;
    Ok(pool)
}
