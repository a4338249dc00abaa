//! The languages the index knows, and their PostgreSQL text-search
//! configurations.

use svc_contract::resources::Language as ContractLanguage;

/// The language a document is indexed in (`agent_language`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, sqlx::Type)]
#[sqlx(type_name = "agent_language", rename_all = "lowercase")]
pub enum Language {
    En,
    Es,
}

impl Language {
    /// The PostgreSQL text-search configuration of the language.
    pub fn search_config(self) -> &'static str {
        match self {
            Self::En => "english",
            Self::Es => "spanish",
        }
    }
}

impl From<ContractLanguage> for Language {
    fn from(language: ContractLanguage) -> Self {
        match language {
            ContractLanguage::En => Self::En,
            ContractLanguage::Es => Self::Es,
        }
    }
}
