//! A JSON Schema in words: the rows of a field table (one per field, nested
//! fields and alternative shapes included), type names, and rules.

use serde_json::{Map, Value};

use crate::markdown::{code, literal};

/// One row of a field table.
pub struct Field {
    /// Dotted path below the input or `data`: `configuration.appearance.theme`,
    /// `agents[].id`.
    pub path: String,
    /// Which alternative shape of an item the field belongs to (`shape 1`).
    shape: String,
    pub top_level: bool,
    pub ty: String,
    /// `None` for the row that introduces a shape.
    pub required: Option<bool>,
    pub rules: Vec<String>,
    pub description: String,
}

impl Field {
    pub fn field(&self) -> String {
        if self.shape.is_empty() { code(&self.path) } else { format!("{} ({})", code(&self.path), self.shape) }
    }
}

/// The names in an object schema's `required`.
pub fn required(schema: &Map<String, Value>) -> Vec<&str> {
    schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

/// An object schema's properties: required ones first in their declared order,
/// then the rest by name, `idempotencyKey` last, as the CLI orders its flags.
pub fn properties(schema: &Map<String, Value>) -> Vec<(&str, &Value, bool)> {
    let required = required(schema);
    let mut properties: Vec<(&str, &Value, bool)> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, property)| (name.as_str(), property, required.contains(&name.as_str())))
        .collect();
    let rank = |name: &str| {
        let position = required.iter().position(|r| *r == name);
        (name == "idempotencyKey", position.is_none(), position)
    };
    properties.sort_by(|a, b| rank(a.0).cmp(&rank(b.0)).then_with(|| a.0.cmp(b.0)));
    properties
}

/// Appends a row for each property of `schema`, and of the objects inside it.
pub fn fields(schema: &Map<String, Value>, prefix: &str, shape: &str, rows: &mut Vec<Field>) {
    for (name, property, is_required) in properties(schema) {
        let path = if prefix.is_empty() { name.to_owned() } else { format!("{prefix}.{name}") };
        let (property, nullable) = non_null(property);
        let mut ty = type_name(&property);
        if nullable {
            ty.push_str(" or null");
        }
        rows.push(Field {
            path: path.clone(),
            shape: shape.to_owned(),
            top_level: prefix.is_empty() && shape.is_empty(),
            ty,
            required: Some(is_required),
            rules: rules(&property),
            description: description(&property),
        });
        nested(&property, &path, shape, rows);
    }
}

/// Rows for what an object, an array's items or a choice of shapes contains.
fn nested(schema: &Map<String, Value>, path: &str, shape: &str, rows: &mut Vec<Field>) {
    fields(schema, path, shape, rows);
    if let Some(items) = schema.get("items") {
        let (items, _) = non_null(items);
        nested(&items, &format!("{path}[]"), shape, rows);
    }
    let shapes: Vec<Map<String, Value>> =
        branches(schema).iter().map(|b| non_null(b).0).filter(|b| b.contains_key("properties")).collect();
    for (i, branch) in shapes.iter().enumerate() {
        let label = format!("shape {}", i + 1);
        rows.push(Field {
            path: path.to_owned(),
            shape: label.clone(),
            top_level: false,
            ty: type_name(branch),
            required: None,
            rules: rules(branch),
            description: description(branch),
        });
        fields(branch, path, &label, rows);
    }
}

/// Whether a schema is an object with named fields, or a choice of such objects.
fn has_object_shape(schema: &Map<String, Value>) -> bool {
    schema.contains_key("properties") || branches(schema).iter().any(|b| non_null(b).0.contains_key("properties"))
}

fn description(schema: &Map<String, Value>) -> String {
    schema.get("description").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The alternatives of a schema (`anyOf` or `oneOf`).
fn branches(schema: &Map<String, Value>) -> &[Value] {
    schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn is_null_type(schema: &Value) -> bool {
    schema.get("type").is_some_and(|t| t == "null")
}

/// A schema with `null` taken out, and whether it allowed `null`: from a
/// `type` list, from an `enum`, or as one branch of two (`anyOf: [T, null]`).
pub fn non_null(schema: &Value) -> (Map<String, Value>, bool) {
    let mut map = schema.as_object().cloned().unwrap_or_default();
    let mut nullable = false;
    for keyword in ["anyOf", "oneOf"] {
        let Some(Value::Array(alternatives)) = map.get(keyword) else { continue };
        if !alternatives.iter().any(is_null_type) {
            continue;
        }
        nullable = true;
        let mut rest: Vec<Value> = alternatives.iter().filter(|b| !is_null_type(b)).cloned().collect();
        if let [Value::Object(only)] = rest.as_mut_slice() {
            map.remove(keyword);
            for (key, value) in std::mem::take(only) {
                map.entry(key).or_insert(value);
            }
        } else {
            map.insert(keyword.into(), Value::Array(rest));
        }
    }
    if let Some(Value::Array(types)) = map.get_mut("type") {
        let before = types.len();
        types.retain(|t| t != "null");
        nullable |= types.len() < before;
        if let [only] = types.as_slice() {
            let only = only.clone();
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        let before = values.len();
        values.retain(|v| !v.is_null());
        nullable |= values.len() < before;
    }
    (map, nullable)
}

/// `string`, `array of object`, `map of string to integer`, `string or integer`.
pub fn type_name(schema: &Map<String, Value>) -> String {
    let map_of = schema.get("additionalProperties").filter(|a| a.is_object() && !schema.contains_key("properties"));
    if let Some(values) = map_of {
        return format!("map of string to {}", type_name(&non_null(values).0));
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => {
            let items = schema.get("items").map(|items| type_name(&non_null(items).0));
            format!("array of {}", items.unwrap_or_else(|| "any".into()))
        }
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => {
            let mut names: Vec<String> =
                branches(schema).iter().map(|b| type_name(&non_null(b).0)).filter(|n| n != "any").collect();
            names.dedup();
            if names.is_empty() { "any".into() } else { names.join(" or ") }
        }
    }
}

/// Bounds, patterns, choices and defaults of a schema, in words.
fn rules(schema: &Map<String, Value>) -> Vec<String> {
    let mut said = Vec::new();
    let number = |key: &str| schema.get(key).filter(|v| v.is_number()).map(Value::to_string);
    let range = |min: Option<String>, max: Option<String>, unit: &str| {
        let unit = |n: &str| if n == "1" { unit.trim_end_matches('s').to_owned() } else { unit.to_owned() };
        match (min, max) {
            (Some(min), Some(max)) => Some(format!("{min}..{max}{}", unit(""))),
            (Some(min), None) => Some(format!("at least {min}{}", unit(&min))),
            (None, Some(max)) => Some(format!("at most {max}{}", unit(&max))),
            (None, None) => None,
        }
    };
    if let Some(value) = schema.get("const") {
        said.push(format!("exactly {}", literal(value)));
    } else {
        said.extend(range(number("minimum"), number("maximum"), ""));
    }
    match schema.get("enum").and_then(Value::as_array).map(Vec::as_slice) {
        Some([only]) => said.push(format!("exactly {}", literal(only))),
        Some(values) => said.push(format!("one of {}", values.iter().map(literal).collect::<Vec<_>>().join(", "))),
        None => {}
    }
    said.extend(range(number("minLength"), number("maxLength"), " characters"));
    said.extend(range(number("minItems"), number("maxItems"), " items"));
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        said.push(format!("pattern {}", code(pattern)));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        said.push(format!("format {}", code(format)));
    }
    said.extend(choices(schema));
    // Items that are objects get rows of their own; simpler items are said here.
    let items = schema.get("items").map(|items| non_null(items).0);
    if let Some(items) = items.filter(|i| !has_object_shape(i)) {
        let each = rules(&items);
        if !each.is_empty() {
            said.push(format!("each {}", each.join(", ")));
        }
    }
    let values = schema.get("additionalProperties").filter(|v| v.is_object()).map(|v| non_null(v).0);
    if let Some(values) = values.filter(|v| !has_object_shape(v)) {
        let each = rules(&values);
        if !each.is_empty() {
            said.push(format!("each value {}", each.join(", ")));
        }
    }
    if let Some(default) = schema.get("default") {
        said.push(format!("default {}", literal(default)));
    }
    said
}

/// Alternatives that are not objects, in words: `one of read_only (The five...)`
/// for constants, `format email, or ""` otherwise.
fn choices(schema: &Map<String, Value>) -> Option<String> {
    let alternatives: Vec<Map<String, Value>> = branches(schema).iter().map(|b| non_null(b).0).collect();
    if alternatives.is_empty() || has_object_shape(schema) {
        return None;
    }
    if alternatives.iter().all(|b| b.contains_key("const")) {
        let values: Vec<String> = alternatives
            .iter()
            .map(|b| {
                let value = b.get("const").map(literal).unwrap_or_default();
                match b.get("description").and_then(Value::as_str) {
                    Some(d) => format!("{value} ({d})"),
                    None => value,
                }
            })
            .collect();
        return Some(format!("one of {}", values.join(", ")));
    }
    let words: Vec<String> = alternatives
        .iter()
        .map(|b| {
            let rules = rules(b);
            if rules.is_empty() { type_name(b) } else { rules.join(", ").trim_start_matches("exactly ").to_owned() }
        })
        .collect();
    Some(format!("either {}", words.join(", or ")))
}

/// A note for a root `oneOf`/`anyOf` of `required` lists: which fields go together.
pub fn alternatives(schema: &Map<String, Value>) -> Option<String> {
    let (how, groups) = match (schema.get("oneOf"), schema.get("anyOf")) {
        (Some(Value::Array(groups)), _) => ("Exactly one of", groups),
        (_, Some(Value::Array(groups))) => ("At least one of", groups),
        _ => return None,
    };
    let names: Vec<String> = groups
        .iter()
        .map(|group| {
            let names = group.as_object().map(required).unwrap_or_default();
            names.iter().map(|n| code(n)).collect::<Vec<_>>().join(" and ")
        })
        .collect();
    Some(format!("{how} {} must be given.", names.join(" or ")))
}

#[cfg(test)]
mod tests {
    use svc_contract::catalog::CATALOG;

    use super::*;

    /// Every keyword a catalog schema uses is one the reference renders (or one
    /// that needs no words: `$schema`, `additionalProperties: false`), so a new
    /// kind of rule cannot go missing from the reference unnoticed.
    #[test]
    fn every_schema_keyword_is_rendered() {
        const RENDERED: &[&str] = &[
            "$schema",
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "anyOf",
            "oneOf",
            "description",
            "const",
            "enum",
            "default",
            "minimum",
            "maximum",
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
            "pattern",
            "format",
        ];
        fn walk(schema: &Value, at: &str) {
            let Some(map) = schema.as_object() else { return };
            for (key, value) in map {
                assert!(RENDERED.contains(&key.as_str()), "{at}: `{key}` is not rendered in the API reference");
                match key.as_str() {
                    "properties" => {
                        for (name, property) in value.as_object().into_iter().flatten() {
                            walk(property, &format!("{at}/{name}"));
                        }
                    }
                    "items" | "additionalProperties" => walk(value, &format!("{at}/{key}")),
                    "anyOf" | "oneOf" => {
                        for (i, branch) in value.as_array().into_iter().flatten().enumerate() {
                            walk(branch, &format!("{at}/{key}/{i}"));
                        }
                    }
                    _ => {}
                }
            }
        }
        for op in &CATALOG {
            walk(&Value::Object(op.input_schema().clone()), &format!("{} input", op.id));
            walk(&Value::Object(op.output_schema().clone()), &format!("{} output", op.id));
        }
    }

    #[test]
    fn nullable_alternatives_fold_into_one_type() {
        let schema = serde_json::json!({"anyOf": [{"description": "A preset.", "oneOf": [{"const": "a", "type": "string"}, {"const": "b", "type": "string"}]}, {"type": "null"}]});
        let (map, nullable) = non_null(&schema);
        assert!(nullable);
        assert_eq!(type_name(&map), "string");
        assert_eq!(rules(&map), ["one of `a`, `b`"]);
        let email = serde_json::json!({"type": "string", "anyOf": [{"format": "email"}, {"const": ""}]});
        assert_eq!(rules(&non_null(&email).0), ["either format `email`, or `\"\"`"]);
    }
}
