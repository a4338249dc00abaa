//! What an extractive answer quotes of a passage: the sentence or two that
//! answer the question best, whole, in the passage's order. A skipped
//! stretch is whole sentences, marked "…".
//!
//! A sentence is scored by the question's content words it holds (a word
//! matches another it begins, or that begins it: "ship" and "shipping") and,
//! where the process has a model, by its closeness in meaning to the question.

/// The longest quote of one passage, in characters, when it is more than one
/// sentence. One sentence is quoted whole up to [`LONGEST_SENTENCE`].
pub const QUOTE_CHARS: usize = 400;

/// A sentence longer than this is cut at a word (and marked "…"): a passage
/// of one endless line is still quoted in a few lines.
pub const LONGEST_SENTENCE: usize = 600;

/// The sentences of `text`, each trimmed, in order: a sentence ends at `.`,
/// `!`, `?` or `…` (with the quotes and brackets that close it) before a
/// space and a capital, a digit or an opening mark, or at the end; a line
/// break ends one too. A period after a single letter or a common
/// abbreviation ("e.g.", "Dr.") ends none.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if c == '\n' {
            push(&mut found, &text[start..at]);
            start = at + 1;
        } else if matches!(c, '.' | '!' | '?' | '…') && !(c == '.' && abbreviation(&text[start..at])) {
            // The marks that close the sentence belong to it.
            let mut end = i + 1;
            while end < chars.len() && CLOSERS.contains(&chars[end].1) {
                end += 1;
            }
            let cut = chars.get(end).map_or(text.len(), |&(at, _)| at);
            let next = chars[end..].iter().find(|(_, c)| !c.is_whitespace()).map(|&(_, c)| c);
            let spaced = chars.get(end).is_none_or(|(_, c)| c.is_whitespace());
            if spaced && next.is_none_or(|n| n.is_uppercase() || n.is_ascii_digit() || OPENERS.contains(&n)) {
                push(&mut found, &text[start..cut]);
                start = cut;
                i = end;
                continue;
            }
        }
        i += 1;
    }
    push(&mut found, &text[start..]);
    found
}

fn push<'a>(found: &mut Vec<&'a str>, sentence: &'a str) {
    let sentence = sentence.trim();
    if !sentence.is_empty() {
        found.push(sentence);
    }
}

const CLOSERS: &[char] = &['.', '!', '?', '…', ')', ']', '"', '\'', '”', '’', '»'];
const OPENERS: &[char] = &['"', '\'', '“', '‘', '«', '(', '[', '¿', '¡'];

/// Whether the word before a period is an abbreviation: a single letter
/// ("J. Smith", "e.g"), or a common title or short form.
fn abbreviation(before: &str) -> bool {
    const COMMON: &[&str] = &[
        "mr", "mrs", "ms", "dr", "prof", "st", "vs", "etc", "approx", "no", "inc", "ltd", "sr", "sra", "srta", "dra",
        "ud", "uds", "pág", "núm", "ej",
    ];
    let word = before.rsplit(|c: char| c.is_whitespace() || c == '(').next().unwrap_or("");
    let last = word.rsplit('.').next().unwrap_or(word);
    last.chars().count() == 1 && last.chars().all(char::is_alphabetic) || COMMON.contains(&last.to_lowercase().as_str())
}

/// The question's content words, lower-cased.
pub fn content_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect();
    words.sort();
    words.dedup();
    words
}

/// Question words that carry no subject, in English and Spanish.
const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "could", "did", "do", "does", "for", "from",
    "get", "has", "have", "how", "i", "if", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "should",
    "so", "that", "the", "their", "there", "this", "to", "us", "was", "we", "what", "when", "where", "which", "who",
    "why", "will", "with", "would", "you", "your", "al", "como", "cómo", "con", "cuando", "cuándo", "de", "del",
    "donde", "dónde", "el", "en", "es", "la", "las", "lo", "los", "mi", "mis", "para", "por", "puedo", "que", "qué",
    "se", "su", "sus", "tu", "un", "una", "y",
];

/// How many of `question`'s content words `sentence` holds (a word matches
/// one it begins or that begins it, of four letters at least).
pub fn overlap(question: &[String], sentence: &str) -> usize {
    let words = content_words(sentence);
    question
        .iter()
        .filter(|q| {
            words.iter().any(|w| {
                let (short, long) = if w.len() <= q.len() { (w, *q) } else { (*q, w) };
                short == long || (short.chars().count() >= 4 && long.starts_with(short.as_str()))
            })
        })
        .count()
}

/// The quote of a passage split into `sentences`, each scored (higher
/// answers better): the best sentence and, if it fits within
/// [`QUOTE_CHARS`] beside it and answers at all, the second best, whole and
/// in order; "…" between them when they are apart, and before or after when
/// the passage goes on. Without any score above zero, the passage's opening
/// sentences up to the limit.
pub fn quote(sentences: &[&str], scores: &[f32]) -> String {
    if sentences.is_empty() {
        return String::new();
    }
    let mut order: Vec<usize> = (0..sentences.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut chosen = vec![order[0]];
    let answering = scores[order[0]] > 0.0;
    if answering {
        if let Some(&second) = order.get(1)
            && scores[second] > 0.0
            && length(sentences, &[order[0], second]) <= QUOTE_CHARS
        {
            chosen.push(second);
        }
    } else {
        // Nothing stands out: the opening, as far as it fits.
        chosen = vec![0];
        for next in 1..sentences.len() {
            if length(sentences, &(0..=next).collect::<Vec<_>>()) > QUOTE_CHARS {
                break;
            }
            chosen.push(next);
        }
    }
    chosen.sort_unstable();
    let mut out = String::new();
    if chosen[0] > 0 {
        out.push_str("… ");
    }
    for (n, &index) in chosen.iter().enumerate() {
        if n > 0 {
            out.push_str(if index == chosen[n - 1] + 1 { " " } else { " … " });
        }
        out.push_str(&shortened(sentences[index]));
    }
    if chosen.last().is_some_and(|&last| last + 1 < sentences.len()) {
        out.push_str(" …");
    }
    out
}

fn length(sentences: &[&str], chosen: &[usize]) -> usize {
    chosen.iter().map(|&i| sentences[i].chars().count() + 1).sum()
}

/// A sentence as quoted: whole, unless longer than [`LONGEST_SENTENCE`].
fn shortened(sentence: &str) -> String {
    if sentence.chars().count() <= LONGEST_SENTENCE {
        return sentence.to_owned();
    }
    let cut: String = sentence.chars().take(LONGEST_SENTENCE).collect();
    let at = cut.rfind(char::is_whitespace).unwrap_or(cut.len());
    format!("{}…", cut[..at].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPING: &str = "Orders placed before 2 pm Eastern ship the same day. Standard shipping takes 3 to 5 \
        business days. Express shipping takes 1 to 2 business days from the moment they leave, and costs $15. \
        Tracking numbers are e-mailed when your parcel leaves us.";

    fn scored(question: &str, text: &str) -> String {
        let words = content_words(question);
        let found = sentences(text);
        let scores: Vec<f32> = found.iter().map(|s| overlap(&words, s) as f32).collect();
        quote(&found, &scores)
    }

    #[test]
    fn sentences_end_at_their_marks_not_at_abbreviations_or_numbers() {
        assert_eq!(
            sentences("Dr. Smith met J. Doe at 2.5 km, e.g. by car. Then? «Sí». ¿Y luego? (Done.) 3 more…\nLast line"),
            vec![
                "Dr. Smith met J. Doe at 2.5 km, e.g. by car.",
                "Then?",
                "«Sí».",
                "¿Y luego?",
                "(Done.)",
                "3 more…",
                "Last line"
            ]
        );
        assert_eq!(sentences("one sentence without an end"), vec!["one sentence without an end"]);
        assert_eq!(sentences("  \n "), Vec::<&str>::new());
        assert_eq!(sentences("He said \"stop.\" Then left."), vec!["He said \"stop.\"", "Then left."]);
    }

    #[test]
    fn the_answering_sentence_is_quoted_whole() {
        let quoted = scored("How long does express shipping take?", SHIPPING);
        assert!(
            quoted.contains("Express shipping takes 1 to 2 business days from the moment they leave, and costs $15."),
            "{quoted}"
        );
        // Two sentences at most, each whole: the quote starts and ends on a boundary.
        for part in quoted.split('…').map(str::trim).filter(|p| !p.is_empty()) {
            assert!(sentences(SHIPPING).iter().any(|s| part.contains(s)), "{part:?} is not whole sentences");
        }
    }

    #[test]
    fn skipped_sentences_are_marked_and_whole() {
        let quoted = scored("When do tracking numbers come, and what does express cost?", SHIPPING);
        assert_eq!(
            quoted,
            "… Express shipping takes 1 to 2 business days from the moment they leave, and costs $15. \
             Tracking numbers are e-mailed when your parcel leaves us."
        );
        let quoted = scored("same day orders and tracking numbers", SHIPPING);
        assert_eq!(
            quoted,
            "Orders placed before 2 pm Eastern ship the same day. … Tracking numbers are e-mailed when your parcel leaves us."
        );
    }

    #[test]
    fn without_any_match_the_opening_is_quoted_within_the_limit() {
        let quoted = scored("zebra", &format!("{SHIPPING} {SHIPPING}"));
        assert!(quoted.starts_with("Orders placed before 2 pm"), "{quoted}");
        assert!(quoted.chars().count() <= QUOTE_CHARS + 2, "{quoted}");
        assert!(quoted.ends_with('…'));
    }

    #[test]
    fn the_quote_limit_holds_at_its_boundary() {
        // Two answering sentences of exactly QUOTE_CHARS together (each
        // counted with its space) are both quoted; one character more, only
        // the best.
        let a = format!("Refunds {}.", "a".repeat(190));
        let b = format!("Refunds take {}.", "b".repeat(QUOTE_CHARS - 2 - a.chars().count() - 14));
        assert_eq!(length(&[&a, &b], &[0, 1]), QUOTE_CHARS);
        let text = format!("{a} {b}");
        assert_eq!(scored("refunds take", &text), text);
        let longer = format!("{a} {}", b.replacen("take", "takes", 1));
        assert_eq!(scored("refunds take", &longer), format!("… {}", b.replacen("take", "takes", 1)));
    }

    #[test]
    fn an_endless_sentence_is_cut_at_a_word() {
        let endless = "word ".repeat(200);
        let quoted = scored("word", &endless);
        assert!(quoted.ends_with('…') && quoted.chars().count() <= LONGEST_SENTENCE + 1, "{quoted}");
    }

    #[test]
    fn words_match_by_their_beginnings() {
        let question = content_words("Can I ship refunds?");
        assert_eq!(question, vec!["refunds", "ship"]);
        assert_eq!(overlap(&question, "Shipping is free; a refund takes days."), 2);
        assert_eq!(overlap(&question, "Shi ref"), 0);
    }
}
