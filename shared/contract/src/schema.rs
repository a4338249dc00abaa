//! How the contract's JSON Schemas are generated from its Rust types.
//!
//! Inputs and outputs are described by `schemars` derives on the types themselves, so
//! a type and its schema cannot drift apart. Generation is tuned here once:
//! subschemas are inlined (each operation schema stands alone, as MCP clients
//! prefer), numeric `format`s that are not JSON Schema vocabulary are dropped, and
//! optional input fields that must not be `null` say so with [`not_null`].

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// Milliseconds since the Unix epoch (UTC), as every timestamp in the contract.
pub type Timestamp = i64;

/// Dialect of every schema the contract publishes.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

fn generator(settings: SchemaSettings) -> SchemaGenerator {
    settings
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(RecursiveTransform(drop_numeric_format))
        .with_transform(RecursiveTransform(drop_null_default))
        .into_generator()
}

/// The schema of an operation's input type, as a standalone document.
pub fn input_schema<T: JsonSchema>() -> Map<String, Value> {
    root(generator(SchemaSettings::draft2020_12().for_deserialize()).into_root_schema_for::<T>())
}

/// The schema of an operation's output type, as a standalone document.
pub fn output_schema<T: JsonSchema>() -> Map<String, Value> {
    root(generator(SchemaSettings::draft2020_12().for_serialize()).into_root_schema_for::<T>())
}

fn root(schema: Schema) -> Map<String, Value> {
    let mut map = match schema.to_value() {
        Value::Object(map) => map,
        other => Map::from_iter([("allOf".to_owned(), json!([other]))]),
    };
    map.remove("title");
    map
}

/// Pattern declared on every input string that has no stricter rule of its own:
/// no text may hold U+0000 (PostgreSQL cannot store it, and no name, instruction
/// or document needs it). The server refuses it wherever it is, keys included.
pub const NO_NUL_PATTERN: &str = r"^[^\u0000]*$";

/// Declares [`NO_NUL_PATTERN`] on every string of an input schema without a
/// `pattern`, `enum` or `const` of its own (those already exclude U+0000), and
/// on the names of any object that admits properties it does not list.
pub fn forbid_nul(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let is_string = match map.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
                _ => false,
            };
            if is_string && !["pattern", "enum", "const"].iter().any(|k| map.contains_key(*k)) {
                map.insert("pattern".into(), NO_NUL_PATTERN.into());
            }
            let open_object = map.get("type").is_some_and(|t| t == "object")
                && map.get("additionalProperties").is_none_or(|extra| extra != false);
            if open_object && !map.contains_key("propertyNames") {
                map.insert("propertyNames".into(), json!({ "pattern": NO_NUL_PATTERN }));
            }
            for (key, value) in map.iter_mut() {
                if !matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    forbid_nul(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(forbid_nul),
        _ => {}
    }
}

/// `format`s schemars adds to numbers (`int64`, `double`, ...) are not JSON Schema
/// vocabulary; the bounds that matter are stated with `minimum`/`maximum`.
fn drop_numeric_format(schema: &mut Schema) {
    let is_numeric = |t: &Value| t == "integer" || t == "number";
    let numeric = match schema.get("type") {
        Some(Value::Array(types)) => types.iter().any(is_numeric),
        Some(t) => is_numeric(t),
        None => false,
    };
    if numeric && schema.get("format").is_some() {
        schema.remove("format");
    }
}

/// An optional field's `"default": null` says nothing the absence of `required`
/// does not, and contradicts [`not_null`].
fn drop_null_default(schema: &mut Schema) {
    if schema.get("default").is_some_and(Value::is_null) {
        schema.remove("default");
    }
}

/// Field transform for an optional input that may be omitted but not sent as `null`
/// (`Option<T>` alone would allow `null`).
pub fn not_null(schema: &mut Schema) {
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            schema.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    let any_of = schema.get("anyOf").and_then(Value::as_array).cloned();
    if let Some(branches) = any_of {
        let mut rest: Vec<Value> = branches.into_iter().filter(|b| b.get("type") != Some(&json!("null"))).collect();
        if rest.len() == 1 {
            schema.remove("anyOf");
            if let Value::Object(inner) = rest.remove(0) {
                for (k, v) in inner {
                    schema.insert(k, v);
                }
            }
        } else {
            schema.insert("anyOf".into(), Value::Array(rest));
        }
    }
}

/// Declares a boolean that can only be one value (`deleted: true`, `tombstone: false`).
macro_rules! boolean_literal {
    ($(#[$meta:meta])* $name:ident = $value:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_bool($value)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                if bool::deserialize(deserializer)? == $value {
                    Ok(Self)
                } else {
                    Err(serde::de::Error::custom(concat!("expected ", stringify!($value))))
                }
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                schemars::json_schema!({ "type": "boolean", "const": $value })
            }
        }
    };
}

boolean_literal!(
    /// Always `true`.
    True = true
);
boolean_literal!(
    /// Always `false`.
    False = false
);
