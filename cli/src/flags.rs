//! One `--kebab-case` flag per input property, read from the operation's input
//! schema at run time (contract §14): a new catalog entry gets its flags with no
//! client code.
//!
//! How a property is written on the command line follows from its schema type:
//! text and numbers as the value, booleans as a bare flag (`--confirm`, or
//! `--confirm=false`), arrays comma-separated or repeated, objects as JSON text,
//! `@FILE` or `FILE`. The client does not check values here beyond what it needs to
//! build JSON: the operation's schema does that afterwards, for every flag at once.

use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, ArgMatches};
use serde_json::{Map, Number, Value};
use svc_contract::catalog::flag_name;
use svc_contract::{Issue, Operation, Problem};

use crate::outcome::Failure;

/// How a property's value is written on the command line.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Text,
    Integer,
    Number,
    Boolean,
    List(Box<Kind>),
    /// An object (or anything without a simpler form): JSON text, `@FILE` or `FILE`.
    Json,
}

/// The flag of one input property.
#[derive(Debug)]
pub struct PropertyFlag {
    /// The property name in the input (`agentId`); also the flag's clap id.
    pub property: &'static str,
    /// The flag without dashes (`agent-id`).
    pub long: String,
    pub kind: Kind,
    /// The schema also admits `null`: an empty value sends it.
    pub nullable: bool,
    pub required: bool,
    pub schema: &'static Value,
}

/// The flags of an operation: required properties first, in schema order, then the
/// rest alphabetically, `idempotencyKey` last.
pub fn property_flags(op: &Operation) -> Vec<PropertyFlag> {
    let schema = op.input_schema();
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return Vec::new();
    };
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut flags: Vec<PropertyFlag> = properties
        .iter()
        .map(|(name, property)| {
            let (kind, nullable) = kind_of(property);
            PropertyFlag {
                property: name.as_str(),
                long: flag_name(name),
                kind,
                nullable,
                required: required.contains(&name.as_str()),
                schema: property,
            }
        })
        .collect();
    let rank = |flag: &PropertyFlag| {
        let position = required.iter().position(|r| *r == flag.property);
        (flag.property == "idempotencyKey", position.is_none(), position)
    };
    flags.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.property.cmp(b.property)));
    flags
}

fn kind_of(schema: &Value) -> (Kind, bool) {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let nullable = types.contains(&"null");
    let kind = match types.iter().find(|t| **t != "null") {
        Some(&"string") => Kind::Text,
        Some(&"integer") => Kind::Integer,
        Some(&"number") => Kind::Number,
        Some(&"boolean") => Kind::Boolean,
        Some(&"array") => Kind::List(Box::new(schema.get("items").map_or(Kind::Json, |items| kind_of(items).0))),
        Some(_) => Kind::Json,
        // `oneOf` of string constants (`preset`) is text; anything else is JSON.
        None if choices(schema).is_some() => Kind::Text,
        None => Kind::Json,
    };
    (kind, nullable)
}

/// The values a property admits, when the schema lists them (`enum`, `const`s).
pub fn choices(schema: &Value) -> Option<Vec<String>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().filter(|v| !v.is_null()).map(plain).collect());
    }
    if let Some(value) = schema.get("const") {
        return Some(vec![plain(value)]);
    }
    let branches = schema.get("oneOf").or_else(|| schema.get("anyOf"))?.as_array()?;
    let consts: Option<Vec<String>> = branches.iter().map(|b| b.get("const").map(plain)).collect();
    consts
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl PropertyFlag {
    pub fn arg(&self) -> Arg {
        let arg = Arg::new(self.property).long(self.long.clone()).help(self.help());
        match &self.kind {
            Kind::Boolean => arg
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_parser(["true", "false"])
                .hide_possible_values(true)
                .value_name("true|false"),
            Kind::List(item) => {
                let arg = arg.action(ArgAction::Append).value_name(value_name(item, self.schema.get("items")));
                if matches!(**item, Kind::Json) { arg } else { arg.value_delimiter(',') }
            }
            Kind::Integer | Kind::Number => {
                arg.num_args(1).allow_negative_numbers(true).value_name(value_name(&self.kind, Some(self.schema)))
            }
            _ => arg.num_args(1).value_name(value_name(&self.kind, Some(self.schema))),
        }
    }

    /// The description, then the facts a caller needs to write a valid value.
    fn help(&self) -> String {
        let mut facts = Vec::new();
        if self.required {
            facts.push("required".to_owned());
        }
        let element = match &self.kind {
            Kind::List(_) => self.schema.get("items"),
            _ => Some(self.schema),
        };
        if let Some(choices) = element.and_then(choices) {
            facts.push(format!("one of: {}", choices.join(", ")));
        }
        facts.extend(bounds(self.schema));
        if let Some(element) = element.filter(|_| matches!(self.kind, Kind::List(_))) {
            facts.extend(bounds(element));
        }
        match &self.kind {
            Kind::List(item) if **item == Kind::Json => facts.push("repeat the flag for more items".into()),
            Kind::List(_) => facts.push("comma-separated or repeated".into()),
            Kind::Json => facts.push("JSON text, @FILE or FILE".into()),
            Kind::Boolean => facts.push("a bare flag means true".into()),
            _ => {}
        }
        if self.nullable {
            facts.push("an empty value sends null".into());
        }
        let description = self.schema.get("description").and_then(Value::as_str).unwrap_or_default();
        match (description.is_empty(), facts.is_empty()) {
            (_, true) => description.to_owned(),
            (true, false) => format!("[{}]", facts.join("; ")),
            (false, false) => format!("{description} [{}]", facts.join("; ")),
        }
    }

    /// The JSON value of this flag's occurrences, and the file an object was read
    /// from (a manifest's `contentFile`s are relative to it).
    pub fn value(&self, matches: &ArgMatches) -> Result<Option<(Value, Option<PathBuf>)>, Failure> {
        let Some(raw) = matches.get_many::<String>(self.property) else {
            return Ok(None);
        };
        let raw: Vec<&String> = raw.collect();
        let path = format!("/{}", self.property);
        match &self.kind {
            Kind::List(item) => {
                let items = raw
                    .iter()
                    .enumerate()
                    .map(|(i, r)| scalar_or_json(item, false, r, &format!("{path}/{i}")).map(|(v, _)| v))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Some((Value::Array(items), None)))
            }
            kind => {
                let last = raw.last().map_or("", |r| r.as_str());
                scalar_or_json(kind, self.nullable, last, &path).map(Some)
            }
        }
    }
}

fn value_name(kind: &Kind, schema: Option<&Value>) -> String {
    if let Some(choices) = schema.and_then(choices).filter(|c| c.len() <= 4) {
        return choices.join("|");
    }
    match kind {
        Kind::Text => "TEXT",
        Kind::Integer => "N",
        Kind::Number => "NUMBER",
        Kind::Boolean => "true|false",
        Kind::List(_) | Kind::Json => "JSON|FILE",
    }
    .to_owned()
}

/// Length, range, item-count, pattern and default facts of a schema.
fn bounds(schema: &Value) -> Vec<String> {
    let number = |key: &str| schema.get(key).filter(|v| v.is_number()).map(Value::to_string);
    let range = |min: Option<String>, max: Option<String>, unit: &str| match (min, max) {
        (Some(min), Some(max)) => Some(format!("{min}..{max} {unit}s")),
        (Some(min), None) if min == "1" => Some(format!("at least one {unit}")),
        (Some(min), None) => Some(format!("at least {min} {unit}s")),
        (None, Some(max)) => Some(format!("at most {max} {unit}s")),
        (None, None) => None,
    };
    let mut facts = Vec::new();
    facts.extend(range(number("minLength"), number("maxLength"), "character"));
    facts.extend(match (number("minimum"), number("maximum")) {
        (Some(min), Some(max)) => Some(format!("{min}..{max}")),
        (Some(min), None) => Some(format!("at least {min}")),
        (None, Some(max)) => Some(format!("at most {max}")),
        (None, None) => None,
    });
    facts.extend(range(number("minItems"), number("maxItems"), "item"));
    match schema.get("pattern").and_then(Value::as_str) {
        // Every string refuses the NUL character: saying so on each flag is noise.
        Some(svc_contract::schema::NO_NUL_PATTERN) | None => {}
        Some(svc_contract::chat::URL_PATTERN) => facts.push("an absolute http(s) URL".into()),
        Some(svc_contract::chat::ORIGIN_PATTERN) => facts.push("an origin: scheme://host[:port]".into()),
        Some(pattern) => facts.push(format!("matching {pattern}")),
    }
    if let Some(default) = schema.get("default") {
        facts.push(format!("default: {}", plain(default)));
    }
    facts
}

/// One value in the form its kind calls for. A number or boolean that does not
/// parse stays text, so the schema reports it at its path with the other issues.
fn scalar_or_json(kind: &Kind, nullable: bool, raw: &str, path: &str) -> Result<(Value, Option<PathBuf>), Failure> {
    if nullable && raw.is_empty() {
        return Ok((Value::Null, None));
    }
    let value = match kind {
        Kind::Integer | Kind::Number => {
            serde_json::from_str::<Number>(raw.trim()).map_or_else(|_| Value::String(raw.to_owned()), Value::Number)
        }
        Kind::Boolean => match raw {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            other => Value::String(other.to_owned()),
        },
        Kind::Json => return json_value(raw, path),
        Kind::Text | Kind::List(_) => Value::String(raw.to_owned()),
    };
    Ok((value, None))
}

/// JSON text (it starts with `{` or `[`), or the JSON in `@FILE` or `FILE`.
pub fn json_value(raw: &str, path: &str) -> Result<(Value, Option<PathBuf>), Failure> {
    let trimmed = raw.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return parse_json(raw, path).map(|v| (v, None));
    }
    let file = PathBuf::from(raw.strip_prefix('@').unwrap_or(raw));
    let text = read_text(&file, path)?;
    parse_json(&text, path).map(|v| (v, Some(file)))
}

fn parse_json(text: &str, path: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| {
        Failure::issues(vec![Issue {
            path: path.to_owned(),
            message: format!("is not valid JSON (line {}, column {})", e.line(), e.column()),
        }])
    })
}

/// A file's text, exactly as stored; `path` is where it goes in the input.
pub fn read_text(file: &Path, path: &str) -> Result<String, Failure> {
    let bytes = std::fs::read(file).map_err(|e| {
        Failure::local(
            Problem::invalid("unreadable_file", format!("Cannot read {}: {e}.", file.display()))
                .with_detail("path", path)
                .with_detail("file", file.display().to_string()),
        )
    })?;
    String::from_utf8(bytes).map_err(|_| {
        Failure::issues(vec![Issue { path: path.to_owned(), message: format!("{} is not UTF-8 text", file.display()) }])
    })
}

/// Which object property was read from which file.
pub type SourceFiles = Vec<(String, PathBuf)>;

/// Every flag's value, keyed by property, with the files objects came from.
pub fn collect(flags: &[PropertyFlag], matches: &ArgMatches) -> Result<(Map<String, Value>, SourceFiles), Failure> {
    let mut input = Map::new();
    let mut files = Vec::new();
    for flag in flags {
        if let Some((value, file)) = flag.value(matches)? {
            input.insert(flag.property.to_owned(), value);
            if let Some(file) = file {
                files.push((flag.property.to_owned(), file));
            }
        }
    }
    Ok((input, files))
}

#[cfg(test)]
mod tests {
    use svc_contract::catalog::by_id;

    use super::*;

    fn flag<'a>(flags: &'a [PropertyFlag], property: &str) -> &'a PropertyFlag {
        flags.iter().find(|f| f.property == property).unwrap()
    }

    #[test]
    fn names_and_kinds_follow_the_schema() {
        let flags = property_flags(by_id("agent.create").unwrap());
        let longs: Vec<&str> = flags.iter().map(|f| f.long.as_str()).collect();
        assert_eq!(longs, ["name", "default-language", "instructions", "slug", "temperature", "idempotency-key"]);
        assert_eq!(flag(&flags, "temperature").kind, Kind::Number);
        let flags = property_flags(by_id("api_key.create").unwrap());
        assert_eq!(flag(&flags, "scopes").kind, Kind::List(Box::new(Kind::Text)));
        assert_eq!(flag(&flags, "preset").kind, Kind::Text);
        assert_eq!(choices(flag(&flags, "preset").schema).unwrap(), ["read_only", "operator"]);
        let flags = property_flags(by_id("agent.configure").unwrap());
        assert!(flag(&flags, "instructions").nullable);
        let flags = property_flags(by_id("knowledge_source.reconcile").unwrap());
        assert_eq!(flag(&flags, "manifest").kind, Kind::Json);
        assert_eq!(flag(&flags, "dryRun").kind, Kind::Boolean);
        assert_eq!(flag_name("idempotencyKey"), "idempotency-key");
    }

    #[test]
    fn help_states_bounds_and_choices() {
        let flags = property_flags(by_id("agent.create").unwrap());
        assert_eq!(flag(&flags, "name").help(), "[required; 1..120 characters]");
        assert!(flag(&flags, "temperature").help().contains("0..2"));
        assert!(flag(&flags, "defaultLanguage").help().contains("one of: en, es; default: en"));
        let flags = property_flags(by_id("api_key.create").unwrap());
        let scopes = flag(&flags, "scopes").help();
        assert!(
            scopes.contains("agent:write")
                && scopes.contains("at least one item")
                && scopes.contains("comma-separated")
        );
    }

    #[test]
    fn values_become_json_of_their_kind() {
        let list = Kind::List(Box::new(Kind::Text));
        assert_eq!(scalar_or_json(&Kind::Integer, false, "50", "/p").unwrap().0, Value::from(50));
        assert_eq!(scalar_or_json(&Kind::Number, false, "0.5", "/p").unwrap().0, Value::from(0.5));
        assert_eq!(scalar_or_json(&Kind::Number, false, "warm", "/p").unwrap().0, Value::from("warm"));
        assert_eq!(scalar_or_json(&Kind::Boolean, false, "false", "/p").unwrap().0, Value::from(false));
        assert_eq!(scalar_or_json(&Kind::Text, true, "", "/p").unwrap().0, Value::Null);
        assert_eq!(scalar_or_json(&Kind::Text, false, "", "/p").unwrap().0, Value::from(""));
        assert_eq!(scalar_or_json(&list, false, "a", "/p").unwrap().0, Value::from("a"));
        let object = scalar_or_json(&Kind::Json, false, r#"{"kind": "url"}"#, "/p").unwrap().0;
        assert_eq!(object["kind"], "url");
        let bad = scalar_or_json(&Kind::Json, false, "{nope", "/provenance").unwrap_err();
        assert_eq!(bad.exit_code(), 2);
        assert_eq!(bad.envelope()["error"]["details"]["issues"][0]["path"], "/provenance");
        let missing = scalar_or_json(&Kind::Json, false, "@/nonexistent/file.json", "/manifest").unwrap_err();
        assert_eq!(missing.envelope()["error"]["details"]["reason"], "unreadable_file");
    }
}
