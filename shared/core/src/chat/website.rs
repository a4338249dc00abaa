//! Web addresses a tenant gives: `website` (Public Chat and Widget) and the
//! Widget's `logoUrl`. Contract §12: an absolute `http`/`https` URL of at most
//! 2,000 characters, stored exactly as given; so this only checks, it never
//! rewrites.

use std::fmt;
use std::sync::OnceLock;

use svc_contract::chat::URL_PATTERN;

/// Longest web address, in characters.
pub const MAX_URL_CHARS: usize = 2000;

/// Why a text is not a web address we store (`details.rule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlError {
    Empty,
    TooLong,
    /// Spaces, tabs, line breaks or other control characters: a parser would
    /// drop or encode them, and we store the text as given.
    Whitespace,
    /// Not starting with `http://` or `https://` (relative, or another scheme).
    NotHttp,
    /// No host, or not a URL at all.
    Malformed,
    /// A user name or password: it would be shown to anyone who reads the
    /// configuration or the integration manifest.
    Userinfo,
    /// Not a URI as the published schema declares it (`format: uri` and
    /// [`URL_PATTERN`]): a character a URI must percent-encode (an
    /// international domain goes in its `xn--` form), or a port out of range.
    NotUri,
}

impl UrlError {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::TooLong => "too_long",
            Self::Whitespace => "whitespace",
            Self::NotHttp => "not_http",
            Self::Malformed => "malformed",
            Self::Userinfo => "userinfo",
            Self::NotUri => "not_uri",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Self::Empty => "is empty",
            Self::TooLong => "is longer than 2000 characters",
            Self::Whitespace => "contains whitespace or control characters",
            Self::NotHttp => "is not an absolute `http://` or `https://` URL",
            Self::Malformed => "is not a valid URL with a host",
            Self::Userinfo => "contains a user name or password",
            Self::NotUri => {
                "is not a URI: percent-encode other characters, and write an international domain in its `xn--` form"
            }
        }
    }
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for UrlError {}

/// Checks an absolute `http`/`https` URL; the caller stores `text` unchanged.
pub fn check_url(text: &str) -> Result<(), UrlError> {
    if text.is_empty() {
        return Err(UrlError::Empty);
    }
    if text.chars().count() > MAX_URL_CHARS {
        return Err(UrlError::TooLong);
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlError::Whitespace);
    }
    // The URL standard also reads `https:example.com` and `https:/x` as
    // absolute; a stored address should say what it means, so the `//` is
    // required.
    let lower = text.get(..8).unwrap_or(text).to_ascii_lowercase();
    if !lower.starts_with("http://") && !lower.starts_with("https://") {
        return Err(UrlError::NotHttp);
    }
    let url = url::Url::parse(text).map_err(|_| UrlError::Malformed)?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(UrlError::Malformed);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Userinfo);
    }
    // Last, the rule the schema declares, checked as a client would check it.
    if !declared().is_valid(&serde_json::Value::from(text)) {
        return Err(UrlError::NotUri);
    }
    Ok(())
}

/// The declared form of a web address, compiled once.
fn declared() -> &'static jsonschema::Validator {
    static DECLARED: OnceLock<jsonschema::Validator> = OnceLock::new();
    DECLARED.get_or_init(|| {
        let schema = serde_json::json!({ "type": "string", "format": "uri", "pattern": URL_PATTERN });
        jsonschema::options().should_validate_formats(true).build(&schema).expect("the URL schema compiles")
    })
}

#[cfg(test)]
mod tests {
    use super::UrlError::*;
    use super::*;

    #[test]
    fn absolute_http_urls_pass_as_given() {
        for url in [
            "https://example.com",
            "https://example.com/",
            "HTTPS://Example.com/Pricing?plan=pro#faq",
            "http://localhost:3000/docs",
            "http://shop.example.co.uk/a%20b",
            "https://xn--bcher-kva.example/katalog",
            "https://[2001:db8::1]:8443/",
            "http://a.example:1/~x_y-z.html?q=a+b&c=%2F;d=(e)*!$',@:/?#frag/?",
        ] {
            assert_eq!(check_url(url), Ok(()), "{url}");
        }
        let longest = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS - 20));
        assert_eq!(longest.chars().count(), MAX_URL_CHARS);
        assert_eq!(check_url(&longest), Ok(()));
        assert_eq!(check_url(&format!("{longest}a")), Err(TooLong));
    }

    #[test]
    fn everything_else_is_refused_with_its_rule() {
        for (url, rule) in [
            ("", Empty),
            ("example.com", NotHttp),
            ("/pricing", NotHttp),
            ("//example.com", NotHttp),
            ("ftp://example.com", NotHttp),
            ("javascript:alert(1)", NotHttp),
            ("https:example.com", NotHttp),
            ("https:/example.com", NotHttp),
            ("https://", Malformed),
            ("https://exa mple.com", Whitespace),
            (" https://example.com", Whitespace),
            ("https://example.com\n", Whitespace),
            ("https://[::1/", Malformed),
            ("https://example.com:99999", Malformed),
            ("https://user:secret@example.com", Userinfo),
            ("https://user@example.com", Userinfo),
            // What a URI must percent-encode, and ports the schema does not allow.
            ("https://bücher.example/katalog", NotUri),
            ("https://example.com/ä", NotUri),
            ("https://example.com/a%zz", NotUri),
            ("https://example.com/{x}", NotUri),
            ("https://example.com/a#b#c", NotUri),
            ("https://example.com:0/", NotUri),
            ("https://example.com:/", NotUri),
        ] {
            assert_eq!(check_url(url), Err(rule), "{url}");
        }
    }
}
