//! A field of a partial update that distinguishes "leave alone" from "clear".

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};

/// Absent leaves the stored value alone, `null` clears it, a value sets it.
///
/// Use with `#[serde(default)]`: serde only calls `deserialize` for a field that is
/// present, so absence falls back to [`Patch::Keep`].
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Patch<T> {
    #[default]
    Keep,
    Clear,
    Set(T),
}

impl<T> Patch<T> {
    /// The value after this patch is applied to `current`.
    pub fn apply(self, current: Option<T>) -> Option<T> {
        match self {
            Self::Keep => current,
            Self::Clear => None,
            Self::Set(value) => Some(value),
        }
    }

    pub fn is_keep(&self) -> bool {
        matches!(self, Self::Keep)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(deserializer)? {
            None => Self::Clear,
            Some(value) => Self::Set(value),
        })
    }
}

impl<T: JsonSchema> JsonSchema for Patch<T> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Patch_{}", T::schema_name()).into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        Option::<T>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Input {
        #[serde(default)]
        value: Patch<String>,
    }

    fn parse(json: &str) -> Patch<String> {
        serde_json::from_str::<Input>(json).unwrap().value
    }

    #[test]
    fn absent_null_and_value_are_distinct() {
        assert_eq!(parse("{}"), Patch::Keep);
        assert_eq!(parse(r#"{"value":null}"#), Patch::Clear);
        assert_eq!(parse(r#"{"value":"x"}"#), Patch::Set("x".into()));
        assert_eq!(Patch::Keep.apply(Some(1)), Some(1));
        assert_eq!(Patch::<i32>::Clear.apply(Some(1)), None);
        assert_eq!(Patch::Set(2).apply(Some(1)), Some(2));
    }
}
