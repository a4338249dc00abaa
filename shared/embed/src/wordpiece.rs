//! BERT's uncased WordPiece tokenizer, as Hugging Face `tokenizers` runs the
//! `tokenizer.json` of potion-base-8M.
//!
//! The model's vectors were trained on these exact pieces: a text split any
//! other way would be averaged from rows it was never meant to use. So this is
//! a re-implementation of the steps the file names, in their order, not a
//! tokenizer of our own: special tokens matched in the raw text, then
//! `BertNormalizer` (drop control characters, put spaces around CJK ideographs,
//! strip accents, lower-case), `BertPreTokenizer` (split on white space, every
//! punctuation mark alone), and greedy longest-match-first `WordPiece`.
//!
//! Character classes come from current Unicode tables (16.0), where Hugging
//! Face's come from Unicode 8-era ones. Compared with `tokenizers` 0.23 on every
//! code point, the ids differ for 618 of them, all assigned since (marks and
//! punctuation of minority and historic scripts, a few format characters) and
//! none in the model's vocabulary; on the DBpedia and paraphrase sets the ids
//! are identical.

use std::collections::HashMap;

use serde::Deserialize;
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// The tokenizer of one `tokenizer.json`.
pub(crate) struct WordPiece {
    /// Every piece by its text: where a word starts, `tokenizers` looks the
    /// text up as is.
    vocab: HashMap<String, u32>,
    /// The continuation pieces (`##ing`) by their text without the prefix, so
    /// that a lookup inside a word needs no allocation.
    continuation: HashMap<String, u32>,
    /// The longest key of each table in bytes: a longer candidate cannot match,
    /// so the search starts there instead of at the end of a long word.
    longest_initial: usize,
    longest_continuation: usize,
    unk: u32,
    /// A longer word is `[UNK]` without being searched.
    max_word_chars: usize,
    /// Special tokens (`[CLS]`, `[MASK]`…) found verbatim in the raw text,
    /// longest first so that the first match at a position is the longest.
    added: Vec<(String, u32)>,
    /// The median length of a piece in characters, which model2vec uses to
    /// cut a text before tokenizing it.
    median_token_chars: usize,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
    normalizer: Option<Typed>,
    pre_tokenizer: Option<Typed>,
    model: Model,
}

#[derive(Deserialize)]
struct AddedToken {
    id: u32,
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    normalized: bool,
}

/// A normaliser or pre-tokenizer: its type and the BertNormalizer settings.
#[derive(Deserialize)]
struct Typed {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    clean_text: bool,
    #[serde(default)]
    handle_chinese_chars: bool,
    strip_accents: Option<bool>,
    #[serde(default)]
    lowercase: bool,
}

#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type")]
    kind: String,
    unk_token: String,
    continuing_subword_prefix: String,
    max_input_chars_per_word: usize,
    vocab: HashMap<String, u32>,
}

impl WordPiece {
    /// The tokenizer a `tokenizer.json` describes, if it is the BERT uncased
    /// WordPiece this module implements; otherwise what differs.
    pub(crate) fn from_json(bytes: &[u8]) -> Result<WordPiece, String> {
        let file: File = serde_json::from_slice(bytes).map_err(|e| format!("not a tokenizer.json: {e}"))?;
        let model = file.model;
        if model.kind != "WordPiece" {
            return Err(format!("model type {}, not WordPiece", model.kind));
        }
        // Uncased BERT: strip_accents unset means "as lowercase", which is on.
        match &file.normalizer {
            Some(n)
                if n.kind == "BertNormalizer"
                    && n.clean_text
                    && n.handle_chinese_chars
                    && n.lowercase
                    && n.strip_accents != Some(false) => {}
            _ => return Err("normalizer is not BertNormalizer (clean, CJK, lower-case, no accents)".into()),
        }
        if file.pre_tokenizer.as_ref().map(|p| p.kind.as_str()) != Some("BertPreTokenizer") {
            return Err("pre_tokenizer is not BertPreTokenizer".into());
        }
        // Ids must be 0..n, each once: they index the rows of the matrix.
        let n = model.vocab.len();
        let mut seen = vec![false; n];
        for &id in model.vocab.values() {
            match seen.get_mut(id as usize) {
                Some(slot) if !*slot => *slot = true,
                _ => return Err(format!("vocabulary ids are not 0..{n}, each once (id {id})")),
            }
        }
        let unk = *model.vocab.get(&model.unk_token).ok_or("the unknown token is not in the vocabulary")?;
        let mut added = Vec::with_capacity(file.added_tokens.len());
        for token in file.added_tokens {
            if token.normalized || token.lstrip || token.rstrip || token.single_word || token.content.is_empty() {
                return Err(format!("added token {:?} has options this tokenizer does not implement", token.content));
            }
            if token.id as usize >= n {
                return Err(format!("added token {:?} has id {} beyond the vocabulary", token.content, token.id));
            }
            added.push((token.content, token.id));
        }
        added.sort_by_key(|(content, _)| std::cmp::Reverse(content.len()));

        let prefix = model.continuing_subword_prefix.as_str();
        let continuation: HashMap<String, u32> = model
            .vocab
            .iter()
            .filter_map(|(piece, &id)| Some((piece.strip_prefix(prefix)?.to_owned(), id)))
            .filter(|(rest, _)| !rest.is_empty())
            .collect();
        // numpy's median of an even count is the mean of the middle two, and
        // model2vec truncates it to an integer.
        let mut lengths: Vec<usize> = model.vocab.keys().map(|piece| piece.chars().count()).collect();
        lengths.sort_unstable();
        let median_token_chars = match n {
            0 => 0,
            n if n % 2 == 1 => lengths[n / 2],
            n => (lengths[n / 2 - 1] + lengths[n / 2]) / 2,
        };
        Ok(WordPiece {
            longest_initial: model.vocab.keys().map(String::len).max().unwrap_or(0),
            longest_continuation: continuation.keys().map(String::len).max().unwrap_or(0),
            vocab: model.vocab,
            continuation,
            unk,
            max_word_chars: model.max_input_chars_per_word,
            added,
            median_token_chars,
        })
    }

    /// The number of pieces, which is the number of rows the matrix must have.
    pub(crate) fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The id of `[UNK]`, which model2vec leaves out of the mean.
    pub(crate) fn unk(&self) -> u32 {
        self.unk
    }

    /// The median length of a piece in characters.
    pub(crate) fn median_token_chars(&self) -> usize {
        self.median_token_chars
    }

    /// The ids of `text`, without `[CLS]`/`[SEP]` (model2vec adds none), in
    /// order, `[UNK]` included.
    pub(crate) fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut rest = text;
        while let Some((at, len, id)) = self.find_added(rest) {
            self.encode_plain(&rest[..at], &mut ids);
            ids.push(id);
            rest = &rest[at + len..];
        }
        self.encode_plain(rest, &mut ids);
        ids
    }

    /// The leftmost special token in `text` (the longest of those starting
    /// there): its byte offset, its length and its id. Matched case-sensitively
    /// in the raw text, as `"normalized": false` says.
    fn find_added(&self, text: &str) -> Option<(usize, usize, u32)> {
        if self.added.is_empty() {
            return None;
        }
        text.char_indices().find_map(|(at, _)| {
            let here = &text[at..];
            self.added.iter().find(|(content, _)| here.starts_with(content.as_str())).map(|(c, id)| (at, c.len(), *id))
        })
    }

    fn encode_plain(&self, text: &str, ids: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        let normalized = normalize(text);
        for_each_word(&normalized, |word| self.encode_word(word, ids));
    }

    /// Greedy longest-match-first from the left; pieces after the first carry
    /// the continuation prefix. If some position matches nothing, the whole
    /// word is one `[UNK]`, not its pieces so far.
    fn encode_word(&self, word: &str, ids: &mut Vec<u32>) {
        if word.chars().count() > self.max_word_chars {
            ids.push(self.unk);
            return;
        }
        let first = ids.len();
        let mut start = 0;
        while start < word.len() {
            let (table, longest) = if start == 0 {
                (&self.vocab, self.longest_initial)
            } else {
                (&self.continuation, self.longest_continuation)
            };
            let mut end = word.floor_char_boundary(word.len().min(start + longest));
            let found = loop {
                if end <= start {
                    break None;
                }
                let candidate = &word[start..end];
                if let Some(&id) = table.get(candidate) {
                    break Some(id);
                }
                end -= candidate.chars().next_back().map_or(1, char::len_utf8);
            };
            match found {
                Some(id) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(first);
                    ids.push(self.unk);
                    return;
                }
            }
        }
    }
}

/// `BertNormalizer` with clean_text, handle_chinese_chars, strip_accents and
/// lowercase, in that order.
fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        // Control characters go before white space is mapped, so a control
        // character that is also white space (U+0085) is dropped, not a space.
        if c == '\0' || c == '\u{FFFD}' || is_control(c) {
            continue;
        }
        if is_whitespace(c) {
            cleaned.push(' ');
        } else if is_chinese(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    // ASCII is its own decomposition and has no marks: the common case skips NFD.
    if cleaned.is_ascii() {
        cleaned.make_ascii_lowercase();
        return cleaned;
    }
    let mut out = String::with_capacity(cleaned.len());
    // Lower-cased character by character, as `tokenizers` does: a final
    // capital sigma becomes σ, not the ς of `str::to_lowercase`.
    for c in cleaned.nfd().filter(|&c| get_general_category(c) != GeneralCategory::NonspacingMark) {
        out.extend(c.to_lowercase());
    }
    out
}

/// `BertPreTokenizer`: white space separates words and is dropped; every
/// punctuation character is a word of its own.
fn for_each_word(text: &str, mut f: impl FnMut(&str)) {
    let mut start = None;
    for (at, c) in text.char_indices() {
        let whitespace = c.is_whitespace();
        if whitespace || is_punctuation(c) {
            if let Some(s) = start.take() {
                f(&text[s..at]);
            }
            if !whitespace {
                f(&text[at..at + c.len_utf8()]);
            }
        } else if start.is_none() {
            start = Some(at);
        }
    }
    if let Some(s) = start {
        f(&text[s..]);
    }
}

/// Tab, newline and carriage return are white space here, not control.
fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// Categories Cc, Cf and Co, less tab, newline and carriage return. Unassigned
/// code points (Cn) stay, as they do in `tokenizers`.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r')
        && matches!(
            get_general_category(c),
            GeneralCategory::Control
                | GeneralCategory::Format
                | GeneralCategory::PrivateUse
                | GeneralCategory::Surrogate
        )
}

/// ASCII punctuation (which includes `$`, `+`, `^`… that Unicode calls
/// symbols) and Unicode's P* categories.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            get_general_category(c),
            GeneralCategory::ConnectorPunctuation
                | GeneralCategory::DashPunctuation
                | GeneralCategory::OpenPunctuation
                | GeneralCategory::ClosePunctuation
                | GeneralCategory::InitialPunctuation
                | GeneralCategory::FinalPunctuation
                | GeneralCategory::OtherPunctuation
        )
}

/// The CJK ideograph blocks of `tokenizers` (its range starts at U+2B920 where
/// Google's BERT has U+2B820; the gap holds no vocabulary piece).
fn is_chinese(c: char) -> bool {
    matches!(
        c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> WordPiece {
        crate::model::load_tokenizer(&crate::testing::model_dir()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn pieces(t: &WordPiece, text: &str) -> Vec<String> {
        let by_id: HashMap<u32, &str> = t.vocab.iter().map(|(piece, &id)| (id, piece.as_str())).collect();
        t.encode(text).iter().map(|id| by_id[id].to_owned()).collect()
    }

    #[test]
    fn accents_are_stripped_and_case_folded() {
        let t = tokenizer();
        assert_eq!(t.encode("Café naïve RÉSUMÉ"), [6674, 14749, 12752]);
        assert_eq!(pieces(&t, "Café naïve RÉSUMÉ"), ["cafe", "naive", "resume"]);
        // NFD first, then lower case: İ is I and a dot above, which goes.
        assert_eq!(pieces(&t, "İstanbul"), ["istanbul"]);
    }

    #[test]
    fn words_split_into_the_longest_pieces_first() {
        let t = tokenizer();
        assert_eq!(t.encode("unbelievablyyyyy"), [3901, 7677, 1672, 2573, 5327, 1106, 1106, 1106, 1106]);
        assert_eq!(
            pieces(&t, "unbelievablyyyyy"),
            ["un", "##bel", "##ie", "##va", "##bly", "##y", "##y", "##y", "##y"]
        );
        assert_eq!(pieces(&t, "straße"), ["st", "##raße"]);
    }

    #[test]
    fn punctuation_is_a_word_of_its_own() {
        let t = tokenizer();
        assert_eq!(pieces(&t, "don't"), ["don", "'", "t"]);
        assert_eq!(
            pieces(&t, "Hey friend!     How are you?!?"),
            ["hey", "friend", "!", "how", "are", "you", "?", "!", "?"]
        );
        // ASCII symbols are punctuation to BERT; Unicode symbols are not.
        assert_eq!(pieces(&t, "a$b+c"), ["a", "$", "b", "+", "c"]);
        assert_eq!(pieces(&t, "12(b)(6)"), ["12", "(", "b", ")", "(", "6", ")"]);
        assert_eq!(pieces(&t, "x\u{2014}y\u{00BF}"), ["x", "\u{2014}", "y", "\u{00BF}"]);
    }

    #[test]
    fn control_characters_go_and_white_space_separates() {
        let t = tokenizer();
        // NUL, zero-width space, BOM, soft hyphen and private use join what
        // they separated; tab, no-break space, ideographic space, line
        // separator split; NEL (control and white space) joins.
        assert_eq!(pieces(&t, "a\u{0}b\u{200B}c\tz"), ["abc", "z"]);
        assert_eq!(pieces(&t, "x\u{FEFF}z"), ["x", "##z"]);
        assert_eq!(pieces(&t, "a\u{00AD}b"), ["ab"]);
        assert_eq!(pieces(&t, "x\u{E000}z"), ["x", "##z"]);
        assert_eq!(pieces(&t, "x\u{FFFD}z"), ["x", "##z"]);
        assert_eq!(pieces(&t, "x\u{0085}y"), ["x", "##y"]);
        for separator in ['\u{00A0}', '\u{3000}', '\u{2028}', '\n', '\r'] {
            assert_eq!(pieces(&t, &format!("x{separator}y")), ["x", "y"], "{separator:?}");
        }
    }

    #[test]
    fn cjk_ideographs_are_words_of_their_own() {
        let t = tokenizer();
        // 字 is not in the vocabulary: [UNK], which the model later drops.
        assert_eq!(pieces(&t, "中文字"), ["中", "文", "[UNK]"]);
        assert_eq!(pieces(&t, "abc中def"), ["abc", "中", "def"]);
    }

    #[test]
    fn long_or_unknown_words_are_one_unknown() {
        let t = tokenizer();
        let unk = t.unk();
        assert_eq!(unk, 1);
        assert_eq!(t.encode(&"x".repeat(101)), [unk]);
        assert_eq!(t.encode(&"a".repeat(100)).len(), 50, "100 characters are still split");
        // A symbol the vocabulary lacks spoils the whole word, not just itself.
        assert_eq!(t.encode("love\u{1F970}"), [unk]);
        assert_eq!(pieces(&t, "\u{01C5}"), ["[UNK]"]);
    }

    #[test]
    fn special_tokens_are_matched_verbatim_in_the_raw_text() {
        let t = tokenizer();
        assert_eq!(t.encode("hello [MASK] world [UNK] x[CLS]y"), [6598, 4, 1094, 1, 66, 2, 67]);
        assert_eq!(pieces(&t, "[mask]"), ["[", "mask", "]"]);
    }

    #[test]
    fn empty_and_blank_texts_have_no_pieces() {
        let t = tokenizer();
        assert!(t.encode("").is_empty());
        assert!(t.encode(" \t\n\u{200B}\u{0}").is_empty());
    }

    #[test]
    fn capital_sigma_is_lowered_character_by_character() {
        assert_eq!(normalize("ΟΔΟΣ"), "οδοσ");
    }

    #[test]
    fn the_median_piece_has_six_characters() {
        assert_eq!(tokenizer().median_token_chars(), 6);
    }
}
