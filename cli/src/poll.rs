//! Commands that wait (contract §14): `knowledge-source wait` asks again as
//! `retryAfterMs` says until the source is terminal, and `knowledge-source
//! reconcile --apply` replays its own request (same idempotency key, contract §7)
//! until the run has ended. Both give up with `processing_timeout` when
//! `--timeout-ms` runs out. Progress goes to stderr when it is a terminal, and
//! never under `--json`.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use clap::{Arg, ArgAction};
use serde_json::{Value, json};
use svc_contract::{Operation, OperationId, Problem, ProblemCode};

use crate::caller;
use crate::context::Context;
use crate::outcome::Failure;

/// When `wait` gives no hint (it always should while not terminal).
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// Replays of an applying run start at this interval and back off to the next.
const RUN_POLL_FIRST: Duration = Duration::from_millis(500);
const RUN_POLL_MAX: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polling {
    /// `knowledge_source.wait`: poll until `terminal`.
    Wait,
    /// `knowledge_source.reconcile` with `dryRun: false`: replay until the run ends.
    Run,
}

impl Polling {
    pub fn of(op: &Operation) -> Option<Self> {
        match op.op {
            OperationId::KnowledgeSourceWait => Some(Self::Wait),
            OperationId::KnowledgeSourceReconcile => Some(Self::Run),
            _ => None,
        }
    }

    pub fn args(self) -> Vec<Arg> {
        let timeout =
            Arg::new("timeout-ms").long("timeout-ms").value_name("MS").value_parser(clap::value_parser!(u64)).help(
                format!(
                    "Gives up with processing_timeout (exit 4) after this many milliseconds [default: {}]",
                    crate::named::DEFAULT_TIMEOUT_MS
                ),
            );
        match self {
            Self::Wait => vec![timeout],
            Self::Run => vec![
                timeout,
                Arg::new("no-wait")
                    .long("no-wait")
                    .action(ArgAction::SetTrue)
                    .requires("apply")
                    .help("With --apply: returns the run as soon as it is stored, without waiting for its end"),
            ],
        }
    }
}

/// Polls `knowledge_source.wait` until the source is terminal.
pub fn wait(ctx: &mut Context, op: &'static Operation, input: &Value, timeout: Duration) -> Result<Value, Failure> {
    let started = Instant::now();
    let mut progress = Progress::new(ctx.globals.json);
    loop {
        let envelope = caller::call(ctx, op, input)?;
        let data = &envelope["data"];
        if data["terminal"] == true {
            progress.finish();
            return Ok(envelope);
        }
        let state = data.pointer("/knowledgeSource/state").and_then(Value::as_str).unwrap_or("pending");
        progress.show(&format!("{state} after {:.1} s", started.elapsed().as_secs_f64()));
        let Some(remaining) = timeout.checked_sub(started.elapsed()).filter(|r| !r.is_zero()) else {
            progress.finish();
            let problem = Problem::new(
                ProblemCode::ProcessingTimeout,
                format!("Knowledge processing did not finish within {} ms.", timeout.as_millis()),
            )
            .with_detail("timeoutMs", timeout.as_millis() as u64)
            .with_detail("knowledgeSource", data["knowledgeSource"].clone());
            return Err(Failure::with_request_id(problem, request_id(&envelope)));
        };
        let hint = data["retryAfterMs"].as_u64().map_or(DEFAULT_RETRY, Duration::from_millis);
        std::thread::sleep(hint.min(remaining));
    }
}

/// Replays an applied reconcile until its run is `completed` or `failed`.
pub fn run(ctx: &mut Context, op: &'static Operation, input: &Value, timeout: Duration) -> Result<Value, Failure> {
    let started = Instant::now();
    let mut interval = RUN_POLL_FIRST;
    let mut progress = Progress::new(ctx.globals.json);
    loop {
        let envelope = caller::call(ctx, op, input)?;
        let data = &envelope["data"];
        if matches!(data["status"].as_str(), Some("completed" | "failed") | None) {
            progress.finish();
            return Ok(envelope);
        }
        let applied = data["checkpoint"].as_u64().unwrap_or(0);
        let planned = data["plan"].as_array().map_or(0, Vec::len);
        progress.show(&format!("applied {applied} of {planned} after {:.1} s", started.elapsed().as_secs_f64()));
        let Some(remaining) = timeout.checked_sub(started.elapsed()).filter(|r| !r.is_zero()) else {
            progress.finish();
            let problem = Problem::new(
                ProblemCode::ProcessingTimeout,
                format!(
                    "The reconcile run did not end within {} ms; it goes on in the background.",
                    timeout.as_millis()
                ),
            )
            .with_detail("timeoutMs", timeout.as_millis() as u64)
            .with_detail(
                "run",
                json!({ "runId": data["runId"], "status": data["status"], "checkpoint": data["checkpoint"] }),
            );
            return Err(Failure::with_request_id(problem, request_id(&envelope)));
        };
        std::thread::sleep(interval.min(remaining));
        interval = (interval * 2).min(RUN_POLL_MAX);
    }
}

fn request_id(envelope: &Value) -> Option<String> {
    envelope.pointer("/meta/requestId").and_then(Value::as_str).map(str::to_owned)
}

/// One updating line on a terminal's stderr.
struct Progress {
    on: bool,
    shown: bool,
}

impl Progress {
    fn new(json: bool) -> Self {
        Self { on: !json && std::io::stderr().is_terminal(), shown: false }
    }

    fn show(&mut self, text: &str) {
        if self.on {
            let mut stderr = std::io::stderr();
            let _ = write!(stderr, "\r\x1b[2KWaiting: {text}");
            let _ = stderr.flush();
            self.shown = true;
        }
    }

    fn finish(&mut self) {
        if self.shown {
            eprintln!();
            self.shown = false;
        }
    }
}
