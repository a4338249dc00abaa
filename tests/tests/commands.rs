//! Every command line our text prints works as printed (see
//! `svc_tests::commands`): the README, `docs/`, the CLI's README, help, hints
//! and messages, the server's messages, and the `.svc-dev.env` the development
//! identity provider writes.

#![expect(clippy::unwrap_used, reason = "a test should stop at the first surprise")]

use std::path::{Path, PathBuf};

use sqlx::PgPool;
use svc_tests::TempDir;
use svc_tests::commands::{self, Kind, Line};
use svc_tests::process::{Spawned, binary};
use svc_tests::stack::{database_url, migrate};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repository()).unwrap_or(path).display().to_string()
}

/// Checks every line; fails listing all that are wrong at once.
fn assert_all_work(lines: &[Line], unknown_paths: Vec<String>) {
    let mut wrong: Vec<String> = lines.iter().filter_map(commands::check).collect();
    wrong.extend(unknown_paths);
    assert!(wrong.is_empty(), "{} printed command lines do not work:\n{}", wrong.len(), wrong.join("\n"));
}

/// The documents a newcomer reads.
fn documents() -> Vec<PathBuf> {
    let repo = repository();
    let mut files = vec![repo.join("README.md"), repo.join("cli/README.md")];
    files.extend(commands::files(&repo.join("docs"), ".md"));
    files
}

#[test]
fn every_command_the_documents_print_works() {
    let mut lines = Vec::new();
    let mut unknown = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        lines.extend(commands::markdown(&relative(&file), &text));
        unknown.extend(commands::unknown_operation_paths(&relative(&file), &text));
    }
    // The README's own stumbles, so the extraction cannot quietly miss them.
    let readme: Vec<&Line> = lines.iter().filter(|l| l.origin.starts_with("README.md:")).collect();
    let has = |program: &str, kind: Kind| readme.iter().any(|l| l.program() == program && l.kind == kind);
    assert!(has("curl", Kind::Whole) && has("svc", Kind::Named) && has("svc-api", Kind::Named), "{readme:#?}");
    assert!(readme.iter().any(|l| l.words.starts_with(&["svc".into(), "auth".into(), "login".into()])));
    assert_all_work(&lines, unknown);
}

#[test]
fn every_command_the_sources_quote_works() {
    let repo = repository();
    let mut lines = Vec::new();
    let mut unknown = Vec::new();
    for folder in ["cli/src", "api/src", "worker/src", "shared/contract/src", "shared/core/src"] {
        for file in commands::files(&repo.join(folder), ".rs") {
            let text = std::fs::read_to_string(&file).unwrap();
            lines.extend(commands::rust_source(&relative(&file), &text));
            unknown.extend(commands::unknown_operation_paths(&relative(&file), &text));
        }
    }
    assert!(lines.iter().any(|l| l.origin.starts_with("cli/src/")), "the CLI's hints are found");
    assert_all_work(&lines, unknown);
}

#[test]
fn every_command_the_cli_help_names_works() {
    let helps = commands::svc_help_texts();
    assert!(helps.len() > 40, "every group and command: {:?}", helps.keys());
    let mut lines = Vec::new();
    for (command, help) in &helps {
        lines.extend(commands::help_text(&format!("{command} --help"), help));
    }
    assert!(lines.iter().any(|l| l.words.join(" ") == "svc auth login"), "{lines:#?}");
    assert_all_work(&lines, Vec::new());
}

/// A line that used to be printed and is wrong fails the check (the check is
/// not vacuous).
#[test]
fn a_renamed_flag_or_command_is_caught() {
    let readme = "Then `svc auth login --base-url \"$SVC_URL\"` signs in.\n\n```sh\nsvc identity status\n```\n";
    let lines = commands::markdown("old.md", readme);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for line in &lines {
        let problem = commands::check(line).unwrap_or_else(|| panic!("{line:?} passed"));
        assert!(problem.contains("unexpected argument '--base-url'") || problem.contains("unrecognized subcommand"));
    }
    let missing = commands::markdown("old.md", "```sh\nsvc profile select\n```\n");
    assert!(commands::check(&missing[0]).is_some_and(|p| p.contains("--name")), "{missing:?}");
    let curl = commands::markdown("old.md", "```sh\ncurl -s \"$SVC_URL/api/public/operations/identity/state\"\n```\n");
    assert!(commands::check(&curl[0]).is_some_and(|p| p.contains("no operation")));
    let body = commands::markdown(
        "old.md",
        "```sh\ncurl \"$SVC_URL/api/public/operations/agents/create\" -d '{\"nom\": \"x\"}'\n```\n",
    );
    assert!(commands::check(&body[0]).is_some_and(|p| p.contains("nom")));
    assert_eq!(commands::unknown_operation_paths("x", "see /api/public/operations/agent/create").len(), 1);
}

/// The env file `svc-api serve --dev-idp` writes: its commands parse, its
/// operation paths exist, and its CLI line works as written against the
/// running service, saying which credential it used.
#[sqlx::test(migrations = false)]
async fn the_dev_env_file_commands_work(pool: PgPool) {
    let database = database_url(&pool);
    migrate(&database).await;
    let dir = TempDir::new("svc-commands-dev");
    let env_file = dir.join(".svc-dev.env");
    let envs = [
        ("DATABASE_URL", database.as_str()),
        ("SVC_BIND", "127.0.0.1:0"),
        ("SVC_LOG_FORMAT", "json"),
        ("SVC_DEV_IDP", "true"),
        ("SVC_DEV_ENV_FILE", env_file.to_str().unwrap()),
    ];
    let mut api = Spawned::start("svc-api", &["serve"], &envs);
    api.wait_for("svc-api listening").await;
    let text = std::fs::read_to_string(&env_file).unwrap();
    let lines = commands::shell_comments(".svc-dev.env", &text);
    assert!(lines.iter().any(|l| l.program() == "svc") && lines.iter().any(|l| l.program() == "curl"), "{text}");
    assert_all_work(&lines, commands::unknown_operation_paths(".svc-dev.env", &text));

    // `svc auth status`, as the file suggests, after `source .svc-dev.env`.
    let home = TempDir::new("svc-commands-dev-home");
    let script = format!("source '{}' && '{}' auth status", env_file.display(), binary("svc").display());
    let output = tokio::process::Command::new("bash")
        .args(["-c", &script])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("SVC_CREDENTIAL_STORE", "file")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("auth.mode: workspace_api_key"), "{stdout}");
    assert!(stdout.contains("Credential used: SVC_API_KEY from the environment"), "{stdout}");
    let _ = api.terminate().await;
}
