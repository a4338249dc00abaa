//! Input and output types of the 30 operations, one module per group, and of
//! the web application's membership operations (`member`).
//!
//! Inputs deny unknown fields. `idempotencyKey` is not declared here: the catalog
//! adds it to the schema of every mutating operation and the call path takes it
//! out before the input is read, so no operation can forget or wrongly accept it.

pub mod agent;
pub mod api_key;
pub mod identity;
pub mod knowledge_source;
pub mod member;
pub mod public_chat;
pub mod widget;
pub mod workspace;

/// Results per page when `pageSize` is omitted.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// Largest `pageSize`.
pub const MAX_PAGE_SIZE: u32 = 100;

pub(crate) fn default_page_size() -> u32 {
    DEFAULT_PAGE_SIZE
}

/// A whole number as JSON Schema counts one: `50` and `50.0` alike.
pub(crate) fn whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    use serde::Deserialize;
    let number = serde_json::Number::deserialize(deserializer)?;
    let whole = number.as_u64().or_else(|| number.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64));
    whole.and_then(|n| u32::try_from(n).ok()).ok_or_else(|| serde::de::Error::custom("expected a whole number"))
}

/// An input with no fields.
#[derive(Clone, Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Declares a paged list input: `cursor` and `pageSize`, plus the given fields.
macro_rules! paged_input {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            /// Opaque cursor from `meta.nextCursor` of the previous page.
            #[serde(default)]
            #[schemars(length(min = 1))]
            pub cursor: Option<String>,
            /// Results per page.
            #[serde(default = "crate::operations::default_page_size", deserialize_with = "crate::operations::whole_number")]
            #[schemars(range(min = 1, max = 100))]
            pub page_size: u32,
        }
    };
}
pub(crate) use paged_input;
