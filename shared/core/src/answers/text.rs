//! Answers built without a model.

use svc_contract::resources::Language;

/// A short "I don't know yet" in the Agent's language.
pub fn dont_know(language: Language) -> &'static str {
    match language {
        Language::En => "I don't know yet: nothing in my knowledge answers that.",
        Language::Es => "Todavía no lo sé: nada de lo que conozco responde a eso.",
    }
}

/// The quotes of the best passages, each named by its title.
pub fn extractive(language: Language, quoted: &[(&str, String)]) -> String {
    quoted
        .iter()
        .map(|(title, quote)| match language {
            Language::En => format!("From “{title}”: {quote}"),
            Language::Es => format!("Según «{title}»: {quote}"),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extractive_answers_quote_and_name_their_sources() {
        let text = extractive(
            Language::En,
            &[("FAQ", "Returns are free.".to_owned()), ("Policy", "… The whole body.".to_owned())],
        );
        assert_eq!(text, "From “FAQ”: Returns are free.\n\nFrom “Policy”: … The whole body.");
        assert_eq!(
            extractive(Language::Es, &[("Guía", "Abre a las nueve.".to_owned())]),
            "Según «Guía»: Abre a las nueve."
        );
    }

    #[test]
    fn dont_know_speaks_the_agents_language() {
        assert!(dont_know(Language::En).starts_with("I don't know yet"));
        assert!(dont_know(Language::Es).starts_with("Todavía no lo sé"));
    }
}
