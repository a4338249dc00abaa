//! The spec's named client flags (contract §14), beside the flags derived from the
//! schema. Each is attached where the input or output it acts on exists, not to a
//! command by name, so a new operation with the same shape gets it too:
//!
//! | flag | where | does |
//! | --- | --- | --- |
//! | `--file FILE` | input has `content` | reads `content` from FILE (UTF-8 bytes exactly) |
//! | `--digest` | input has `content` and `digest` | optional: computed from the content, or checked against it |
//! | `--provenance-kind`, `--provenance-uri` | input has a flat object `provenance` | one flag per member |
//! | `--yes` | input has `confirm` | `confirm: true`, or the exact id the command names; with `tombstone` and `prune` also true |
//! | `--apply` | input has `dryRun` | `dryRun: false` |
//! | `--manifest FILE` | input has `manifest` | entries may carry `contentFile` (relative to FILE) instead of `content` |
//! | `--save-as NAME` | output has `secret` | stores the new secret under profile NAME and prints `"secret": null` |
//! | `--timeout-ms`, `--no-wait` | polled operations | see `poll` |

use std::path::Path;
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches};
use serde_json::{Map, Value};
use svc_contract::catalog::flag_name;
use svc_contract::{Operation, Problem};

use crate::flags::{Kind, PropertyFlag, SourceFiles, read_text};
use crate::outcome::Failure;
use crate::poll::Polling;

/// Default of `--timeout-ms` (contract §14).
pub const DEFAULT_TIMEOUT_MS: u64 = 900_000;

/// What the named flags ask of the command beyond its input.
#[derive(Debug, Default)]
pub struct Requests {
    pub save_as: Option<String>,
    pub timeout: Option<Duration>,
    pub no_wait: bool,
}

/// The `type` of one property of an object schema.
fn property_type<'s>(schema: &'s Map<String, Value>, property: &str) -> Option<&'s str> {
    schema.get("properties")?.get(property)?.get("type")?.as_str()
}

fn has(op: &Operation, property: &str) -> bool {
    op.input_schema().get("properties").and_then(|p| p.get(property)).is_some()
}

/// Whether the operation's success data carries a one-time secret.
pub fn returns_secret(op: &Operation) -> bool {
    op.output_schema().get("properties").and_then(|p| p.pointer("/data/properties/secret")).is_some()
}

/// Members of a flat object property (only text, number and boolean members),
/// each of which gets its own flag.
fn flat_members(flag: &PropertyFlag) -> Vec<(&'static str, String)> {
    if flag.kind != Kind::Json {
        return Vec::new();
    }
    let Some(Value::Object(members)) = flag.schema.get("properties") else {
        return Vec::new();
    };
    let scalar =
        |m: &Value| matches!(m.get("type").and_then(Value::as_str), Some("string" | "number" | "integer" | "boolean"));
    if !members.values().all(scalar) {
        return Vec::new();
    }
    members.keys().map(|m| (m.as_str(), format!("{}-{}", flag.long, flag_name(m)))).collect()
}

/// The named flags of an operation, given its property flags.
pub fn args(op: &Operation, flags: &[PropertyFlag]) -> Vec<Arg> {
    let mut args = Vec::new();
    if has(op, "content") {
        args.push(
            Arg::new("file")
                .long("file")
                .value_name("FILE")
                .conflicts_with("content")
                .help("Reads `content` from FILE, as UTF-8 bytes exactly"),
        );
    }
    for flag in flags {
        for (member, long) in flat_members(flag) {
            let help = flag.schema.pointer(&format!("/properties/{member}")).map(member_help).unwrap_or_default();
            args.push(Arg::new(long.clone()).long(long).value_name("TEXT").conflicts_with(flag.property).help(help));
        }
    }
    if has(op, "confirm") {
        args.push(Arg::new("yes").long("yes").action(ArgAction::SetTrue).help(yes_help(op)));
    }
    if has(op, "dryRun") {
        args.push(
            Arg::new("apply")
                .long("apply")
                .action(ArgAction::SetTrue)
                .conflicts_with("dryRun")
                .help("Applies the plan (sends `dryRun: false`)"),
        );
    }
    if returns_secret(op) {
        args.push(
            Arg::new("save-as")
                .long("save-as")
                .value_name("NAME")
                .help("Stores the new secret in the credential store under profile NAME and prints `\"secret\": null`"),
        );
    }
    args.extend(Polling::of(op).map(Polling::args).unwrap_or_default());
    args
}

/// A required property that named flags supply instead of the property's own
/// flag: `content` (`--file`) and flat objects (`--provenance-kind` and
/// `--provenance-uri`).
pub struct Replacement {
    pub property: &'static str,
    /// The alternative in words, for the help: `--file`.
    pub words: String,
    /// The alternative in a usage line: `--file <FILE>`.
    pub usage: String,
}

pub fn replacements(op: &Operation, flags: &[PropertyFlag]) -> Vec<Replacement> {
    let mut replaced = Vec::new();
    if has(op, "content") {
        replaced.push(Replacement { property: "content", words: "--file".into(), usage: "--file <FILE>".into() });
    }
    for flag in flags {
        let members: Vec<String> = flat_members(flag).into_iter().map(|(_, long)| format!("--{long}")).collect();
        if !members.is_empty() {
            replaced.push(Replacement {
                property: flag.property,
                words: members.join(" and "),
                usage: members.iter().map(|m| format!("{m} <TEXT>")).collect::<Vec<_>>().join(" "),
            });
        }
    }
    replaced
}

fn member_help(schema: &Value) -> String {
    let mut help = Vec::new();
    if let Some(choices) = crate::flags::choices(schema) {
        help.push(format!("one of: {}", choices.join(", ")));
    }
    if let (Some(min), Some(max)) = (schema.get("minLength"), schema.get("maxLength")) {
        help.push(format!("{min}..{max} characters"));
    }
    format!("[{}]", help.join("; "))
}

fn yes_help(op: &Operation) -> String {
    match confirm_target(op) {
        Some(id) if has(op, "tombstone") => {
            format!("Confirms: sends `confirm` equal to --{}, with `tombstone` and `prune` true", flag_name(id))
        }
        Some(id) => format!("Confirms: sends `confirm` equal to --{}", flag_name(id)),
        None => "Confirms: sends `confirm: true`".into(),
    }
}

/// The id a text `confirm` must repeat: the last required `...Id` property
/// (`sourceId` for knowledge-source delete, `agentId` for public-chat disable).
fn confirm_target(op: &Operation) -> Option<&'static str> {
    let schema = op.input_schema();
    if property_type(schema, "confirm") != Some("string") {
        return None;
    }
    let required = schema.get("required")?.as_array()?;
    required.iter().filter_map(Value::as_str).rfind(|name| name.ends_with("Id"))
}

/// Applies the named flags to `input`; `files` says which object properties were
/// read from which file.
pub fn apply(
    op: &Operation,
    flags: &[PropertyFlag],
    matches: &ArgMatches,
    input: &mut Map<String, Value>,
    files: &SourceFiles,
) -> Result<Requests, Failure> {
    if let Some(file) = matches.try_get_one::<String>("file").ok().flatten() {
        input.insert("content".into(), Value::String(read_text(Path::new(file), "/content")?));
    }
    for flag in flags {
        for (member, long) in flat_members(flag) {
            if let Some(value) = matches.get_one::<String>(&long) {
                let object = input.entry(flag.property).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(object) = object {
                    object.insert(member.to_owned(), Value::String(value.clone()));
                }
            }
        }
    }
    if has(op, "digest")
        && let Some(Value::String(content)) = input.get("content")
    {
        let computed = digest(content);
        match input.get("digest").and_then(Value::as_str) {
            None => {
                input.insert("digest".into(), Value::String(computed));
            }
            Some(given) if given != computed => return Err(digest_mismatch("/digest", &computed)),
            Some(_) => {}
        }
    }
    if flag_set(matches, "yes") {
        confirm(op, input);
    }
    if flag_set(matches, "apply") {
        input.insert("dryRun".into(), Value::Bool(false));
    }
    if let Some(Value::Object(manifest)) = input.get_mut("manifest") {
        let base = files.iter().find(|(p, _)| p == "manifest").and_then(|(_, f)| f.parent()).unwrap_or(Path::new(""));
        resolve_content_files(manifest, base)?;
    }
    let save_as = matches.try_get_one::<String>("save-as").ok().flatten().cloned();
    if let Some(name) = &save_as {
        crate::config::check_profile_name(name)?;
    }
    let polling = Polling::of(op);
    Ok(Requests {
        save_as,
        timeout: polling.map(|_| {
            let ms = matches.try_get_one::<u64>("timeout-ms").ok().flatten().copied().unwrap_or(DEFAULT_TIMEOUT_MS);
            Duration::from_millis(ms)
        }),
        no_wait: flag_set(matches, "no-wait"),
    })
}

fn flag_set(matches: &ArgMatches, id: &str) -> bool {
    matches.try_get_one::<bool>(id).ok().flatten().copied().unwrap_or(false)
}

/// `--yes`: `confirm` as the operation wants it, and the other consents a
/// deletion needs. Values given explicitly are kept.
fn confirm(op: &Operation, input: &mut Map<String, Value>) {
    let value = match confirm_target(op) {
        Some(id) => input.get(id).cloned(),
        None => Some(Value::Bool(true)),
    };
    if let Some(value) = value {
        input.entry("confirm").or_insert(value);
    }
    for consent in ["tombstone", "prune"] {
        if property_type(op.input_schema(), consent) == Some("boolean") {
            input.entry(consent).or_insert(Value::Bool(true));
        }
    }
}

/// `sha256:` and the hex SHA-256 of the text's UTF-8 bytes.
pub fn digest(content: &str) -> String {
    svc_contract::digest::sha256_prefixed(content.as_bytes())
}

fn digest_mismatch(path: &str, computed: &str) -> Failure {
    Failure::local(
        Problem::invalid("digest_mismatch", "The digest does not match the content.")
            .with_detail("path", path)
            .with_detail("expected", computed),
    )
}

/// Manifest entries with `contentFile`: the file's text becomes `content`, and
/// the entry's `digest` must match it (computed when absent).
fn resolve_content_files(manifest: &mut Map<String, Value>, base: &Path) -> Result<(), Failure> {
    let Some(Value::Array(sources)) = manifest.get_mut("sources") else {
        return Ok(());
    };
    for (i, entry) in sources.iter_mut().enumerate() {
        let Value::Object(entry) = entry else { continue };
        let Some(Value::String(file)) = entry.remove("contentFile") else { continue };
        let at = format!("/manifest/sources/{i}");
        let content = read_text(&base.join(file), &format!("{at}/content"))?;
        let computed = digest(&content);
        match entry.get("digest").and_then(Value::as_str) {
            None => {
                entry.insert("digest".into(), Value::String(computed));
            }
            Some(given) if given != computed => return Err(digest_mismatch(&format!("{at}/digest"), &computed)),
            Some(_) => {}
        }
        entry.insert("content".into(), Value::String(content));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use svc_contract::catalog::by_id;

    use super::*;

    #[test]
    fn digests_are_sha256_hex() {
        assert_eq!(digest(""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn yes_names_the_id_the_command_names() {
        assert_eq!(confirm_target(by_id("knowledge_source.delete").unwrap()), Some("sourceId"));
        assert_eq!(confirm_target(by_id("public_chat.disable").unwrap()), Some("agentId"));
        assert_eq!(confirm_target(by_id("agent.delete").unwrap()), None);
        let mut input = Map::new();
        input.insert("agentId".into(), "agt_1".into());
        input.insert("sourceId".into(), "ks_1".into());
        confirm(by_id("knowledge_source.delete").unwrap(), &mut input);
        assert_eq!(
            Value::Object(input),
            serde_json::json!({"agentId": "agt_1", "sourceId": "ks_1", "confirm": "ks_1", "tombstone": true, "prune": true})
        );
        let mut input = Map::new();
        confirm(by_id("api_key.revoke").unwrap(), &mut input);
        assert_eq!(Value::Object(input), serde_json::json!({"confirm": true}));
    }

    #[test]
    fn provenance_gets_member_flags() {
        let op = by_id("knowledge_source.add").unwrap();
        let flags = crate::flags::property_flags(op);
        let names: Vec<String> = args(op, &flags).iter().map(|a| a.get_id().to_string()).collect();
        assert_eq!(names, ["file", "provenance-kind", "provenance-uri"]);
        let op = by_id("widget.configure").unwrap();
        assert!(args(op, &crate::flags::property_flags(op)).is_empty(), "configuration is not flat");
        assert!(returns_secret(by_id("api_key.rotate").unwrap()));
        assert!(!returns_secret(by_id("api_key.revoke").unwrap()));
    }
}
