//! `svc`: the command-line client of svc (contract §14).
//!
//! Every catalog operation is a command built from `svc-contract` at run time; the
//! client speaks HTTP only, prints the server's envelope under `--json`, and exits
//! 0–4 by problem code.

mod caller;
mod command;
mod config;
mod context;
mod credentials;
mod flags;
mod http;
mod local;
mod login;
mod named;
mod operation;
mod outcome;
mod poll;
mod render;
mod secrets;

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use serde_json::Value;

use crate::command::Action;
use crate::context::{Context, Env, Globals};
use crate::outcome::{Failure, Output};

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Known before parsing, so even a command line clap refuses can answer in JSON.
    let json = args.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json");
    let code = match run(args) {
        Ok(Output::Printed) => 0,
        Ok(Output::Value { json: value, human, exit }) => {
            if json {
                print_json(&value);
            } else {
                let _ = std::io::stdout().write_all(human.as_bytes());
            }
            exit
        }
        Err(Refusal::Clap(error)) if json => {
            let failure = Failure::usage(usage_message(&error));
            print_json(failure.envelope());
            failure.exit_code()
        }
        Err(Refusal::Clap(error)) => {
            let _ = error.print();
            2
        }
        Err(Refusal::Failed(failure)) => {
            if json {
                print_json(failure.envelope());
            } else {
                let _ = std::io::stderr().write_all(render::failure(&failure).as_bytes());
            }
            failure.exit_code()
        }
    };
    ExitCode::from(code)
}

/// Why a command did not succeed.
enum Refusal {
    /// The command line itself (clap has the best words for it).
    Clap(clap::Error),
    Failed(Failure),
}

impl From<Failure> for Refusal {
    fn from(failure: Failure) -> Self {
        Self::Failed(failure)
    }
}

fn run(args: Vec<OsString>) -> Result<Output, Refusal> {
    let matches = match command::build().try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(error) if matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = error.print();
            return Ok(Output::Printed);
        }
        Err(error) => return Err(Refusal::Clap(error)),
    };
    let Some((group, group_matches)) = matches.subcommand() else {
        return Err(Failure::usage("Name a command; see `svc help`.").into());
    };
    let (name, leaf) = group_matches.subcommand().unwrap_or((group, group_matches));
    let action = command::action(group, name, leaf)
        .ok_or_else(|| Failure::usage(format!("Unknown command `{group} {name}`; see `svc help`.")))?;
    let mut ctx = Context::new(Globals::from_matches(leaf), Env::from_process())?;
    let output = match action {
        Action::Version => local::version(&ctx),
        Action::Login { open_browser } => login::login(&mut ctx, open_browser)?,
        Action::Logout => login::logout(&mut ctx)?,
        Action::WorkspaceSelect => local::workspace_select(&mut ctx)?,
        Action::ProfileList => local::profile_list(&ctx),
        Action::ProfileSelect { name } => local::profile_select(&mut ctx, name)?,
        Action::Operation(op) => operation::run(&mut ctx, op, leaf)?,
    };
    Ok(output)
}

/// JSON on stdout: indented for a person at a terminal, one line for a program.
fn print_json(value: &Value) {
    let text = if std::io::stdout().is_terminal() {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", text.unwrap_or_default());
}

/// clap's own sentence for what is wrong with the command line.
fn usage_message(error: &clap::Error) -> String {
    let text = error.render().to_string();
    match text.lines().next().and_then(|line| line.strip_prefix("error: ")) {
        Some(sentence) => sentence.to_owned(),
        None => "The command is incomplete; see its --help.".to_owned(),
    }
}
