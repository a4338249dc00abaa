//! Every command line our own text prints — the README, `docs/`, the
//! `.svc-dev.env` file, the CLI's help, hints and problem messages — found and
//! checked against the real programs, so a renamed flag or command fails a test
//! instead of a newcomer.
//!
//! A line is `svc ...`, `svc-api ...`, `svc-worker ...` or `curl ...`, in a
//! fenced block, a comment of the env file (whole commands, run as written), or
//! an inline code span or a message (which may only name a command, or leave
//! out flags the sentence is not about). Shell variables get plausible values;
//! placeholders (`<id>`, `{id}`, `NAME`) stay words.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use svc_contract::CATALOG;

use crate::process::binary;

/// Where a line came from and how much of a command it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A whole command, as one would paste it (fenced blocks, the env file).
    Whole,
    /// A command named in a sentence (inline code, a hint in a message).
    Named,
}

/// One command line found in a text.
#[derive(Clone, Debug)]
pub struct Line {
    /// `README.md:120`, `cli/src/login.rs`, `svc --help`.
    pub origin: String,
    /// As printed.
    pub text: String,
    /// The program, then its arguments, variables expanded.
    pub words: Vec<String>,
    pub kind: Kind,
}

impl Line {
    pub fn program(&self) -> &str {
        self.words.first().map_or("", |p| p.rsplit('/').next().unwrap_or(p))
    }
}

/// The programs whose command lines are checked.
const PROGRAMS: [&str; 4] = ["svc", "svc-api", "svc-worker", "curl"];

/// Plausible values of the variables our text uses; any other is `X`.
fn variable(name: &str) -> String {
    match name {
        // Nothing listens there: a command that gets as far as calling fails
        // fast, and never reaches a real service.
        "SVC_URL" | "SVC_ENDPOINT" => "http://127.0.0.1:9".into(),
        "AGENT" => "agt_01jd0000000000000000000000".into(),
        "SOURCE" => "ks_01jd0000000000000000000000".into(),
        "SVC_WORKSPACE" => "ws_01jd0000000000000000000000".into(),
        "SVC_API_KEY" => "svck_Abcdefgh_abcdefghijklmnopqrstuvwxyz123456".into(),
        "PWD" | "HOME" => "/tmp".into(),
        _ => "X".into(),
    }
}

/// A shell word or operator.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    /// `|`, `&&`, `;`, `$(`, `)`, a redirection: a command ends here.
    Break,
}

/// Splits a line as a POSIX shell would, closely enough for our documents:
/// quotes, escapes, `$VAR` and `${VAR}`, command substitution and operators.
fn tokens(line: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    let finish = |word: &mut String, in_word: &mut bool, out: &mut Vec<Token>| {
        if *in_word {
            out.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), c) => word.push(c),
            (Some('"'), '\\') => {
                if let Some(next) = chars.next() {
                    if !matches!(next, '"' | '\\' | '$' | '`') {
                        word.push('\\');
                    }
                    word.push(next);
                }
            }
            (_, '$') if chars.peek() == Some(&'(') => {
                chars.next();
                finish(&mut word, &mut in_word, &mut out);
                out.push(Token::Break);
            }
            (_, '$') if chars.peek().is_some_and(|n| *n == '{' || n.is_ascii_alphabetic() || *n == '_') => {
                let braced = chars.peek() == Some(&'{');
                if braced {
                    chars.next();
                }
                let mut name = String::new();
                while let Some(n) = chars.peek().copied().filter(|n| n.is_ascii_alphanumeric() || *n == '_') {
                    name.push(n);
                    chars.next();
                }
                if braced {
                    chars.next();
                }
                word.push_str(&variable(&name));
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                    in_word = true;
                }
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => finish(&mut word, &mut in_word, &mut out),
            (None, '|' | '&' | ';' | '(' | ')' | '<' | '>') => {
                finish(&mut word, &mut in_word, &mut out);
                out.push(Token::Break);
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    finish(&mut word, &mut in_word, &mut out);
    out
}

/// The commands of one shell line that run one of [`PROGRAMS`].
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for segment in tokens(line).split(|t| *t == Token::Break) {
        let words: Vec<&str> = segment
            .iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some(w.as_str()),
                Token::Break => None,
            })
            .skip_while(|w| is_assignment(w))
            .collect();
        let Some(first) = words.first() else { continue };
        let name = first.rsplit('/').next().unwrap_or(first);
        if PROGRAMS.contains(&name) {
            found.push(words.iter().map(|w| (*w).to_owned()).collect());
        }
    }
    found
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.starts_with('-')
    })
}

/// A command named in prose: optional parts (`[--name N]`) kept, placeholders
/// (`<id or slug>`, `{id}`) made words, alternatives (`owner\|admin`) and
/// ellipses dropped to their first choice.
fn prose(span: &str) -> String {
    let mut text = span.replace("\\|", "|").replace("...", " ").replace('…', " ");
    // `[--name N]` is an optional flag; `[flags]`, `[OPTIONS]` stand for any.
    while let Some(start) = text.find('[') {
        let Some(end) = text[start..].find(']').map(|e| start + e) else { break };
        let inner = text[start + 1..end].trim().to_owned();
        let kept = if inner.starts_with('-') { format!(" {inner} ") } else { " ".to_owned() };
        text.replace_range(start..=end, &kept);
    }
    for (open, close) in [('<', '>'), ('{', '}')] {
        while let (Some(start), Some(end)) = (text.find(open), text.find(close)) {
            if end < start {
                break;
            }
            text.replace_range(start..=end, "X");
        }
    }
    // `trial|starter` is one value with choices, not a pipe.
    text.split_whitespace()
        .map(|w| if w.contains('|') && !w.starts_with('|') { w.split('|').next().unwrap_or(w) } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Spans that look like a command and are something else.
const NOT_COMMANDS: [&str; 1] = [
    // docs/decisions.md: the name the development API keys are given.
    "svc-api --dev-idp",
];

fn named(origin: &str, span: &str) -> Vec<Line> {
    // `svc <command> --help`: any command; nothing to check but the program.
    let generic = span.split_whitespace().nth(1).is_some_and(|w| w.starts_with('<'));
    if generic || NOT_COMMANDS.contains(&span) {
        return Vec::new();
    }
    commands(&prose(span))
        .into_iter()
        .map(|words| Line { origin: origin.to_owned(), text: span.to_owned(), words, kind: Kind::Named })
        .collect()
}

/// The command lines of a Markdown document: every line of its fenced blocks
/// (continuations joined), and its inline code spans.
pub fn markdown(file: &str, text: &str) -> Vec<Line> {
    let mut found = Vec::new();
    let mut fence: Option<String> = None;
    let mut pending = String::new();
    let mut paragraph = (0, String::new());
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let origin = format!("{file}:{}", i + 1);
        if let Some(marker) = &fence {
            if trimmed.starts_with(marker.as_str()) {
                fence = None;
                continue;
            }
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                pending.push(' ');
                continue;
            }
            pending.push_str(line);
            let whole = std::mem::take(&mut pending);
            for words in commands(whole.trim_start_matches("$ ")) {
                found.push(Line { origin: origin.clone(), text: whole.clone(), words, kind: Kind::Whole });
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            found.extend(spans(&paragraph.0, &paragraph.1, file));
            paragraph = (i + 1, String::new());
            fence = Some(trimmed[..3].to_owned());
            continue;
        }
        if trimmed.is_empty() {
            found.extend(spans(&paragraph.0, &paragraph.1, file));
            paragraph = (i + 2, String::new());
        } else {
            if paragraph.1.is_empty() {
                paragraph.0 = i + 1;
            }
            paragraph.1.push_str(line);
            paragraph.1.push(' ');
        }
    }
    found.extend(spans(&paragraph.0, &paragraph.1, file));
    found
}

/// Inline code spans of a paragraph (they may run over a line break).
fn spans(line: &usize, paragraph: &str, file: &str) -> Vec<Line> {
    let mut found = Vec::new();
    let mut parts = paragraph.split('`');
    parts.next();
    while let Some(span) = parts.next() {
        found.extend(named(&format!("{file}:{line}"), span.trim()));
        parts.next();
    }
    found
}

/// The command lines in the comments of a shell file (`.svc-dev.env`): an
/// indented comment is a whole command (`#   svc auth status`), a sentence may
/// name one in backticks.
pub fn shell_comments(file: &str, text: &str) -> Vec<Line> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(comment) = line.trim_start().strip_prefix('#') else { continue };
        let origin = format!("{file}:{}", i + 1);
        if comment.starts_with("  ") {
            let whole = comment.trim().to_owned();
            for words in commands(&whole) {
                found.push(Line { origin: origin.clone(), text: whole.clone(), words, kind: Kind::Whole });
            }
        } else {
            found.extend(rust_source(&origin, comment).into_iter().map(|l| Line { origin: origin.clone(), ..l }));
        }
    }
    found
}

/// Commands quoted in backticks in Rust sources: the hints of the CLI's
/// messages and the server's problem messages (and doc comments, which should
/// be right too).
pub fn rust_source(file: &str, text: &str) -> Vec<Line> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut parts = line.split('`');
        parts.next();
        while let Some(span) = parts.next() {
            // `{{` in a format string prints `{`.
            found.extend(named(&format!("{file}:{}", i + 1), &span.replace("{{", "{").replace("}}", "}")));
            parts.next();
        }
    }
    found
}

/// Commands named in a help text (`(svc auth login)`, `Example: svc ...`),
/// up to the end of their clause; clap's own `Usage:` lines are skipped.
pub fn help_text(origin: &str, text: &str) -> Vec<Line> {
    let mut found = Vec::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("Usage:")) {
        for (start, _) in line.match_indices("svc ") {
            let before = line[..start].chars().last();
            if before.is_some_and(|c| !matches!(c, ' ' | '(' | '`' | ':')) {
                continue;
            }
            let rest = &line[start..];
            let end = rest.find([')', ';', ',', '`']).unwrap_or(rest.len());
            let clause = rest[..end].trim_end_matches('.');
            found.extend(named(origin, clause));
        }
    }
    found
}

/// Files under `dir` (recursively) whose name ends with `extension`.
pub fn files(dir: &Path, extension: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path, extension));
        } else if path.to_string_lossy().ends_with(extension) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// What is wrong with a line, if anything.
pub fn check(line: &Line) -> Option<String> {
    let problem = match line.program() {
        "svc" | "svc-api" | "svc-worker" => check_program(line),
        "curl" => check_curl(line),
        _ => None,
    };
    problem.map(|p| format!("{}: `{}`: {p}", line.origin, line.text))
}

/// The arguments as clap sees them; a `--help` after them makes clap parse
/// every flag and value up to it, then print help instead of running.
fn check_program(line: &Line) -> Option<String> {
    let args = &line.words[1..];
    let mut asked: Vec<&str> = args.iter().map(String::as_str).collect();
    // `svc help [COMMAND]` prints help itself (and takes no `--help`).
    if asked.first() != Some(&"help") {
        asked.push("--help");
    }
    let (ok, _, stderr) = run(line.program(), &asked, &[]);
    if !ok {
        // A sentence may name a flag without its value (`--profile`).
        let needs_value = stderr.contains("a value is required for");
        asked.insert(asked.len() - 1, "X");
        let (ok_with_value, _, _) = run(line.program(), &asked, &[]);
        if !(needs_value && ok_with_value) {
            return Some(first_line(&stderr));
        }
    }
    if line.kind == Kind::Whole && line.program() == "svc" {
        return run_whole(&line.words[1..]);
    }
    None
}

/// Runs a whole `svc` command as written, with no credential and an endpoint
/// where nothing listens: it may fail for those reasons, never because clap
/// refused the command line.
fn run_whole(args: &[String]) -> Option<String> {
    let home = crate::TempDir::new("svc-commands");
    let home_path = home.path().to_string_lossy().into_owned();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let envs = [("HOME", home_path.as_str()), ("SVC_CREDENTIAL_STORE", "file"), ("SVC_ENDPOINT", "http://127.0.0.1:9")];
    let (_, _, stderr) = run("svc", &args, &envs);
    stderr.contains("For more information, try '--help'").then(|| first_line(&stderr))
}

/// A `curl` line's operation path must be in the catalog, and a JSON body
/// written into the line may only use the operation's input properties.
fn check_curl(line: &Line) -> Option<String> {
    let url = line.words.iter().find(|w| w.contains("://"))?;
    let path = url.split_once("/api/public/operations/").map(|(_, p)| p.split(['?', '#']).next().unwrap_or(p))?;
    let Some(op) = CATALOG.iter().find(|op| op.path == path) else {
        return Some(format!("no operation at /api/public/operations/{path}"));
    };
    let data = line.words.windows(2).find(|w| matches!(w[0].as_str(), "-d" | "--data")).map(|w| &w[1]);
    let body: Option<serde_json::Value> = data.and_then(|d| serde_json::from_str(d).ok());
    let properties = op.input_schema().get("properties").and_then(serde_json::Value::as_object)?;
    let unknown: Vec<&String> =
        body.as_ref().and_then(serde_json::Value::as_object)?.keys().filter(|k| !properties.contains_key(*k)).collect();
    (!unknown.is_empty()).then(|| format!("{} takes no {unknown:?}", op.id))
}

/// Every operation path a text mentions (`/api/public/operations/<path>`) that
/// the catalog does not have.
pub fn unknown_operation_paths(origin: &str, text: &str) -> Vec<String> {
    let mut unknown = Vec::new();
    for (at, _) in text.match_indices("/api/public/operations/") {
        let rest = &text[at + "/api/public/operations/".len()..];
        let path: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/')).collect();
        let path = path.trim_end_matches('/');
        if !path.is_empty() && !CATALOG.iter().any(|op| op.path == path) {
            unknown.push(format!("{origin}: /api/public/operations/{path} is no operation"));
        }
    }
    unknown
}

/// The message of an error, without clap's usage and hint lines.
fn first_line(text: &str) -> String {
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if message.is_empty() { "(no message)".to_owned() } else { message.join(" ") }
}

/// Runs a workspace binary with a clean environment (no credential, no
/// profile) and returns (success, stdout, stderr).
fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> (bool, String, String) {
    let home = crate::TempDir::new("svc-commands-home");
    let output = Command::new(binary(program))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .envs(envs.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The help of `svc` and of every command under it, keyed by command line.
pub fn svc_help_texts() -> BTreeMap<String, String> {
    let mut texts = BTreeMap::new();
    let mut queue = vec![Vec::<String>::new()];
    while let Some(path) = queue.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let (_, help, _) = run("svc", &args, &[]);
        if let Some(commands) = help.split("Commands:\n").nth(1) {
            for line in commands.lines().take_while(|l| l.starts_with("  ")) {
                let name = line.split_whitespace().next().unwrap_or_default();
                if !name.is_empty() && name != "help" {
                    let mut child = path.clone();
                    child.push(name.to_owned());
                    queue.push(child);
                }
            }
        }
        texts.insert(format!("svc {}", path.join(" ")).trim_end().to_owned(), help);
    }
    texts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        commands(line)
    }

    #[test]
    fn shell_lines_become_commands() {
        assert_eq!(
            words(r#"AGENT=$(curl -s "$SVC_URL/api/x" -H "A: $AGENT" -d '{"a": 1}' | jq -r .id)"#),
            [vec![
                "curl".to_owned(),
                "-s".into(),
                "http://127.0.0.1:9/api/x".into(),
                "-H".into(),
                "A: agt_01jd0000000000000000000000".into(),
                "-d".into(),
                r#"{"a": 1}"#.into()
            ]]
        );
        assert_eq!(words("SVC_API_KEY=$SVC_API_KEY svc agent list --json # c")[0], ["svc", "agent", "list", "--json"]);
        assert_eq!(words(r#"svc auth login --endpoint "$SVC_URL""#)[0][4], "http://127.0.0.1:9");
        assert!(words("jq .data; echo svc").is_empty());
        assert_eq!(words("cargo build && target/debug/svc version")[0], ["target/debug/svc", "version"]);
    }

    #[test]
    fn prose_keeps_flags_and_drops_placeholders() {
        assert_eq!(
            prose(r"svc-api admin plan-set --workspace WS --plan trial\|starter [--limit KEY=N ...]"),
            "svc-api admin plan-set --workspace WS --plan trial --limit KEY=N"
        );
        assert_eq!(prose("svc workspace select --workspace <id or slug>"), "svc workspace select --workspace X");
        assert_eq!(prose("svc workspace select --workspace {id}"), "svc workspace select --workspace X");
        assert_eq!(prose("svc agent list [flags]"), "svc agent list");
        assert!(named("x", "svc <command> --help").is_empty());
    }

    #[test]
    fn markdown_finds_fenced_lines_and_spans() {
        let text = "Run `svc auth\nlogin --no-browser` now.\n\n```sh\ncurl -s \"$SVC_URL/api/public/operations/agents/list\" \\\n  -d '{}'\n```\n";
        let found = markdown("R.md", text);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].words.join(" "), found[0].kind), ("svc auth login --no-browser".to_owned(), Kind::Named));
        assert_eq!(found[1].kind, Kind::Whole);
        assert_eq!(found[1].origin, "R.md:6");
        assert_eq!(found[1].words.last().map(String::as_str), Some("{}"));
    }
}
