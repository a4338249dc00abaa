//! Markdown building blocks: lines, tables, code spans, anchors.

use serde_json::Value;

/// Lines of Markdown, each ended by a newline.
#[derive(Default)]
pub struct Doc {
    pub text: String,
}

impl Doc {
    pub fn line(&mut self, line: impl AsRef<str>) {
        self.text.push_str(line.as_ref());
        self.text.push('\n');
    }

    pub fn blank(&mut self) {
        self.text.push('\n');
    }

    /// A table: a header row, its rule, one row per entry; cells escaped.
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>]) {
        self.line(format!("| {} |", header.join(" | ")));
        self.line(format!("|{}", " --- |".repeat(header.len())));
        for row in rows {
            let cells: Vec<String> = row.iter().map(|cell| cell.replace('|', "\\|").replace('\n', " ")).collect();
            self.line(format!("| {} |", cells.join(" | ")));
        }
    }
}

/// `text` as a code span, whatever it contains.
pub fn code(text: &str) -> String {
    if text.contains('`') { format!("`` {text} ``") } else { format!("`{text}`") }
}

/// A JSON value as the reference shows it: strings bare (`en`), the rest as JSON.
pub fn literal(value: &Value) -> String {
    match value {
        Value::String(s) if !s.is_empty() => code(s),
        other => code(&other.to_string()),
    }
}

/// `svc-workspace` → `Svc-Workspace`.
pub fn header_name(header: &str) -> String {
    let words: Vec<String> = header
        .split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect();
    words.join("-")
}

/// The anchor GitHub gives a heading: lower case, punctuation other than `-` and
/// `_` dropped, spaces as `-`.
pub fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A body limit: whole MiB as such, anything else in bytes.
pub fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes.is_multiple_of(MIB) { format!("{} MiB", bytes / MIB) } else { format!("{bytes} bytes") }
}

#[cfg(test)]
mod tests {
    use svc_contract::WORKSPACE_HEADER;
    use svc_contract::catalog::flag_name;

    use super::*;

    #[test]
    fn names_and_anchors() {
        assert_eq!(flag_name("idempotencyKey"), "idempotency-key");
        assert_eq!(header_name(WORKSPACE_HEADER), "Svc-Workspace");
        assert_eq!(anchor("knowledge_source.add"), "knowledge_sourceadd");
        assert_eq!(anchor("Calling an operation"), "calling-an-operation");
        assert_eq!(size(8 * 1024 * 1024), "8 MiB");
    }
}
