//! Answers built without a model.

use svc_contract::resources::Language;

use super::Found;

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
            let quote =
                if f.snippet.trim().is_empty() { f.body.clone() } else { with_closing_marks(&f.snippet, &f.body) };
            let quote = quote.trim();
            match language {
                Language::En => format!("From “{}”: {quote}", f.title),
                Language::Es => format!("Según «{}»: {quote}", f.title),
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Separates the fragments of a snippet (PostgreSQL's `FragmentDelimiter`).
const FRAGMENT_DELIMITER: &str = " … ";

/// The snippet with the punctuation that closed each fragment in the body put
/// back: `ts_headline` cuts fragments at words, so "… for a full refund." came
/// out without its final period.
fn with_closing_marks(snippet: &str, body: &str) -> String {
    snippet
        .split(FRAGMENT_DELIMITER)
        .map(|fragment| {
            let Some(at) = body.find(fragment).filter(|_| !fragment.is_empty()) else {
                return fragment.to_owned();
            };
            let rest = &body[at + fragment.len()..];
            let closing: String = rest.chars().take_while(|c| CLOSING.contains(c)).collect();
            format!("{fragment}{closing}")
        })
        .collect::<Vec<_>>()
        .join(FRAGMENT_DELIMITER)
}

/// Marks that end a sentence or close a quotation or bracket.
const CLOSING: &[char] = &['.', '!', '?', '…', ')', ']', '"', '\'', '”', '’', '»', ';', ':'];

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
    fn a_quote_keeps_the_punctuation_that_ended_it() {
        let body = "Refunds: you can return any item within 30 days of delivery for a full refund. Shipping is free.";
        let mut passage =
            found("Refund policy", "you can return any item within 30 days of delivery for a full refund");
        passage.body = body.into();
        assert_eq!(
            extractive(Language::En, &[passage]),
            "From “Refund policy”: you can return any item within 30 days of delivery for a full refund."
        );
        let two = "Refunds take 5 days (by card) … ask «siempre»";
        let body = "Refunds take 5 days (by card). Then we close. Please ask «siempre»!";
        assert_eq!(with_closing_marks(two, body), "Refunds take 5 days (by card). … ask «siempre»!");
        assert_eq!(with_closing_marks("not in the body", body), "not in the body");
        assert_eq!(with_closing_marks("Then we close", body), "Then we close.");
    }

    #[test]
    fn dont_know_speaks_the_agents_language() {
        assert!(dont_know(Language::En).starts_with("I don't know yet"));
        assert!(dont_know(Language::Es).starts_with("Todavía no lo sé"));
    }
}
