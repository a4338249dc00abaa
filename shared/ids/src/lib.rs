//! Typed identifiers: a UUIDv7 in the database, `prefix_` + 26 base32 characters
//! on the wire (contract §8). Time-ordered, so ordering by id is creation order.

use std::fmt;

use uuid::Uuid;

/// Crockford's base32 alphabet, lower-cased.
const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
const ENCODED_LEN: usize = 26;

/// The 26 digits of a UUID, written without allocating.
struct Encoded([u8; ENCODED_LEN]);

impl Encoded {
    fn as_str(&self) -> &str {
        // Always valid: the alphabet is ASCII.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for Encoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn encode(uuid: Uuid) -> Encoded {
    let mut value = uuid.as_u128();
    let mut out = [0u8; ENCODED_LEN];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(value & 0x1f) as usize];
        value >>= 5;
    }
    Encoded(out)
}

/// Each byte's digit value in [`ALPHABET`], or `INVALID`.
const DIGITS: [u8; 256] = {
    let mut digits = [INVALID; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        digits[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    digits
};
const INVALID: u8 = u8::MAX;

fn decode(text: &str) -> Option<Uuid> {
    if text.len() != ENCODED_LEN {
        return None;
    }
    let mut value: u128 = 0;
    for (i, byte) in text.bytes().enumerate() {
        let digit = match DIGITS[byte as usize] {
            INVALID => return None,
            digit => u128::from(digit),
        };
        // 26 digits carry 130 bits; the first may only use the low 3.
        if i == 0 && digit > 7 {
            return None;
        }
        value = (value << 5) | digit;
    }
    Some(Uuid::from_u128(value))
}

/// Declares an id type with its wire prefix.
macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, sqlx::Type)]
        #[sqlx(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A new, time-ordered id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// Parses the wire form; anything else is `None` (which callers answer
            /// as "not found": an id that cannot exist names nothing).
            pub fn parse(text: &str) -> Option<Self> {
                text.strip_prefix($prefix).and_then(decode).map(Self)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($prefix)?;
                f.write_str(encode(self.0).as_str())
            }
        }

        /// In job payloads: the wire form.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                Self::parse(&text).ok_or_else(|| serde::de::Error::custom(concat!("not a ", $prefix, " id")))
            }
        }
    };
}

id_type!(
    /// A User.
    UserId, "usr_"
);
id_type!(
    /// A Workspace.
    WorkspaceId, "ws_"
);
id_type!(
    /// An Agent.
    AgentId, "agt_"
);
id_type!(
    /// A Workspace API key.
    ApiKeyId, "ak_"
);

id_type!(
    /// A Knowledge Source.
    SourceId, "ks_"
);
id_type!(
    /// A revision of a Knowledge Source.
    RevisionId, "rev_"
);
id_type!(
    /// A reconcile run.
    RunId, "run_"
);

id_type!(
    /// A conversation of the public answers endpoint.
    ConversationId, "conv_"
);

/// A request id: `req_` + a time-ordered unique id.
pub fn request_id() -> String {
    format!("req_{}", encode(Uuid::now_v7()))
}

/// The PostgreSQL advisory lock key of a name made of `parts`: the first 8
/// bytes of their SHA-256, each part length-prefixed so that no two splits
/// collide. The core and the search index name every lock they take by it.
pub fn lock_key(parts: &[&[u8]]) -> i64 {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        for _ in 0..100 {
            let id = AgentId::new();
            let text = id.to_string();
            assert!(text.starts_with("agt_") && text.len() == 4 + 26, "{text}");
            assert_eq!(AgentId::parse(&text), Some(id));
        }
        let max = Uuid::from_u128(u128::MAX);
        assert_eq!(decode(encode(max).as_str()), Some(max));
        for bad in [
            "",
            "agt_",
            "ws_0000000000000000000000000a",
            "agt_zzzzzzzzzzzzzzzzzzzzzzzzzz",
            "agt_0000000000000000000000000I",
        ] {
            assert_eq!(AgentId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_lock_key_is_the_same_in_every_release_and_every_split_is_its_own() {
        // What every replica, of any release, computes for the same lock.
        assert_eq!(lock_key(&[b"knowledge-merge", &[0; 16]]), 6_179_092_875_911_326_261);
        assert_ne!(lock_key(&[b"a", b"bc"]), lock_key(&[b"ab", b"c"]));
    }

    #[test]
    fn every_digit_decodes_to_its_place_and_nothing_else_does() {
        let zeros = [b'0'; ENCODED_LEN];
        for byte in 0..=u8::MAX {
            let mut text = zeros;
            text[ENCODED_LEN - 1] = byte;
            let decoded = std::str::from_utf8(&text).ok().and_then(decode);
            let place = ALPHABET.iter().position(|&a| a == byte);
            assert_eq!(decoded, place.map(|p| Uuid::from_u128(p as u128)), "byte {byte}");
        }
    }

    #[test]
    fn text_order_is_creation_order() {
        let ids: Vec<String> = (0..50).map(|_| WorkspaceId::new().to_string()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }
}
