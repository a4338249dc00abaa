//! Starting the real binaries and watching what they log.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The setting that says where the embedding model is.
const MODEL_DIR: &str = "SVC_EMBEDDINGS_MODEL_DIR";

/// A workspace binary, next to the test executable's `deps/` folder
/// (`target/debug/svc-api`).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace binaries first (cargo build --workspace)",
        path.display()
    );
    path
}

/// A TCP port on 127.0.0.1 that nothing listens on now (for a process started
/// next to listen on, or for an address where nothing answers).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("an address").port()
}

/// Runs a command to completion; returns (exit status, stdout, stderr).
pub async fn run(name: &str, args: &[&str], envs: &[(&str, &str)]) -> (ExitStatus, String, String) {
    let output = Command::new(binary(name))
        .args(args)
        .env(MODEL_DIR, crate::model_dir())
        .envs(envs.iter().copied())
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("the binary runs");
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A running process whose stderr is collected line by line.
pub struct Spawned {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<tokio::task::JoinHandle<()>>,
    /// Leads a process group of its own (a script and what it starts), which
    /// signals reach whole and which is killed whole when dropped.
    group: bool,
}

impl Spawned {
    pub fn start(name: &str, args: &[&str], envs: &[(&str, &str)]) -> Self {
        Self::start_at(&binary(name), args, envs)
    }

    /// [`Spawned::start`] for a binary at `path`.
    pub fn start_at(path: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> Self {
        Self::spawn(Command::new(path).args(args).env(MODEL_DIR, crate::model_dir()).envs(envs.iter().copied()), false)
    }

    /// Runs a script in a process group of its own, as a terminal would: a
    /// signal goes to the script and every process it started (Ctrl-C).
    pub fn start_group(path: &std::path::Path, envs: &[(&str, &str)]) -> Self {
        Self::spawn(
            Command::new(path).env(MODEL_DIR, crate::model_dir()).envs(envs.iter().copied()).process_group(0),
            true,
        )
    }

    fn spawn(command: &mut Command, group: bool) -> Self {
        let mut child =
            command.stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true).spawn().expect("the binary starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = lines.clone();
        let reader = tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                sink.lock().expect("the log lock").push(line);
            }
        });
        Self { child, lines, reader: Some(reader), group }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Everything logged so far.
    pub fn logs(&self) -> String {
        self.lines.lock().expect("the log lock").join("\n")
    }

    /// Waits (up to 30 s) for a log line containing `needle`, and returns it.
    pub async fn wait_for(&mut self, needle: &str) -> String {
        for _ in 0..300 {
            if let Some(line) = self.lines.lock().expect("the log lock").iter().find(|l| l.contains(needle)) {
                return line.clone();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the process exited ({status}) before logging {needle:?}:\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no log line with {needle:?} within 30 s:\n{}", self.logs());
    }

    /// Sends a signal (`TERM`, `KILL`, `STOP`, `CONT`, ...) to the process (to
    /// its whole group, for [`Spawned::start_group`]).
    pub async fn signal(&mut self, signal: &str) {
        let pid = self.child.id().expect("a running process");
        let pid = if self.group { format!("-{pid}") } else { pid.to_string() };
        let sent = Command::new("kill").args([&format!("-{signal}"), "--", &pid]).status().await.expect("kill runs");
        assert!(sent.success());
        if signal == "KILL" {
            let _ = self.child.wait().await;
        }
    }

    /// Sends SIGTERM and waits (up to 30 s) for the exit, and for every line it
    /// logged before it.
    pub async fn terminate(&mut self) -> ExitStatus {
        self.signal("TERM").await;
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the process exits after SIGTERM")
            .expect("an exit status");
        if let Some(reader) = self.reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
        }
        status
    }
}

impl Drop for Spawned {
    /// A process left running (a failed test, or one the test did not stop) is
    /// killed — a group whole, not only its leader — and reaped before the test
    /// returns, so its database connections are closed by the time
    /// `#[sqlx::test]` drops the test's database.
    fn drop(&mut self) {
        let Some(pid) = self.child.id() else { return };
        let target = if self.group { format!("-{pid}") } else { pid.to_string() };
        let _ = std::process::Command::new("kill").args(["-KILL", "--", &target]).status();
        for _ in 0..100 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
