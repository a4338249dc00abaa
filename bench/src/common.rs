//! What every benchmark needs: a scratch database and the API served in-process.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use sqlx::{Connection, PgConnection, PgPool};
use svc_api::app::Serving;
use svc_api::config::{DatabaseArgs, ServeConfig};
use svc_core::answers::Meaning;
use svc_core::embeddings::EmbeddingsArgs;
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

    /// Drops the database, or with `SVC_BENCH_KEEP=1` keeps it (to look at
    /// query plans on the benchmark's data) and says where it is.
    pub async fn drop(self) -> anyhow::Result<()> {
        if std::env::var("SVC_BENCH_KEEP").is_ok_and(|v| v == "1") {
            eprintln!("kept the database {}", self.name);
            return Ok(());
        }
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

/// The embedding model `scripts/fetch-model` leaves in the project.
pub fn model_dir() -> std::path::PathBuf {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(svc_core::embeddings::DEFAULT_MODEL_DIR);
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// The embeddings settings of this run, from the environment as the
/// binaries read them (`SVC_EMBEDDINGS=off`, `SVC_EMBEDDINGS_BASE_URL`, ...),
/// the model folder the project's unless set. The workers inherit them.
pub fn embeddings() -> EmbeddingsArgs {
    #[derive(clap::Parser)]
    struct FromEnvironment {
        #[command(flatten)]
        embeddings: EmbeddingsArgs,
    }
    let mut embeddings = <FromEnvironment as clap::Parser>::parse_from(["svc-bench"]).embeddings;
    if std::env::var_os("SVC_EMBEDDINGS_MODEL_DIR").is_none() {
        embeddings.embeddings_model_dir = model_dir();
    }
    embeddings
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
        embeddings: embeddings(),
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
    let pool = svc_core::runtime::connect(url, "svc-bench", connections, svc_core::runtime::Timeouts::SERVING)?;
    svc_core::runtime::MIGRATOR.run(&pool).await?;
    Ok(pool)
}

/// The real API (in-process) and `svc-worker` processes (release binaries) over
/// a scratch database, with a User, a Workspace on the pro plan and an Agent.
pub struct Stack {
    pub scratch: Scratch,
    pub pool: PgPool,
    pub client: svc_tests::http::HttpClient,
    pub token: String,
    pub workspace: String,
    pub agent: String,
    /// What the API searches questions by besides their words (`None` with
    /// `SVC_EMBEDDINGS=off`).
    pub meaning: Option<std::sync::Arc<Meaning>>,
    namespace: String,
    workers: Vec<svc_tests::process::Spawned>,
}

impl Stack {
    pub async fn start(purpose: &str, workers: usize) -> anyhow::Result<Self> {
        let binary = std::env::current_exe()?.with_file_name("svc-worker");
        Self::start_with(purpose, workers, &binary).await
    }

    /// [`Stack::start`] with the `svc-worker` at `binary` (another build's, to
    /// compare two in one run).
    pub async fn start_with(purpose: &str, workers: usize, binary: &std::path::Path) -> anyhow::Result<Self> {
        let scratch = Scratch::create(purpose).await?;
        let pool = migrated(&scratch.url, 16).await?;
        let namespace = format!("svcbench_{purpose}_{}", std::process::id());
        let config = config(&scratch.url, &namespace);
        let state = svc_api::AppState::new(pool.clone(), &config)?;
        let addr = serve(svc_api::router(state, &config, tokio_util::sync::CancellationToken::new())).await?;
        let client = svc_tests::http::HttpClient::new(format!("http://{addr}"));
        svc_core::admin::user_setup(&pool, ISSUER, purpose, "bench@example.test", None).await?;
        let token = TestIssuer::shared().token(purpose);
        let created = client
            .post_json(
                "/api/public/operations/workspaces/create",
                Some(&token),
                None,
                &serde_json::json!({ "name": purpose }),
            )
            .await;
        anyhow::ensure!(created.status == 200, "{}", created.text());
        let workspace = created.json()["data"]["workspace"]["id"].as_str().context("a Workspace")?.to_owned();
        // Room for the largest imports the benchmarks make (100,000 sources).
        let limits = ["knowledge_sources=1000000".to_owned(), "knowledge_bytes=100000000000".to_owned()];
        svc_core::admin::plan_set(&pool, &workspace, "pro", &limits).await?;
        let agent = client
            .post_json(
                "/api/public/operations/agents/create",
                Some(&token),
                Some(&workspace),
                &serde_json::json!({ "name": purpose }),
            )
            .await;
        let agent = agent.json()["data"]["agent"]["id"].as_str().context("an Agent")?.to_owned();
        anyhow::ensure!(
            binary.exists(),
            "no {}: build the binaries first (cargo build --release --workspace --bins)",
            binary.display()
        );
        let model_dir = model_dir();
        let mut spawned = Vec::new();
        for _ in 0..workers {
            let mut process = svc_tests::process::Spawned::start_at(
                binary,
                &[],
                &[
                    ("DATABASE_URL", scratch.url.as_str()),
                    ("SVC_QUEUE_NAMESPACE", namespace.as_str()),
                    ("SVC_WORKER_METRICS_BIND", "127.0.0.1:0"),
                    ("SVC_EMBEDDINGS_MODEL_DIR", &model_dir.to_string_lossy()),
                    ("RUST_LOG", "info"),
                ],
            );
            process.wait_for("svc-worker started").await;
            spawned.push(process);
        }
        let meaning = config.meaning()?.map(std::sync::Arc::new);
        Ok(Self { scratch, pool, client, token, workspace, agent, meaning, namespace, workers: spawned })
    }

    /// Adds sources `(key, title, content)` through the API, `senders` at a time.
    pub async fn add_all(&self, documents: Vec<(String, String, String)>, senders: usize) -> anyhow::Result<()> {
        let mut sends = tokio::task::JoinSet::new();
        let per = documents.len().div_ceil(senders.max(1)).max(1);
        let mut documents = documents.into_iter();
        loop {
            let chunk: Vec<_> = documents.by_ref().take(per).collect();
            if chunk.is_empty() {
                break;
            }
            let (client, token, workspace, agent) =
                (self.client.clone(), self.token.clone(), self.workspace.clone(), self.agent.clone());
            sends.spawn(async move {
                for (key, title, content) in chunk {
                    let input = serde_json::json!({
                        "agentId": agent, "key": key, "title": title,
                        "provenance": { "kind": "repository", "uri": format!("docs/{key}") },
                        "revision": "v1", "digest": svc_contract::digest::sha256_prefixed(content.as_bytes()),
                        "content": content,
                    });
                    let added = client
                        .post_json(
                            "/api/public/operations/knowledge-sources/add",
                            Some(&token),
                            Some(&workspace),
                            &input,
                        )
                        .await;
                    anyhow::ensure!(added.status == 200, "{}", added.text());
                }
                anyhow::Ok(())
            });
        }
        for sent in sends.join_all().await {
            sent?;
        }
        Ok(())
    }

    /// Waits until `wanted` revisions are active (none may fail).
    pub async fn wait_active(&self, wanted: i64) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        loop {
            let counted = std::time::Instant::now();
            let (active, failed): (i64, i64) = sqlx::query_as(
                "SELECT count(*) FILTER (WHERE state = 'active'), count(*) FILTER (WHERE state = 'failed') FROM knowledge_revisions",
            )
            .fetch_one(&self.pool)
            .await?;
            anyhow::ensure!(failed == 0, "{failed} revisions failed");
            if active >= wanted {
                return Ok(());
            }
            anyhow::ensure!(started.elapsed() < Duration::from_secs(3600), "not done in an hour");
            // The count reads every revision: over a large import it would take
            // a good part of the machine from the workers it waits for, so it
            // runs at most a twentieth of the time.
            tokio::time::sleep(Duration::from_millis(50).max(counted.elapsed() * 20)).await;
        }
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        for mut process in self.workers {
            process.terminate().await;
        }
        self.pool.close().await;
        self.scratch.drop().await?;
        svc_tests::stack::flush_namespace("redis://127.0.0.1:6379", &self.namespace).await;
        Ok(())
    }
}
