//! A Widget origin (contract §12): `scheme://host[:port]`, parsed once into its
//! normalised form, so two origins match exactly when their texts are equal.
//!
//! The normalised form is what a browser sends in its `Origin` header: the
//! scheme and host lower-cased, an internationalised host in its `xn--` form,
//! an IPv6 host compressed, the scheme's default port dropped. So
//! [`Origin::parse`] serves both a tenant's `allowedOrigins` and an incoming
//! header, and the two compare with `==`.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An origin in normalised form. It can only be made by [`Origin::parse`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin(String);

/// Why a text is not an origin: one class per rule, named for callers
/// (`details.rule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginError {
    Empty,
    /// Spaces, tabs, line breaks or other control characters.
    Whitespace,
    /// No `scheme://` in front.
    MissingScheme,
    /// A scheme other than `https` or `http`.
    UnsupportedScheme,
    /// `http` for a host other than `localhost` or `127.0.0.1`.
    InsecureScheme,
    Userinfo,
    Wildcard,
    /// Only a `/` after the host.
    TrailingSlash,
    Path,
    Query,
    Fragment,
    InvalidHost,
    InvalidPort,
}

impl OriginError {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::Whitespace => "whitespace",
            Self::MissingScheme => "missing_scheme",
            Self::UnsupportedScheme => "unsupported_scheme",
            Self::InsecureScheme => "insecure_scheme",
            Self::Userinfo => "userinfo",
            Self::Wildcard => "wildcard",
            Self::TrailingSlash => "trailing_slash",
            Self::Path => "path",
            Self::Query => "query",
            Self::Fragment => "fragment",
            Self::InvalidHost => "invalid_host",
            Self::InvalidPort => "invalid_port",
        }
    }

    /// What to fix, in words (never quoting the value).
    pub fn message(self) -> &'static str {
        match self {
            Self::Empty => "is empty; an origin is `scheme://host[:port]`",
            Self::Whitespace => "contains whitespace or control characters",
            Self::MissingScheme => "has no scheme; write it as `https://host[:port]`",
            Self::UnsupportedScheme => "has a scheme other than `https` (or `http` for localhost)",
            Self::InsecureScheme => "uses `http`, which is allowed only for `localhost` and `127.0.0.1`",
            Self::Userinfo => "contains a user name or password; an origin is `scheme://host[:port]`",
            Self::Wildcard => "contains a wildcard; list each origin exactly",
            Self::TrailingSlash => "ends with `/`; an origin has no trailing slash",
            Self::Path => "has a path; an origin is `scheme://host[:port]` only",
            Self::Query => "has a query; an origin is `scheme://host[:port]` only",
            Self::Fragment => "has a fragment; an origin is `scheme://host[:port]` only",
            Self::InvalidHost => "does not have a valid host name or IP address",
            Self::InvalidPort => "does not have a valid port (1 to 65535)",
        }
    }
}

impl fmt::Display for OriginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for OriginError {}

/// Hosts that may be reached over plain `http` (local development).
const LOCAL_HOSTS: [&str; 2] = ["localhost", "127.0.0.1"];

impl Origin {
    /// Parses and normalises an origin; anything that is not exactly
    /// `scheme://host[:port]` is refused with the rule it breaks.
    pub fn parse(text: &str) -> Result<Self, OriginError> {
        if text.is_empty() {
            return Err(OriginError::Empty);
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(OriginError::Whitespace);
        }
        // A wildcard (`*`, `https://*.example.com`) is the mistake to name,
        // wherever it sits.
        if text.contains('*') {
            return Err(OriginError::Wildcard);
        }
        let (scheme, rest) = text.split_once("://").ok_or(OriginError::MissingScheme)?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "https" && scheme != "http" {
            return Err(OriginError::UnsupportedScheme);
        }
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        match tail.as_bytes().first() {
            None => {}
            Some(b'/') if tail == "/" => return Err(OriginError::TrailingSlash),
            Some(b'/') => return Err(OriginError::Path),
            Some(b'?') => return Err(OriginError::Query),
            Some(_) => return Err(OriginError::Fragment),
        }
        if authority.contains('@') {
            return Err(OriginError::Userinfo);
        }
        let (host, port) = split_host_port(authority)?;
        let host = normalise_host(host)?;
        if scheme == "http" && !LOCAL_HOSTS.contains(&host.as_str()) {
            return Err(OriginError::InsecureScheme);
        }
        let default_port = if scheme == "https" { 443 } else { 80 };
        Ok(Self(match port {
            Some(port) if port != default_port => format!("{scheme}://{host}:{port}"),
            _ => format!("{scheme}://{host}"),
        }))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Origin {
    type Err = OriginError;

    fn from_str(text: &str) -> Result<Self, OriginError> {
        Self::parse(text)
    }
}

/// The host and the port, if one is written.
fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), OriginError> {
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']').ok_or(OriginError::InvalidHost)?;
        let (host, after) = authority.split_at(close + 1);
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or(OriginError::InvalidHost)?)),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = port.map(parse_port).transpose()?;
    Ok((host, port))
}

fn parse_port(text: &str) -> Result<u16, OriginError> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(OriginError::InvalidPort);
    }
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(OriginError::InvalidPort),
        Ok(port) => Ok(port),
    }
}

/// The host as a browser serialises it, or why it is none.
fn normalise_host(host: &str) -> Result<String, OriginError> {
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(OriginError::InvalidHost)?;
        let address: Ipv6Addr = inner.parse().map_err(|_| OriginError::InvalidHost)?;
        return Ok(format!("[{}]", ipv6_text(address)));
    }
    if host.is_empty() || host.contains('%') {
        return Err(OriginError::InvalidHost);
    }
    let ascii = if host.is_ascii() {
        host.to_ascii_lowercase()
    } else {
        // Internationalised names travel in their `xn--` form (IDNA), which is
        // what the browser puts in `Origin`.
        match url::Host::parse(host) {
            Ok(url::Host::Domain(domain)) => domain,
            _ => return Err(OriginError::InvalidHost),
        }
    };
    if ascii.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        // Only dotted-decimal IPv4: the shorthand forms browsers also read
        // (`127.1`, `0x7f.0.0.1`) are refused rather than rewritten.
        let address: Ipv4Addr = ascii.parse().map_err(|_| OriginError::InvalidHost)?;
        return Ok(address.to_string());
    }
    if is_domain(&ascii) { Ok(ascii) } else { Err(OriginError::InvalidHost) }
}

/// Labels of letters, digits, `-` and `_` (not at a label's ends for `-`), at
/// most 63 characters each and 253 in all, the last not all digits (that would
/// be a malformed IPv4 address). No trailing dot.
fn is_domain(host: &str) -> bool {
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    let last_numeric = host.rsplit('.').next().is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()));
    host.len() <= 253 && host.split('.').all(label_ok) && !last_numeric
}

/// RFC 5952 text of an IPv6 address, as the URL standard serialises it (hex
/// pieces throughout, so an IPv4-mapped address is `::ffff:102:304`, unlike
/// `Ipv6Addr`'s `Display`).
fn ipv6_text(address: Ipv6Addr) -> String {
    let pieces = address.segments();
    // The first longest run of two or more zero pieces is compressed.
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < pieces.len() {
        if pieces[i] == 0 {
            let start = i;
            while i < pieces.len() && pieces[i] == 0 {
                i += 1;
            }
            let len = i - start;
            if len >= 2 && best.is_none_or(|(_, best_len)| len > best_len) {
                best = Some((start, len));
            }
        } else {
            i += 1;
        }
    }
    let hex = |range: &[u16]| range.iter().map(|p| format!("{p:x}")).collect::<Vec<_>>().join(":");
    match best {
        Some((start, len)) => format!("{}::{}", hex(&pieces[..start]), hex(&pieces[start + len..])),
        None => hex(&pieces),
    }
}

#[cfg(test)]
mod tests {
    use super::OriginError::*;
    use super::*;

    fn ok(text: &str) -> String {
        Origin::parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}")).into_string()
    }

    fn err(text: &str) -> OriginError {
        Origin::parse(text).map(|o| panic!("{text} parsed as {o}")).unwrap_err()
    }

    #[test]
    fn normalises_to_what_browsers_send() {
        for (given, normalised) in [
            ("https://example.com", "https://example.com"),
            ("HTTPS://Example.COM", "https://example.com"),
            ("https://example.com:443", "https://example.com"),
            ("https://example.com:8443", "https://example.com:8443"),
            ("https://example.com:08443", "https://example.com:8443"),
            ("http://localhost", "http://localhost"),
            ("http://LOCALHOST:80", "http://localhost"),
            ("http://localhost:3000", "http://localhost:3000"),
            ("http://127.0.0.1:5173", "http://127.0.0.1:5173"),
            ("https://127.0.0.1", "https://127.0.0.1"),
            ("https://shop.example.co.uk", "https://shop.example.co.uk"),
            ("https://my_host.example", "https://my_host.example"),
            ("https://bücher.example", "https://xn--bcher-kva.example"),
            ("https://[2001:DB8:0:0:0:0:0:1]", "https://[2001:db8::1]"),
            ("https://[::ffff:1.2.3.4]:443", "https://[::ffff:102:304]"),
            ("https://[1:0:0:2:0:0:0:3]", "https://[1:0:0:2::3]"),
            ("https://[1:0:0:2:0:0:3:4]", "https://[1::2:0:0:3:4]"),
            ("https://[::]", "https://[::]"),
        ] {
            assert_eq!(ok(given), normalised, "{given}");
            assert_eq!(ok(normalised), normalised, "normalising is idempotent");
        }
    }

    #[test]
    fn refuses_each_class() {
        for (text, class) in [
            ("", Empty),
            (" https://example.com", Whitespace),
            ("https://example.com ", Whitespace),
            ("https://exa\tmple.com", Whitespace),
            ("example.com", MissingScheme),
            ("//example.com", MissingScheme),
            ("://example.com", UnsupportedScheme),
            ("https:example.com", MissingScheme),
            ("ftp://example.com", UnsupportedScheme),
            ("wss://example.com", UnsupportedScheme),
            ("http://example.com", InsecureScheme),
            ("http://[::1]", InsecureScheme),
            ("http://localhost.example.com", InsecureScheme),
            ("https://user@example.com", Userinfo),
            ("https://user:pw@example.com", Userinfo),
            ("https://*.example.com", Wildcard),
            ("*", Wildcard),
            ("https://example.com/", TrailingSlash),
            ("https://example.com/app", Path),
            ("https://example.com//", Path),
            ("https://example.com?x=1", Query),
            ("https://example.com#top", Fragment),
            ("https://", InvalidHost),
            ("https://:443", InvalidHost),
            ("https://exa mple.com", Whitespace),
            ("https://-example.com", InvalidHost),
            ("https://example-.com", InvalidHost),
            ("https://example..com", InvalidHost),
            ("https://example.com.", InvalidHost),
            ("https://exa%41mple.com", InvalidHost),
            ("https://ex!ample.com", InvalidHost),
            ("https://1.2.3", InvalidHost),
            ("https://1.2.3.256", InvalidHost),
            ("https://01.2.3.4", InvalidHost),
            ("https://0x7f.0.0.1", InvalidHost),
            ("https://example.123", InvalidHost),
            ("https://[::1", InvalidHost),
            ("https://[zz::1]", InvalidHost),
            ("https://[::1]x", InvalidHost),
            ("https://a:b:c", InvalidPort),
            ("https://example.com:", InvalidPort),
            ("https://example.com:0", InvalidPort),
            ("https://example.com:65536", InvalidPort),
            ("https://example.com:123456", InvalidPort),
            ("https://example.com:-1", InvalidPort),
            ("https://example.com:+1", InvalidPort),
        ] {
            assert_eq!(err(text), class, "{text}");
        }
        let long_label = format!("https://{}.example", "a".repeat(64));
        assert_eq!(err(&long_label), InvalidHost);
        let long_name = format!("https://{}example", "a.".repeat(124));
        assert_eq!(err(&long_name), InvalidHost);
    }

    #[test]
    fn matching_is_exact() {
        let allowed = Origin::parse("https://app.example.com").unwrap();
        for same in ["https://APP.example.com", "https://app.example.com:443", "HTTPS://app.example.com"] {
            assert_eq!(Origin::parse(same).unwrap(), allowed, "{same}");
        }
        for other in [
            "https://example.com",
            "https://www.app.example.com",
            "https://app.example.com:8443",
            "https://app.example.co",
            "http://localhost",
        ] {
            assert_ne!(Origin::parse(other).unwrap(), allowed, "{other}");
        }
    }

    /// A small deterministic generator (xorshift), enough to explore the grammar
    /// without a dependency.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
        fn flip(&mut self) -> bool {
            self.next() & 1 == 1
        }
        /// Randomly upper-cases ASCII letters.
        fn shout(&mut self, text: &str) -> String {
            text.chars().map(|c| if self.flip() { c.to_ascii_uppercase() } else { c }).collect()
        }
        fn label(&mut self) -> String {
            const EDGE: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            const INNER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_";
            let len = 1 + self.below(12);
            (0..len)
                .map(|i| {
                    let set = if i == 0 || i == len - 1 { EDGE } else { INNER };
                    set[self.below(set.len())] as char
                })
                .collect()
        }
        /// A valid host in normalised form.
        fn host(&mut self) -> String {
            match self.below(6) {
                0 => format!("{}.{}.{}.{}", self.below(256), self.below(256), self.below(256), self.below(256)),
                1 => "localhost".to_owned(),
                _ => {
                    let mut labels: Vec<String> = (0..1 + self.below(3)).map(|_| self.label()).collect();
                    labels.push(self.pick(&["com", "example", "io", "co", "dev"]).to_owned());
                    labels.join(".")
                }
            }
        }
    }

    /// A valid origin as a caller might write it, and its normalised form.
    fn valid(g: &mut Gen) -> (String, String) {
        let host = g.host();
        let local = LOCAL_HOSTS.contains(&host.as_str());
        let scheme = if local && g.flip() { "http" } else { "https" };
        let default_port = if scheme == "https" { 443 } else { 80 };
        let port = match g.below(3) {
            0 => None,
            1 => Some(default_port),
            _ => Some(1 + g.below(65535) as u16),
        };
        let written =
            format!("{}://{}{}", g.shout(scheme), g.shout(&host), port.map(|p| format!(":{p}")).unwrap_or_default());
        let normalised = match port {
            Some(p) if p != default_port => format!("{scheme}://{host}:{p}"),
            _ => format!("{scheme}://{host}"),
        };
        (written, normalised)
    }

    #[test]
    fn property_valid_origins_normalise_idempotently() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        for _ in 0..5000 {
            let (written, normalised) = valid(&mut g);
            assert_eq!(ok(&written), normalised, "{written}");
            assert_eq!(ok(&normalised), normalised);
            // Exact matching: two writings of one origin are equal, and the
            // normalised text is all a comparison needs.
            assert_eq!(Origin::parse(&written).unwrap(), Origin::parse(&normalised).unwrap());
        }
    }

    #[test]
    fn property_each_addition_to_a_valid_origin_is_refused_for_its_rule() {
        let mut g = Gen(0x2545_f491_4f6c_dd1d);
        for _ in 0..5000 {
            let (written, _) = valid(&mut g);
            let (scheme, rest) = written.split_once("://").unwrap();
            let cases = [
                (format!("{written}/"), TrailingSlash),
                (format!("{written}/{}", g.label()), Path),
                (format!("{written}?{}", g.label()), Query),
                (format!("{written}#{}", g.label()), Fragment),
                (format!("{scheme}://{}@{rest}", g.label()), Userinfo),
                (format!("{scheme}://*.{rest}"), Wildcard),
                (format!("{written} "), Whitespace),
                (format!("\n{written}"), Whitespace),
                (rest.to_owned(), MissingScheme),
                (format!("{}://{rest}", g.pick(&["ftp", "ws", "file", "javascript"])), UnsupportedScheme),
            ];
            for (text, class) in cases {
                assert_eq!(err(&text), class, "{text}");
            }
            let host = rest.split(':').next().unwrap();
            if !LOCAL_HOSTS.contains(&host.to_ascii_lowercase().as_str()) {
                assert_eq!(err(&format!("http://{rest}")), InsecureScheme, "http://{rest}");
            }
        }
    }

    #[test]
    fn property_arbitrary_text_never_panics_and_what_parses_is_canonical() {
        let mut g = Gen(0xdead_beef_cafe_f00d);
        let alphabet: Vec<char> = "hTtps:/.@*?#[]%-_09azAZ é\t".chars().collect();
        for _ in 0..20000 {
            let len = g.below(30);
            let mut text: String = (0..len).map(|_| alphabet[g.below(alphabet.len())]).collect();
            if g.flip() {
                text.insert_str(0, "https://");
            }
            if let Ok(origin) = Origin::parse(&text) {
                assert_eq!(ok(origin.as_str()), origin.as_str(), "{text}");
                let (scheme, rest) = origin.as_str().split_once("://").unwrap();
                assert!(scheme == "https" || scheme == "http");
                assert!(!rest.contains(['/', '?', '#', '@', '*', ' ']), "{text} -> {origin}");
                assert_eq!(origin.as_str(), origin.as_str().to_ascii_lowercase());
            }
        }
    }

    /// Whether `text` satisfies the origin rule the schema declares.
    fn declared(text: &str) -> bool {
        static DECLARED: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
        let validator = DECLARED.get_or_init(|| {
            let schema = serde_json::json!({ "type": "string", "pattern": svc_contract::chat::ORIGIN_PATTERN });
            jsonschema::validator_for(&schema).unwrap()
        });
        validator.is_valid(&serde_json::Value::from(text))
    }

    /// The schema's `ORIGIN_PATTERN` states this parser's rules: whatever the
    /// parser accepts matches it (a client checking the schema never refuses a
    /// good origin), and it refuses every refused example but those whose
    /// only fault is a length, a misplaced `-` or IDNA (which no pattern
    /// states).
    #[test]
    fn the_declared_pattern_states_the_rules() {
        let mut g = Gen(0x0bad_cafe_1234_5678);
        for _ in 0..5000 {
            let (written, normalised) = valid(&mut g);
            assert!(declared(&written), "{written}");
            assert!(declared(&normalised), "{normalised}");
        }
        for text in [
            "https://bücher.example",
            "https://xn--bcher-kva.example",
            "https://[2001:DB8:0:0:0:0:0:1]",
            "https://my_host.example",
            "http://LOCALHOST:80",
            "https://example.com:08443",
        ] {
            assert!(Origin::parse(text).is_ok() && declared(text), "{text}");
        }
        let alphabet: Vec<char> = "hTtps:/.@*?#[]%-_09azAZ é\t".chars().collect();
        for _ in 0..20000 {
            let len = g.below(30);
            let mut text: String = (0..len).map(|_| alphabet[g.below(alphabet.len())]).collect();
            if g.flip() {
                text.insert_str(0, "https://");
            }
            if Origin::parse(&text).is_ok() {
                assert!(declared(&text), "{text}");
            }
        }
        for text in [
            "",
            "example.com",
            "ftp://example.com",
            "http://example.com",
            "http://[::1]",
            "https://user@example.com",
            "https://*.example.com",
            "https://example.com/",
            "https://example.com?x=1",
            "https://example.com#top",
            "https://",
            "https://:443",
            "https://example..com",
            "https://example.com.",
            "https://exa%41mple.com",
            "https://ex!ample.com",
            "https://1.2.3",
            "https://1.2.3.256",
            "https://01.2.3.4",
            "https://0x7f.0.0.1",
            "https://example.123",
            "https://0",
            "https://[::1",
            "https://[zz::1]",
            "https://[::1]x",
            "https://example.com:",
            "https://example.com:0",
            "https://example.com:65536",
            "https://example.com:123456",
            "https://exa\u{0}mple.com",
            "https://exa\u{a0}mple.com",
        ] {
            assert!(Origin::parse(text).is_err(), "{text}");
            assert!(!declared(text), "{text}");
        }
    }
}
