//! Slugs: derived from names when omitted (contract §8), checked when given.

use svc_contract::resources::SLUG_PATTERN;

/// Longest derived slug.
pub const MAX_DERIVED_LEN: usize = 60;

/// The name folded to ASCII, lower-cased, each run of other characters turned
/// into `-`, trimmed and cut to 60; `fallback` when nothing is left.
pub fn derive(name: &str, fallback: &str) -> String {
    let mut folded = String::with_capacity(name.len());
    for c in name.chars() {
        match fold(c) {
            Some(letters) => folded.push_str(letters),
            None if c.is_ascii_alphanumeric() => folded.push(c.to_ascii_lowercase()),
            None => folded.push(' '),
        }
    }
    let mut slug = folded
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    slug.truncate(MAX_DERIVED_LEN);
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() { fallback.to_owned() } else { slug.to_owned() }
}

/// `base`, or `base-2`, `base-3`, ... for the `n`th candidate (n starts at 1).
/// The suffix never pushes a slug past the derived length.
pub fn candidate(base: &str, n: u32) -> String {
    if n <= 1 {
        return base.to_owned();
    }
    let suffix = format!("-{n}");
    let keep = MAX_DERIVED_LEN.saturating_sub(suffix.len()).min(base.len());
    format!("{}{suffix}", base[..keep].trim_end_matches('-'))
}

/// Whether `slug` matches the contract's slug pattern.
pub fn is_valid(slug: &str) -> bool {
    debug_assert_eq!(SLUG_PATTERN, r"^[a-z0-9]+(?:-[a-z0-9]+)*$");
    !slug.is_empty()
        && slug
            .split('-')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

/// ASCII folding of common accented Latin letters; `None` for anything else.
fn fold(c: char) -> Option<&'static str> {
    Some(match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => "a",
        'À' | 'Á' | 'Â' | 'Ã' | 'Ä' | 'Å' | 'Ā' | 'Ă' | 'Ą' => "a",
        'æ' | 'Æ' => "ae",
        'ç' | 'ć' | 'č' | 'Ç' | 'Ć' | 'Č' => "c",
        'ď' | 'đ' | 'Ď' | 'Đ' | 'ð' | 'Ð' => "d",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ė' | 'ę' | 'ě' => "e",
        'È' | 'É' | 'Ê' | 'Ë' | 'Ē' | 'Ė' | 'Ę' | 'Ě' => "e",
        'ğ' | 'Ğ' => "g",
        'ì' | 'í' | 'î' | 'ï' | 'ī' | 'į' | 'ı' | 'Ì' | 'Í' | 'Î' | 'Ï' | 'Ī' | 'Į' | 'İ' => "i",
        'ł' | 'ľ' | 'Ł' | 'Ľ' => "l",
        'ñ' | 'ń' | 'ň' | 'Ñ' | 'Ń' | 'Ň' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ő' => "o",
        'Ò' | 'Ó' | 'Ô' | 'Õ' | 'Ö' | 'Ø' | 'Ō' | 'Ő' => "o",
        'œ' | 'Œ' => "oe",
        'ř' | 'Ř' => "r",
        'ś' | 'š' | 'ş' | 'Ś' | 'Š' | 'Ş' => "s",
        'ß' => "ss",
        'ť' | 'ţ' | 'Ť' | 'Ţ' => "t",
        'þ' | 'Þ' => "th",
        'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' | 'ű' | 'ų' => "u",
        'Ù' | 'Ú' | 'Û' | 'Ü' | 'Ū' | 'Ů' | 'Ű' | 'Ų' => "u",
        'ý' | 'ÿ' | 'Ý' | 'Ÿ' => "y",
        'ź' | 'ż' | 'ž' | 'Ź' | 'Ż' | 'Ž' => "z",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivation_examples() {
        assert_eq!(derive("Acme Support", "workspace"), "acme-support");
        assert_eq!(derive("  Crème Brûlée!! Team ", "workspace"), "creme-brulee-team");
        assert_eq!(derive("Straße 42", "agent"), "strasse-42");
        assert_eq!(derive("日本語", "agent"), "agent");
        assert_eq!(derive("a日b", "agent"), "a-b");
        assert_eq!(derive("---", "workspace"), "workspace");
        assert_eq!(derive("a_b.c", "agent"), "a-b-c");
    }

    #[test]
    fn derived_slugs_are_valid_and_bounded() {
        let long = "word ".repeat(40);
        let slug = derive(&long, "agent");
        assert!(slug.len() <= MAX_DERIVED_LEN && is_valid(&slug), "{slug}");
        for name in ["x", "Hello, World", "ÅÄÖ åäö", "🙂 emoji 🙂", &"a".repeat(200)] {
            let slug = derive(name, "agent");
            assert!(is_valid(&slug) && slug.len() <= MAX_DERIVED_LEN, "{name:?} -> {slug}");
            for n in [1, 2, 17, 1000] {
                let c = candidate(&slug, n);
                assert!(is_valid(&c) && c.len() <= MAX_DERIVED_LEN, "{c}");
            }
        }
    }

    #[test]
    fn candidates_count_up() {
        assert_eq!(candidate("acme", 1), "acme");
        assert_eq!(candidate("acme", 2), "acme-2");
        assert_eq!(candidate(&"a".repeat(60), 12).len(), 60);
    }

    #[test]
    fn validity_matches_pattern() {
        for ok in ["a", "a-b", "a1-2b", "0"] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a b"] {
            assert!(!is_valid(bad), "{bad}");
        }
    }
}
