//! Answers built without a model.

use svc_contract::resources::Language;

use crate::store::knowledge::Found;

/// Passages quoted in an extractive answer, at most.
const QUOTED: usize = 2;

/// A short "I don't know yet" in the Agent's language.
pub fn dont_know(language: Language) -> &'static str {
    match language {
        Language::En => "I don't know yet: nothing in my knowledge answers that.",
        Language::Es => "Todavía no lo sé: nada de lo que conozco responde a eso.",
    }
}

/// The best passages' words around the question's, each named by its title.
pub fn extractive(language: Language, found: &[Found]) -> String {
    found
        .iter()
        .take(QUOTED)
        .map(|f| {
            let quote = if f.snippet.trim().is_empty() { f.body.as_str() } else { f.snippet.as_str() };
            let quote = quote.trim();
            match language {
                Language::En => format!("From “{}”: {quote}", f.title),
                Language::Es => format!("Según «{}»: {quote}", f.title),
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{RevisionId, SourceId};

    fn found(title: &str, snippet: &str) -> Found {
        Found {
            source_id: SourceId::new(),
            revision_id: RevisionId::new(),
            ordinal: 0,
            title: title.into(),
            uri: "u".into(),
            heading: None,
            body: "The whole body.".into(),
            snippet: snippet.into(),
        }
    }

    #[test]
    fn extractive_answers_quote_and_name_their_sources() {
        let text =
            extractive(Language::En, &[found("FAQ", "Returns are free."), found("Policy", ""), found("Third", "x")]);
        assert_eq!(text, "From “FAQ”: Returns are free.\n\nFrom “Policy”: The whole body.");
        assert_eq!(extractive(Language::Es, &[found("Guía", "Abre a las nueve.")]), "Según «Guía»: Abre a las nueve.");
    }

    #[test]
    fn dont_know_speaks_the_agents_language() {
        assert!(dont_know(Language::En).starts_with("I don't know yet"));
        assert!(dont_know(Language::Es).starts_with("Todavía no lo sé"));
    }
}
