//! Load benchmark: requests/s and latency of operations over HTTP, beside the
//! practical limit measured in the same run: a bare axum handler doing the same
//! single-row SELECT on the same pool. A second bare handler takes its
//! connection as the service does, kept warm between requests
//! (`svc_core::runtime::warm`): the limit for that way of using the pool.
//!
//! It creates its own database on the server `DATABASE_URL` points at, serves the
//! real router in-process on a free port, drives it from keep-alive HTTP/1.1
//! connections, prints a table, and drops the database.
//!
//! `cargo run --release -p svc-bench -- requests [--seconds N] [--rounds N] [--connections N] [--only NAME[,NAME...]]`

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use sqlx::PgPool;
use svc_core::ids::AgentId;
use svc_core::runtime::warm::Warm;
use svc_tests::{ISSUER, TestIssuer};
use tokio::net::TcpStream;

/// `svc-bench requests`.
#[derive(clap::Args)]
pub struct Options {
    /// Seconds each scenario is measured, per round (after 2 s of warm-up in the first round, 1 s after).
    #[arg(long, default_value_t = 5, value_name = "N")]
    seconds: u64,
    /// Keep-alive HTTP/1.1 connections sending requests.
    #[arg(long, default_value_t = 32, value_name = "N")]
    connections: usize,
    /// Rounds over all scenarios, interleaved so that drift in the machine's
    /// speed hits every scenario alike; the median round is reported (0 counts as 1).
    #[arg(long, default_value_t = 3, value_name = "N")]
    rounds: usize,
    /// Runs only the scenarios whose name contains one of these
    /// (comma-separated), e.g. "bare,agent.inspect (".
    #[arg(long, value_name = "NAME,NAME")]
    only: Option<String>,
}

/// The scenario the others are compared with.
const LIMIT: &str = "bare SELECT (limit)";
/// The same on a connection kept warm, as the service keeps them.
const WARM_LIMIT: &str = "bare SELECT, warm connection";

/// One load scenario: a request to send again and again.
#[derive(Clone)]
struct Scenario {
    name: &'static str,
    writes: bool,
    method: Method,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Value,
    /// Another load run at the same time on this many connections, whose
    /// figures are not reported (a tenant flooding its Workspace).
    beside: Option<(Box<Scenario>, usize)>,
    /// The API it is sent to.
    server: Server,
    /// An MCP `tools/call`: a tool result with `isError` counts as an error.
    mcp: bool,
}

impl Scenario {
    /// A call of the operation at `path` with `authorization`, naming
    /// `workspace` (`Svc-Workspace`) when given.
    fn operation(name: &'static str, path: &str, authorization: &str, workspace: Option<&str>, body: Value) -> Self {
        let mut headers = vec![("authorization", authorization.to_owned())];
        headers.extend(workspace.map(|ws| ("svc-workspace", ws.to_owned())));
        headers.push(("content-type", "application/json".into()));
        Scenario {
            name,
            writes: path.ends_with("create"),
            method: Method::POST,
            path: format!("/api/public/operations/{path}"),
            headers,
            body,
            beside: None,
            server: Server::Default,
            mcp: false,
        }
    }

    /// The same operation as an MCP `tools/call` of its tool, with the same
    /// credential and Workspace header.
    fn tool_call(
        name: &'static str,
        tool: &str,
        authorization: &str,
        workspace: Option<&str>,
        arguments: Value,
    ) -> Self {
        let mut headers = vec![("authorization", authorization.to_owned())];
        headers.extend(workspace.map(|ws| ("svc-workspace", ws.to_owned())));
        headers.push(("content-type", "application/json".into()));
        headers.push(("accept", "application/json, text/event-stream".into()));
        Scenario {
            name,
            writes: false,
            method: Method::POST,
            path: "/api/mcp".into(),
            headers,
            body: json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": { "name": tool, "arguments": arguments } }),
            beside: None,
            server: Server::Default,
            mcp: true,
        }
    }
}

/// The APIs a run serves, each over the same database.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Server {
    Default,
    /// Keeps no wait answers (`SVC_WAIT_CACHE_ENTRIES=0`).
    NoWaitCache,
    /// Keeps no callers (`SVC_CALLER_CACHE_ENTRIES=0`).
    NoCallerCache,
    /// Keeps no connection warm between requests (`SVC_DB_WARM_MS=0`).
    NoWarm,
}

struct Measured {
    name: &'static str,
    requests: usize,
    errors: usize,
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

pub async fn run(mut options: Options) -> anyhow::Result<()> {
    options.rounds = options.rounds.max(1);
    let database = crate::common::Scratch::create("requests").await?;
    let result = bench(&options, &database.url).await;
    database.drop().await?;
    result
}

async fn bench(options: &Options, url: &str) -> anyhow::Result<()> {
    let pool = crate::common::migrated(url, 16).await?;
    let issuer = TestIssuer::shared();
    let config = crate::common::config(url, &format!("svcbench_{}", std::process::id()));
    let state = svc_api::AppState::new(pool.clone(), &config)?;
    let app = svc_api::router(state, &config, tokio_util::sync::CancellationToken::new())
        .merge(Router::new().route("/bench/bare/{id}", get(bare_agent)).with_state(pool.clone()))
        .merge(
            Router::new()
                .route("/bench/warm/{id}", get(warm_agent))
                .with_state(Arc::new(Warm::new(pool.clone(), svc_core::runtime::warm::FRESH))),
        );
    let addr = crate::common::serve(app).await?;
    eprintln!("serving on http://{addr}");
    // The same API over the same database, reading every wait from PostgreSQL.
    let serve_with = async |config: svc_api::config::ServeConfig| {
        let state = svc_api::AppState::new(pool.clone(), &config)?;
        crate::common::serve(svc_api::router(state, &config, tokio_util::sync::CancellationToken::new())).await
    };
    let no_wait_cache = serve_with(svc_api::config::ServeConfig { wait_cache_entries: 0, ..config.clone() }).await?;
    // And authenticating every request from PostgreSQL.
    let no_caller_cache =
        serve_with(svc_api::config::ServeConfig { caller_cache_entries: 0, ..config.clone() }).await?;
    // And handing every connection back to sqlx after each request.
    let no_warm = serve_with(svc_api::config::ServeConfig { db_warm_ms: 0, ..config.clone() }).await?;

    // A User with a Workspace (limits raised so agent.create can run) and an Agent.
    svc_core::admin::user_setup(&pool, ISSUER, "bench", "bench@example.test", None).await?;
    let token = issuer.token("bench");
    let auth = format!("Bearer {token}");
    let created = call(
        addr,
        "/api/public/operations/workspaces/create",
        &auth,
        None,
        json!({ "name": "Bench", "slug": "bench" }),
    )
    .await?;
    let ws = created["data"]["workspace"]["id"].as_str().context("a Workspace")?.to_owned();
    // agent.create gets a Workspace of its own: it makes thousands of Agents, far
    // past any plan's limit, and they must not slow the lookups of the others.
    let created =
        call(addr, "/api/public/operations/workspaces/create", &auth, None, json!({ "name": "Bench creates" })).await?;
    let create_ws = created["data"]["workspace"]["id"].as_str().context("a Workspace")?.to_owned();
    svc_core::admin::plan_set(&pool, &create_ws, "pro", &["agents=100000000".to_owned()]).await?;
    let agent =
        call(addr, "/api/public/operations/agents/create", &auth, Some(&ws), json!({ "name": "Bench agent" })).await?;
    let agent_id = agent["data"]["agent"]["id"].as_str().context("an Agent")?.to_owned();
    let agent_uuid = AgentId::parse(&agent_id).context("an Agent id")?.0;
    let key = call(
        addr,
        "/api/public/operations/api-keys/create",
        &auth,
        Some(&ws),
        json!({ "name": "bench", "preset": "read_only" }),
    )
    .await?;
    let key_auth = format!("Bearer {}", key["data"]["secret"].as_str().context("a key secret")?);
    // A source no worker processes: `wait` answers "not yet" with a retry hint,
    // the answer a polling client gets most.
    let content = "The office opens at nine.";
    let source = call(
        addr,
        "/api/public/operations/knowledge-sources/add",
        &auth,
        Some(&ws),
        json!({ "agentId": agent_id, "key": "faq", "title": "FAQ", "provenance": { "kind": "manual", "uri": "faq" },
                "revision": "1", "digest": svc_contract::digest::sha256_prefixed(content.as_bytes()), "content": content }),
    )
    .await?;
    let source_id = source["data"]["knowledgeSource"]["id"].as_str().context("a source")?.to_owned();

    let operation = |name, path, ws: &str, body| Scenario::operation(name, path, &auth, Some(ws), body);
    // The same call with the API key (which selects its own Workspace).
    let by_key = |name, path, body| Scenario::operation(name, path, &key_auth, None, body);
    let flood = operation("agent.create", "agents/create", &create_ws, json!({ "name": "Flood {n}" }));
    let scenarios = [
        Scenario {
            name: LIMIT,
            writes: false,
            method: Method::GET,
            path: format!("/bench/bare/{agent_uuid}"),
            headers: vec![],
            body: Value::Null,
            beside: None,
            server: Server::Default,
            mcp: false,
        },
        Scenario {
            name: WARM_LIMIT,
            writes: false,
            method: Method::GET,
            path: format!("/bench/warm/{agent_uuid}"),
            headers: vec![],
            body: Value::Null,
            beside: None,
            server: Server::Default,
            mcp: false,
        },
        operation("identity.status", "identity/status", &ws, json!({})),
        operation("agent.inspect (user)", "agents/inspect", &ws, json!({ "agentId": agent_id })),
        by_key("agent.inspect (API key)", "agents/inspect", json!({ "agentId": agent_id })),
        // With no caller kept: authentication reads PostgreSQL.
        Scenario {
            name: "agent.inspect (API key, no caller cache)",
            server: Server::NoCallerCache,
            ..by_key("", "agents/inspect", json!({ "agentId": agent_id }))
        },
        // With every connection handed back to sqlx, which pings it.
        Scenario {
            name: "agent.inspect (API key, no warm connections)",
            server: Server::NoWarm,
            ..by_key("", "agents/inspect", json!({ "agentId": agent_id }))
        },
        // The same calls over MCP, beside their HTTP rows (contract §13).
        Scenario::tool_call(
            "agent.inspect (API key, MCP)",
            "svc_agent_inspect",
            &key_auth,
            None,
            json!({ "agentId": agent_id }),
        ),
        // An `Mcp-Method` header (which rmcp ignores before 2026-07-28) keeps
        // the call off the gate's fast path: rmcp serves it.
        {
            let mut call = Scenario::tool_call(
                "agent.inspect (API key, MCP, rmcp alone)",
                "svc_agent_inspect",
                &key_auth,
                None,
                json!({ "agentId": agent_id }),
            );
            call.headers.push(("mcp-method", "tools/call".into()));
            call
        },
        Scenario::tool_call(
            "agent.inspect (user, MCP)",
            "svc_agent_inspect",
            &auth,
            Some(&ws),
            json!({ "agentId": agent_id }),
        ),
        operation(
            "knowledge_source.wait (user)",
            "knowledge-sources/wait",
            &ws,
            json!({ "agentId": agent_id, "sourceId": source_id }),
        ),
        by_key(
            "knowledge_source.wait (API key)",
            "knowledge-sources/wait",
            json!({ "agentId": agent_id, "sourceId": source_id }),
        ),
        Scenario {
            name: "knowledge_source.wait (API key, no wait cache)",
            server: Server::NoWaitCache,
            ..by_key("", "knowledge-sources/wait", json!({ "agentId": agent_id, "sourceId": source_id }))
        },
        // `{n}` makes each request's name (and so its derived slug) distinct.
        operation("agent.create", "agents/create", &create_ws, json!({ "name": "Load {n}" })),
        // One tenant floods its Workspace with creates on 64 connections while
        // another reads on 8: the reader's figures are reported.
        Scenario {
            name: "agent.inspect beside a create flood",
            writes: true,
            beside: Some((Box::new(flood), 64)),
            ..operation("", "agents/inspect", &ws, json!({ "agentId": agent_id }))
        },
    ];

    println!(
        "svc-bench: {} connections, {} rounds of {} s per scenario (interleaved, after a warm-up), {} cores",
        options.connections,
        options.rounds,
        options.seconds,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let selected: Vec<&Scenario> = scenarios
        .iter()
        .filter(|s| options.only.as_ref().is_none_or(|o| o.split(',').any(|o| s.name.contains(o))))
        .collect();
    let mut rounds: Vec<Vec<Measured>> = selected.iter().map(|_| Vec::new()).collect();
    for round in 0..options.rounds {
        for (scenario, measured) in selected.iter().zip(rounds.iter_mut()) {
            let warm_up = if round == 0 { 2 } else { 1 };
            let (connections, duration) = match &scenario.beside {
                Some(_) => (8, Duration::from_secs(options.seconds)),
                None => (options.connections, Duration::from_secs(options.seconds)),
            };
            let target = match scenario.server {
                Server::Default => addr,
                Server::NoWaitCache => no_wait_cache,
                Server::NoCallerCache => no_caller_cache,
                Server::NoWarm => no_warm,
            };
            load(target, scenario, connections, Duration::from_secs(warm_up)).await?;
            let background = scenario.beside.clone().map(|(other, n)| {
                tokio::spawn(async move { load(addr, &other, n, duration + Duration::from_millis(500)).await })
            });
            let result = load(target, scenario, connections, duration).await?;
            if let Some(background) = background {
                let flood = background.await??;
                eprintln!("          (the flood beside it: {:.0} req/s, {} errors)", flood.per_second, flood.errors);
            }
            eprintln!("round {}: {:<26} {:>8.0} req/s", round + 1, scenario.name, result.per_second);
            measured.push(result);
            if scenario.writes {
                // As autovacuum would within a minute: statistics that match the
                // grown tables, and cached plans re-made from them.
                sqlx::query("ANALYZE").execute(&pool).await?;
            }
        }
    }
    let results: Vec<Measured> = rounds.into_iter().map(median).collect();
    println!("\n| scenario | requests | errors | req/s | p50 ms | p99 ms | of limit |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let limit = results.iter().find(|r| r.name == LIMIT).map(|r| r.per_second);
    for r in &results {
        let share = limit.map_or("-".to_owned(), |limit| format!("{:.0}%", 100.0 * r.per_second / limit));
        println!(
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {share} |",
            r.name,
            r.requests,
            r.errors,
            r.per_second,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
        );
    }
    // The service's rows beside the bare handler that uses the pool as it does.
    if let Some(warm) = results.iter().find(|r| r.name == WARM_LIMIT) {
        for r in results.iter().filter(|r| r.name.starts_with("agent.inspect (") && !r.name.contains(", MCP")) {
            println!("{}: of the {WARM_LIMIT} = {:.2}", r.name, r.per_second / warm.per_second);
        }
    }
    // Each MCP row beside the same call over HTTP.
    for r in results.iter().filter(|r| r.name.contains(", MCP")) {
        let http = format!("{})", &r.name[..r.name.find(", MCP").unwrap_or(r.name.len())]);
        if let Some(h) = results.iter().find(|h| h.name == http) {
            println!("{}: MCP / HTTP = {:.2}", r.name, r.per_second / h.per_second);
        }
    }
    Ok(())
}

/// The round with the median throughput.
fn median(mut rounds: Vec<Measured>) -> Measured {
    rounds.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
    let middle = rounds.len() / 2;
    rounds.swap_remove(middle)
}

/// The practical limit: routing, one pooled single-row SELECT, a JSON answer.
async fn bare_agent(State(pool): State<PgPool>, Path(id): Path<uuid_like::Uuid>) -> Json<Value> {
    let row = agent_row(&pool, id).await.ok().flatten();
    Json(json!({ "agent": row.map(|(name, slug)| json!({ "name": name, "slug": slug })) }))
}

/// The same, with the connection kept warm for the next request once its
/// query finished, as the service's requests do.
async fn warm_agent(State(warm): State<Arc<Warm>>, Path(id): Path<uuid_like::Uuid>) -> Json<Value> {
    let mut row = None;
    if let Ok(mut conn) = warm.acquire().await
        && let Ok(found) = agent_row(&mut *conn, id).await
    {
        warm.keep(conn);
        row = found;
    }
    Json(json!({ "agent": row.map(|(name, slug)| json!({ "name": name, "slug": slug })) }))
}

async fn agent_row<'c>(conn: impl sqlx::PgExecutor<'c>, id: uuid_like::Uuid) -> sqlx::Result<Option<(String, String)>> {
    sqlx::query_as("SELECT name, slug FROM agents WHERE id = $1 AND deleted_at IS NULL")
        .bind(id.0)
        .fetch_optional(conn)
        .await
}

mod uuid_like {
    /// A path segment parsed as a UUID.
    pub struct Uuid(pub sqlx::types::Uuid);
    impl<'de> serde::Deserialize<'de> for Uuid {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let text = String::deserialize(d)?;
            sqlx::types::Uuid::parse_str(&text).map(Uuid).map_err(serde::de::Error::custom)
        }
    }
}

/// One call, for set-up.
async fn call(addr: SocketAddr, path: &str, auth: &str, ws: Option<&str>, body: Value) -> anyhow::Result<Value> {
    let client = svc_tests::http::HttpClient::new(format!("http://{addr}"));
    let token = auth.trim_start_matches("Bearer ");
    let response = client.post_json(path, Some(token), ws, &body).await;
    anyhow::ensure!(response.status == 200, "{path}: {}", response.text());
    Ok(response.json())
}

/// Drives `connections` keep-alive connections for `duration`.
async fn load(
    addr: SocketAddr,
    scenario: &Scenario,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Measured> {
    let body = Bytes::from(if scenario.body.is_null() { String::new() } else { scenario.body.to_string() });
    let deadline = Instant::now() + duration;
    let mut tasks = tokio::task::JoinSet::new();
    let varies = body.windows(3).any(|w| w == b"{n}");
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    for _ in 0..connections {
        let (method, path, headers, body, mcp) =
            (scenario.method.clone(), scenario.path.clone(), scenario.headers.clone(), body.clone(), scenario.mcp);
        tasks.spawn(async move {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(connection);
            let mut latencies = Vec::new();
            let mut errors = 0usize;
            while Instant::now() < deadline {
                let mut request = Request::builder().method(method.clone()).uri(&path).header("host", "127.0.0.1");
                for (name, value) in &headers {
                    request = request.header(*name, value);
                }
                let body = if varies {
                    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_string();
                    Bytes::from(String::from_utf8_lossy(&body).replace("{n}", &n))
                } else {
                    body.clone()
                };
                let started = Instant::now();
                let response = sender.send_request(request.body(Full::new(body))?).await?;
                let ok = response.status().is_success();
                let answer = response.into_body().collect().await?.to_bytes();
                let has = |text: &[u8]| answer.windows(text.len()).any(|w| w == text);
                let ok = ok && !(mcp && (!has(b"\"result\":") || has(b"\"isError\":true")));
                latencies.push(started.elapsed());
                if !ok {
                    errors += 1;
                }
            }
            anyhow::Ok((latencies, errors))
        });
    }
    let started = Instant::now();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for result in tasks.join_all().await {
        let (mut l, e) = result?;
        latencies.append(&mut l);
        errors += e;
    }
    let elapsed = started.elapsed().max(duration);
    latencies.sort_unstable();
    let quantile = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Ok(Measured {
        name: scenario.name,
        requests: latencies.len(),
        errors,
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: quantile(0.50),
        p99: quantile(0.99),
    })
}

#[cfg(test)]
mod tests {
    use crate::{Benchmark, parse};

    #[test]
    fn requests_is_the_default_and_its_options_may_come_first() {
        let Ok(Benchmark::Requests(options)) = parse(&[]) else { panic!("requests") };
        assert_eq!((options.seconds, options.connections, options.rounds, options.only), (5, 32, 3, None));
        let Ok(Benchmark::Requests(options)) = parse(&["--rounds", "7", "--only", "bare,agent.inspect ("]) else {
            panic!("requests")
        };
        assert_eq!((options.rounds, options.only.as_deref()), (7, Some("bare,agent.inspect (")));
        let Ok(Benchmark::Requests(options)) = parse(&["requests", "--seconds=2"]) else { panic!("requests") };
        assert_eq!(options.seconds, 2);
    }
}
