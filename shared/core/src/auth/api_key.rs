//! The Workspace API key format (contract §3): `svck_`, an 8-character public id,
//! `_` and 32 random base62 characters from the OS CSPRNG. Only the SHA-256 of the
//! whole secret is stored, and presented keys are compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::API_KEY_PREFIX;

const PUBLIC_ID_LEN: usize = 8;
const RANDOM_LEN: usize = 32;
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A freshly made key. `secret` leaves the process once, in the response that
/// made it, and is never stored.
pub struct GeneratedKey {
    pub public_id: String,
    pub secret: String,
    pub hash: [u8; 32],
}

impl GeneratedKey {
    /// `svck_` and the public id: shown as `keyPrefix`.
    pub fn key_prefix(&self) -> String {
        key_prefix(&self.public_id)
    }
}

impl std::fmt::Debug for GeneratedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedKey").field("public_id", &self.public_id).finish_non_exhaustive()
    }
}

pub fn key_prefix(public_id: &str) -> String {
    format!("{API_KEY_PREFIX}{public_id}")
}

/// `len` base62 characters from the OS CSPRNG, without modulo bias.
fn random_base62(len: usize) -> Result<String, getrandom::Error> {
    let mut out = String::with_capacity(len);
    let mut bytes = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut bytes)?;
        // 248 = 4 x 62: bytes at or above it would favour the first characters.
        for byte in bytes.iter().filter(|b| **b < 248) {
            if out.len() == len {
                break;
            }
            out.push(BASE62[usize::from(*byte % 62)] as char);
        }
    }
    Ok(out)
}

pub fn generate() -> Result<GeneratedKey, getrandom::Error> {
    let public_id = random_base62(PUBLIC_ID_LEN)?;
    let secret = format!("{API_KEY_PREFIX}{public_id}_{}", random_base62(RANDOM_LEN)?);
    let hash = hash(&secret);
    Ok(GeneratedKey { public_id, secret, hash })
}

pub fn hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The public id of a well-formed key; `None` for anything else.
pub fn public_id(secret: &str) -> Option<&str> {
    let rest = secret.strip_prefix(API_KEY_PREFIX)?;
    let (public_id, random) = rest.split_once('_')?;
    let well_formed = public_id.len() == PUBLIC_ID_LEN
        && random.len() == RANDOM_LEN
        && public_id.bytes().chain(random.bytes()).all(|b| b.is_ascii_alphanumeric());
    well_formed.then_some(public_id)
}

/// Whether `secret` hashes to `stored`, compared in constant time.
pub fn matches(secret: &str, stored: &[u8]) -> bool {
    hash(secret).ct_eq(stored).into()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn generated_keys_have_the_contract_format() {
        let key = generate().unwrap();
        assert_eq!(key.secret.len(), 5 + 8 + 1 + 32);
        assert!(key.secret.starts_with(&format!("svck_{}_", key.public_id)));
        assert_eq!(key.key_prefix(), format!("svck_{}", key.public_id));
        assert_eq!(public_id(&key.secret), Some(key.public_id.as_str()));
        assert!(matches(&key.secret, &key.hash));
        assert!(!format!("{key:?}").contains(&key.secret), "Debug never shows the secret");
    }

    #[test]
    fn keys_are_random_and_use_the_whole_alphabet() {
        let keys: Vec<GeneratedKey> = (0..200).map(|_| generate().unwrap()).collect();
        assert_eq!(keys.iter().map(|k| &k.secret).collect::<HashSet<_>>().len(), 200);
        let used: HashSet<char> = keys.iter().flat_map(|k| k.secret[14..].chars().collect::<Vec<_>>()).collect();
        assert_eq!(used.len(), 62, "all base62 characters appear in 6,400 draws");
    }

    #[test]
    fn malformed_keys_have_no_public_id() {
        let key = generate().unwrap();
        // Change the last character to another one: appending a fixed "x" would
        // keep the secret unchanged whenever it already ended in "x".
        let (kept, last) = key.secret.split_at(key.secret.len() - 1);
        let wrong_secret = format!("{kept}{}", if last == "x" { "y" } else { "x" });
        assert_ne!(wrong_secret, key.secret);
        assert!(!matches(&wrong_secret, &key.hash));
        for bad in [
            "svck_",
            "svck_abc",
            "svck_unknown_0000",
            "svck_abcdefgh_short",
            &format!("svck_abcdefg!_{}", "a".repeat(32)),
            "sk_abcdefgh_x",
        ] {
            assert_eq!(public_id(bad), None, "{bad}");
        }
    }
}
