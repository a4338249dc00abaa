//! No link in `docs/` or a README may leave the repository or lead nowhere:
//! the documentation must read the same from a clone, offline.

use std::path::{Component, Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Markdown link targets in `text`: `[text](target)` and `<scheme://...>`.
fn link_targets(text: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    for (i, _) in text.match_indices("](") {
        let rest = &text[i + 2..];
        if let Some(end) = rest.find(')') {
            targets.push(rest[..end].split_whitespace().next().unwrap_or_default());
        }
    }
    for (i, _) in text.match_indices('<') {
        let rest = &text[i + 1..];
        if let Some(end) = rest.find('>')
            && rest[..end].contains("://")
        {
            targets.push(&rest[..end]);
        }
    }
    targets
}

/// A relative target resolved from `dir`, kept inside the repository.
fn inside(repository: &Path, dir: &Path, target: &str) -> Option<PathBuf> {
    let file = target.split('#').next().unwrap_or_default();
    if file.is_empty() {
        return Some(dir.to_path_buf());
    }
    let mut resolved = dir.strip_prefix(repository).ok()?.to_path_buf();
    for part in Path::new(file).components() {
        match part {
            Component::ParentDir => {
                if !resolved.pop() {
                    return None;
                }
            }
            Component::Normal(name) => resolved.push(name),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(repository.join(resolved))
}

#[test]
fn links_in_docs_and_readmes_stay_in_the_repository() {
    let repository = repository();
    let mut files = Vec::new();
    let mut dirs = vec![repository.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    assert!(!files.is_empty(), "no Markdown found under docs/");
    // And the READMEs a newcomer starts from.
    files.extend(["README.md", "cli/README.md"].map(|f| repository.join(f)));
    let mut outward = Vec::new();
    for file in &files {
        let dir = file.parent().unwrap_or(&repository);
        for target in link_targets(&read(file)) {
            let local = ["http://localhost", "http://127.0.0.1"].iter().any(|l| target.starts_with(l));
            let ok = if target.contains("://") || target.starts_with("mailto:") {
                local
            } else {
                inside(&repository, dir, target).is_some_and(|p| p.exists())
            };
            if !ok {
                outward.push(format!("{}: {target}", file.strip_prefix(&repository).unwrap_or(file).display()));
            }
        }
    }
    assert!(outward.is_empty(), "links that leave the repository or lead nowhere:\n{}", outward.join("\n"));
}
