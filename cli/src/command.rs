//! The command tree, built from the catalog at run time: one command per operation
//! under its `cliCommand`, flags from its input schema (see `flags` and `named`),
//! help from its summary, credentials and problems; plus the client-only commands.

use clap::{Arg, ArgAction, Command};
use svc_contract::{AuthKind, CATALOG, Operation, ProblemCode, WorkspaceRequirement};

use crate::http::CLIENT_VERSION;
use crate::{flags, named};

/// What a matched command line asks for.
pub enum Action<'m> {
    Version,
    Login { open_browser: bool },
    Logout,
    WorkspaceSelect,
    ProfileList,
    ProfileSelect { name: &'m str },
    Operation(&'static Operation),
}

const ABOUT: &str = "The command-line client of svc: every catalog operation as a command.";

const AFTER_HELP: &str = "\
Credentials, first found wins: SVC_API_KEY; the profile's API key (--save-as);
the profile's session (svc auth login). Endpoint: --endpoint, SVC_ENDPOINT, the profile.

Exit codes: 0 success; 1 transport or internal failure; 2 invalid input;
3 authentication, reauthentication or setup required; 4 any other problem.";

/// The whole tree.
pub fn build() -> Command {
    let mut root = Command::new("svc")
        .version(CLIENT_VERSION)
        .about(ABOUT)
        .after_help(AFTER_HELP)
        .subcommand_required(true)
        .arg_required_else_help(true)
        .args(global_args());
    let mut groups: Vec<(String, Vec<Command>)> = vec![
        ("auth".into(), vec![login(), Command::new("logout").about("Forgets the profile's session")]),
        ("workspace".into(), vec![workspace_select()]),
    ];
    for op in &CATALOG {
        let (group, action) = op.cli_command.split_once(' ').unwrap_or((op.cli_command, op.cli_command));
        let command = operation(op, action);
        match groups.iter_mut().find(|(g, _)| g == group) {
            Some((_, commands)) => commands.push(command),
            None => groups.push((group.to_owned(), vec![command])),
        }
    }
    groups.push(("profile".into(), profile_commands()));
    root = root
        .subcommand(Command::new("version").about("Shows client, contract and server versions and whether they fit"));
    for (group, mut commands) in groups {
        // Catalog commands first, then the client's own, in a stable order.
        commands.sort_by_key(|c| c.get_name().to_owned());
        root = root.subcommand(
            Command::new(group.clone())
                .about(group_about(&group))
                .subcommand_required(true)
                .arg_required_else_help(true)
                .subcommands(commands),
        );
    }
    root
}

fn global_args() -> [Arg; 4] {
    const HEADING: &str = "Global options";
    [
        Arg::new("json")
            .long("json")
            .global(true)
            .action(ArgAction::SetTrue)
            .help_heading(HEADING)
            .help("Prints the response envelope (or the command's object) as JSON on stdout"),
        Arg::new("workspace")
            .long("workspace")
            .global(true)
            .value_name("ID|SLUG")
            .help_heading(HEADING)
            .help("The Workspace to act on; else the profile's, else your only one"),
        Arg::new("profile")
            .long("profile")
            .global(true)
            .value_name("NAME")
            .help_heading(HEADING)
            .help("The profile to use; else the current one"),
        Arg::new("endpoint")
            .long("endpoint")
            .global(true)
            .value_name("URL")
            .help_heading(HEADING)
            .help("The server's base URL; else SVC_ENDPOINT, else the profile's"),
    ]
}

fn group_about(group: &str) -> String {
    match group {
        "auth" => "Sign in, sign out, and see who is calling".into(),
        "workspace" => "Workspaces".into(),
        "agent" => "Agents".into(),
        "api-key" => "Workspace API keys".into(),
        "knowledge-source" => "Knowledge Sources".into(),
        "public-chat" => "Public Chat".into(),
        "widget" => "The embeddable Widget".into(),
        "profile" => "Named profiles: endpoint, Workspace and where the credential is kept".into(),
        other => format!("{other} operations"),
    }
}

fn login() -> Command {
    Command::new("login")
        .about("Signs in through the identity provider (OAuth 2.0 with PKCE) and stores the session")
        .arg(
            Arg::new("no-browser")
                .long("no-browser")
                .action(ArgAction::SetTrue)
                .help("Prints the sign-in address instead of opening a browser"),
        )
}

fn workspace_select() -> Command {
    Command::new("select")
        .about("Remembers --workspace in the profile (an empty value clears it)")
        .after_help("Example: svc workspace select --workspace acme")
}

fn profile_commands() -> Vec<Command> {
    vec![
        Command::new("list").about("Lists the profiles; * marks the current one"),
        Command::new("select")
            .about("Makes a profile current (creating it, with --endpoint, if new)")
            .arg(Arg::new("name").long("name").value_name("NAME").required(true).help("The profile's name")),
    ]
}

/// One catalog operation's command.
fn operation(op: &'static Operation, action: &str) -> Command {
    let flags = flags::property_flags(op);
    let replacements = named::replacements(op, &flags);
    let mut command = Command::new(action.to_owned())
        .about(op.summary)
        .override_usage(usage(op, &flags, &replacements))
        .args(flags.iter().map(flags::PropertyFlag::arg))
        .args(named::args(op, &flags))
        .after_help(details(op));
    if digest_computed(&flags) {
        command = command.mut_arg("digest", |arg| {
            arg.help("`sha256:` and the hex SHA-256 of the content; computed when omitted, checked when given")
        });
    }
    // A required property that a named flag can supply instead (`--file` for
    // `--content`) is not required as a flag: the help says so.
    for replacement in &replacements {
        command = command.mut_arg(replacement.property, |arg| {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(help.replacen("[required", &format!("[required unless {}", replacement.words), 1))
        });
    }
    command
}

/// Whether the client computes `digest` from the content when it is omitted
/// (contract §14: add, replace).
fn digest_computed(flags: &[flags::PropertyFlag]) -> bool {
    flags.iter().any(|f| f.property == "content") && flags.iter().any(|f| f.property == "digest")
}

/// The usage line: the command, the flags it cannot run without, `[OPTIONS]`.
/// Stated once here because clap's own line, after a mistake, lists the flags
/// that were typed as if they were the mandatory ones. A digest the client
/// computes is not among them.
fn usage(op: &Operation, flags: &[flags::PropertyFlag], replacements: &[named::Replacement]) -> String {
    let mut line = format!("svc {}", op.cli_command);
    let computed = |f: &&flags::PropertyFlag| f.property == "digest" && digest_computed(flags);
    for flag in flags.iter().filter(|f| f.required).filter(|f| !computed(f)) {
        let arg = flag.arg();
        let value = arg.get_value_names().and_then(|names| names.first()).map(ToString::to_string);
        let own = match value {
            Some(value) => format!("--{} <{value}>", flag.long),
            None => format!("--{}", flag.long),
        };
        match replacements.iter().find(|r| r.property == flag.property) {
            Some(replacement) => line.push_str(&format!(" ({own} | {})", replacement.usage)),
            None => line.push_str(&format!(" {own}")),
        }
    }
    line.push_str(" [OPTIONS]");
    line
}

/// Operation, credentials, Workspace and the problems the command may return.
fn details(op: &Operation) -> String {
    let credentials: Vec<String> = op
        .auth
        .iter()
        .map(|kind| match (kind, op.scope) {
            (AuthKind::OauthToken, _) => "User session".to_owned(),
            (AuthKind::WorkspaceApiKey, Some(scope)) => format!("Workspace API key with {}", scope.as_str()),
            (AuthKind::WorkspaceApiKey, None) => "Workspace API key".to_owned(),
        })
        .collect();
    let workspace = match op.workspace {
        WorkspaceRequirement::Required => "required (--workspace, the profile's, or your only one)",
        WorkspaceRequirement::Optional => "optional",
        WorkspaceRequirement::None => "not used",
    };
    let mut text = format!(
        "Operation: {} (POST /api/public/operations/{})\nCredentials: {}\nWorkspace: {workspace}\n",
        op.id,
        op.path,
        credentials.join(" or ")
    );
    if op.mutating {
        text.push_str("Mutating: the call carries an idempotency key (generated when --idempotency-key is omitted).\n");
    }
    text.push_str("\nProblems it may return (exit code):\n");
    for code in ProblemCode::COMMON.iter().chain(op.problems) {
        text.push_str(&format!("  {} ({})\n", code.as_str(), code.exit_code()));
    }
    text
}

/// The action of matched leaf `group action`.
pub fn action<'m>(group: &str, name: &str, matches: &'m clap::ArgMatches) -> Option<Action<'m>> {
    Some(match (group, name) {
        ("version", _) => Action::Version,
        ("auth", "login") => Action::Login { open_browser: !matches.get_flag("no-browser") },
        ("auth", "logout") => Action::Logout,
        ("workspace", "select") => Action::WorkspaceSelect,
        ("profile", "list") => Action::ProfileList,
        ("profile", "select") => Action::ProfileSelect { name: matches.get_one::<String>("name")?.as_str() },
        _ => {
            let command = format!("{group} {name}");
            Action::Operation(CATALOG.iter().find(|op| op.cli_command == command)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_well_formed() {
        build().debug_assert();
    }

    #[test]
    fn every_operation_has_its_command() {
        let root = build();
        for op in &CATALOG {
            let (group, name) = op.cli_command.split_once(' ').unwrap();
            let command = root.find_subcommand(group).and_then(|g| g.find_subcommand(name));
            assert!(command.is_some(), "{} has no command `{}`", op.id, op.cli_command);
        }
    }

    fn long_help(group: &str, name: &str) -> String {
        let mut root = build();
        root.find_subcommand_mut(group)
            .and_then(|g| g.find_subcommand_mut(name))
            .unwrap()
            .render_long_help()
            .to_string()
    }

    #[test]
    fn flags_that_another_flag_replaces_are_not_shown_as_required() {
        let help = long_help("knowledge-source", "add");
        assert!(help.contains("[required unless --file;"), "{help}");
        assert!(help.contains("[required unless --provenance-kind and --provenance-uri;"), "{help}");
        assert!(
            help.contains("Usage: svc knowledge-source add --agent-id <TEXT> --key <TEXT> --title <TEXT> (--provenance <JSON|FILE> | --provenance-kind <TEXT> --provenance-uri <TEXT>)"),
            "{help}"
        );
        assert!(help.contains("(--content <TEXT> | --file <FILE>)"), "{help}");
        let help = long_help("knowledge-source", "replace");
        assert!(help.contains("[required unless --file;"), "{help}");
    }

    #[test]
    fn a_digest_the_client_computes_is_not_in_the_usage_line() {
        for name in ["add", "replace"] {
            let help = long_help("knowledge-source", name);
            let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap();
            assert!(!usage.contains("--digest"), "{usage}");
            assert!(help.contains("--digest <TEXT>") && help.contains("computed when omitted"), "{help}");
        }
        // Where nothing computes it, a required flag stays in the line.
        let help = long_help("knowledge-source", "inspect");
        assert!(help.contains("Usage: svc knowledge-source inspect --agent-id <TEXT> --source-id <TEXT>"), "{help}");
    }

    #[test]
    fn a_mistake_shows_the_usage_not_the_flags_typed() {
        let error = build().try_get_matches_from(["svc", "agent", "list", "--page-size", "5", "--bogus"]).unwrap_err();
        let text = error.render().to_string();
        assert!(text.contains("Usage: svc agent list [OPTIONS]\n"), "{text}");
        let error = build().try_get_matches_from(["svc", "agent", "create", "--nmae", "x"]).unwrap_err();
        assert!(error.render().to_string().contains("Usage: svc agent create --name <TEXT> [OPTIONS]"), "{error}");
    }

    #[test]
    fn help_lists_flags_and_problems() {
        let mut root = build();
        let help = root
            .find_subcommand_mut("knowledge-source")
            .and_then(|g| g.find_subcommand_mut("wait"))
            .unwrap()
            .render_long_help()
            .to_string();
        for expected in
            ["--agent-id", "--source-id", "--timeout-ms", "processing_timeout (4)", "authentication_required (3)"]
        {
            assert!(help.contains(expected), "{expected} missing from:\n{help}");
        }
    }
}
