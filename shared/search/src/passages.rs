//! Splitting reviewed text into passages: the units answers are found in.
//!
//! A passage is a run of whole paragraphs under one heading, of at most
//! [`MAX_CHARS`] characters (aiming at [`TARGET_CHARS`]). Markdown headings
//! (`#` to `######`, or a line underlined with `===`/`---`) start a new passage
//! and are kept as its heading path (`Setup › Linux`). A paragraph too long for
//! one passage is cut between sentences, a sentence too long between words, a
//! word too long anywhere (on a character boundary).

/// A passage grows by whole paragraphs up to about this size...
pub const TARGET_CHARS: usize = 900;
/// ... and is never longer than this.
pub const MAX_CHARS: usize = 1_500;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passage {
    /// The heading path it sits under, if any.
    pub heading: Option<String>,
    pub body: String,
}

/// Splits `text` into passages (empty when it has no visible text).
pub fn split(text: &str) -> Vec<Passage> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut splitter = Splitter::default();
    let lines: Vec<&str> = text.split('\n').collect();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let next = lines.get(i + 1).copied();
        if let Some((level, title)) = atx_heading(line) {
            splitter.paragraph(&paragraph.join("\n"));
            paragraph.clear();
            splitter.heading(level, title);
        } else if let Some(level) = next.and_then(setext_underline)
            && !line.trim().is_empty()
            && paragraph.is_empty()
        {
            splitter.paragraph("");
            splitter.heading(level, line.trim());
            i += 1;
        } else if line.trim().is_empty() {
            splitter.paragraph(&paragraph.join("\n"));
            paragraph.clear();
        } else {
            paragraph.push(line);
        }
        i += 1;
    }
    splitter.paragraph(&paragraph.join("\n"));
    splitter.finish()
}

/// Words in `text`: runs of letters and digits. A passage's length for BM25
/// (PostgreSQL's own token count would cost a pass over every tsvector).
pub fn words(text: &str) -> usize {
    let mut count = 0;
    let mut inside = false;
    for c in text.chars() {
        let letter = c.is_alphanumeric();
        count += usize::from(letter && !inside);
        inside = letter;
    }
    count
}

/// `# Title` (1 to 6 `#`, then a space): its level and text.
fn atx_heading(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start();
    let level = trimmed.bytes().take_while(|b| *b == b'#').count();
    let rest = &trimmed[level..];
    let title = rest.trim().trim_end_matches('#').trim();
    ((1..=6).contains(&level) && rest.starts_with([' ', '\t']) && !title.is_empty()).then_some((level, title))
}

/// A line of `=` (level 1) or `-` (level 2) under a title line.
fn setext_underline(line: &str) -> Option<usize> {
    let trimmed = line.trim();
    if trimmed.len() >= 3 && trimmed.bytes().all(|b| b == b'=') {
        Some(1)
    } else if trimmed.len() >= 3 && trimmed.bytes().all(|b| b == b'-') {
        Some(2)
    } else {
        None
    }
}

#[derive(Default)]
struct Splitter {
    headings: Vec<(usize, String)>,
    current: String,
    done: Vec<Passage>,
}

impl Splitter {
    fn heading(&mut self, level: usize, title: &str) {
        self.flush();
        self.headings.retain(|(l, _)| *l < level);
        self.headings.push((level, collapse(title)));
    }

    fn paragraph(&mut self, text: &str) {
        let text = collapse(text);
        if text.is_empty() {
            return;
        }
        if chars(&self.current) + 2 + chars(&text) > TARGET_CHARS && !self.current.is_empty() {
            self.flush();
        }
        if chars(&text) <= MAX_CHARS {
            self.append(&text);
            return;
        }
        for piece in pieces(&text) {
            if chars(&self.current) + 1 + chars(&piece) > MAX_CHARS {
                self.flush();
            }
            self.append(&piece);
        }
    }

    fn append(&mut self, text: &str) {
        if self.current.is_empty() {
            self.current.push_str(text.trim_start());
            return;
        }
        self.current.push_str(if text.starts_with(char::is_whitespace) { "" } else { "\n\n" });
        self.current.push_str(text);
    }

    fn flush(&mut self) {
        let body = std::mem::take(&mut self.current);
        if !body.trim().is_empty() {
            let heading = (!self.headings.is_empty())
                .then(|| self.headings.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(" › "));
            self.done.push(Passage { heading, body });
        }
    }

    fn finish(mut self) -> Vec<Passage> {
        self.flush();
        self.done
    }
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// White space inside a paragraph collapsed to single spaces.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A paragraph over [`MAX_CHARS`] in pieces that fit: sentences, then words,
/// then characters. Pieces after the first start with a space, which is
/// counted: each is at most [`MAX_CHARS`] with it.
fn pieces(text: &str) -> Vec<String> {
    const ROOM: usize = MAX_CHARS - 1;
    let mut out = Vec::new();
    for sentence in sentences(text) {
        if chars(sentence) <= ROOM {
            out.push(sentence.to_owned());
            continue;
        }
        let mut piece = String::new();
        for word in sentence.split(' ') {
            if chars(&piece) + 1 + chars(word) > ROOM && !piece.is_empty() {
                out.push(std::mem::take(&mut piece));
            }
            if chars(word) > ROOM {
                let letters: Vec<char> = word.chars().collect();
                out.extend(letters.chunks(ROOM).map(|c| c.iter().collect::<String>()));
                continue;
            }
            if !piece.is_empty() {
                piece.push(' ');
            }
            piece.push_str(word);
        }
        if !piece.is_empty() {
            out.push(piece);
        }
    }
    // Sentences of one paragraph are joined by a space, not a blank line.
    out.into_iter().enumerate().map(|(i, p)| if i == 0 { p } else { format!(" {p}") }).collect()
}

/// Sentences of a collapsed paragraph: cut after `.`, `!` or `?` and a space.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(byte, b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') {
            out.push(&text[start..=i]);
            start = i + 2;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_start_passages_and_name_them() {
        let text = "Intro line.\n\n# Setup\n\nInstall it.\n\n## Linux\nUse apt.\n\nThen run.\n\n# Usage\nCall it.\n";
        let passages = split(text);
        let shown: Vec<(Option<&str>, &str)> =
            passages.iter().map(|p| (p.heading.as_deref(), p.body.as_str())).collect();
        assert_eq!(
            shown,
            [
                (None, "Intro line."),
                (Some("Setup"), "Install it."),
                (Some("Setup › Linux"), "Use apt.\n\nThen run."),
                (Some("Usage"), "Call it."),
            ]
        );
    }

    #[test]
    fn setext_headings_and_crlf() {
        let passages = split("Title\r\n=====\r\n\r\nBody one.\r\n\r\nSub\r\n---\r\nBody two.");
        assert_eq!(passages[0], Passage { heading: Some("Title".into()), body: "Body one.".into() });
        assert_eq!(passages[1], Passage { heading: Some("Title › Sub".into()), body: "Body two.".into() });
    }

    #[test]
    fn paragraphs_are_packed_up_to_the_target() {
        let paragraph = "word ".repeat(60); // 300 characters
        let text = [paragraph.trim(); 10].join("\n\n");
        let passages = split(&text);
        assert!(passages.len() >= 3, "{}", passages.len());
        for passage in &passages {
            assert!(chars(&passage.body) <= TARGET_CHARS + 2, "{}", chars(&passage.body));
        }
        let words: usize = passages.iter().map(|p| p.body.split_whitespace().count()).sum();
        assert_eq!(words, 600, "nothing lost");
    }

    #[test]
    fn long_paragraphs_sentences_and_words_are_cut_within_bounds() {
        let sentence = format!("{}.", "lorem ipsum ".repeat(20).trim());
        let long_paragraph = [sentence.as_str(); 30].join(" ");
        let giant_word = "é".repeat(4000);
        let text = format!("{long_paragraph}\n\n{giant_word}\n\n{}", "x ".repeat(2000));
        let passages = split(&text);
        for passage in &passages {
            assert!(chars(&passage.body) <= MAX_CHARS, "{}", chars(&passage.body));
        }
        let total: usize = passages.iter().map(|p| p.body.matches('é').count()).sum();
        assert_eq!(total, 4000);
        assert_eq!(passages.iter().map(|p| p.body.matches("lorem").count()).sum::<usize>(), 600);
    }

    #[test]
    fn words_are_runs_of_letters_and_digits() {
        assert_eq!(words("Hello, world! It's 2026 — ¿qué tal?"), 7);
        assert_eq!(words(""), 0);
        assert_eq!(words("  ...  "), 0);
    }

    #[test]
    fn blank_text_has_no_passages() {
        assert!(split("").is_empty());
        assert!(split(" \n\t\n\r\n  ").is_empty());
        assert_eq!(split("#").len(), 1, "a lone # is text, not a heading");
    }
}
