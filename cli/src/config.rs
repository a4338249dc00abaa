//! Profiles (contract §14): `$XDG_CONFIG_HOME/svc/config.toml`, by default
//! `~/.config/svc/config.toml`. A profile names an endpoint, a Workspace and where
//! its credential is kept, never the credential itself.
//!
//! ```toml
//! current = "default"
//!
//! [profiles.default]
//! endpoint = "https://svc.example.com"
//! workspace = "ws_01jd..."
//! session = { location = "os_store" }
//!
//! [profiles.ci]
//! endpoint = "https://svc.example.com"
//! workspace = "ws_01jd..."
//! api_key = { location = "os_store", key_prefix = "svck_AbCd1234" }
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::outcome::Failure;
use crate::secrets::{Location, write_private};

/// The profile used when none is named and none is current.
pub const DEFAULT_PROFILE: &str = "default";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The selected Workspace's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// A Workspace API key saved with `--save-as`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<StoredSecret>,
    /// A User session from `svc auth login`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<StoredSecret>,
}

/// Where a profile's secret is; the secret itself is in the credential store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredSecret {
    pub location: Location,
    /// The non-secret prefix of an API key, to tell keys apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
}

/// The account a profile's API key is filed under in the credential store.
pub fn api_key_account(profile: &str) -> String {
    format!("{profile}/api-key")
}

/// The account a profile's User session is filed under in the credential store.
pub fn session_account(profile: &str) -> String {
    format!("{profile}/session")
}

/// The folder of `config.toml` and the fallback secret file.
pub fn config_dir(xdg_config_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    let base = match xdg_config_home.filter(|p| Path::new(p).is_absolute()) {
        Some(xdg) => PathBuf::from(xdg),
        None => PathBuf::from(home.filter(|h| !h.is_empty())?).join(".config"),
    };
    Some(base.join("svc"))
}

impl Config {
    /// The configuration in `dir`, or an empty one when there is none yet.
    pub fn load(dir: &Path) -> Result<Self, Failure> {
        let file = dir.join("config.toml");
        match fs::read_to_string(&file) {
            Ok(text) => toml::from_str(&text)
                .map_err(|e| Failure::usage(format!("{} is not valid: {}", file.display(), e.message()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(Failure::usage(format!("Cannot read {}: {e}.", file.display()))),
        }
    }

    pub fn save(&self, dir: &Path) -> Result<(), Failure> {
        let file = dir.join("config.toml");
        let text = toml::to_string(self).map_err(|e| Failure::transport(format!("Cannot encode the profiles: {e}")))?;
        write_private(&file, text.as_bytes())
            .map_err(|e| Failure::usage(format!("Cannot write {}: {e}.", file.display())))
    }

    /// The name of the profile to use: the one asked for, the current one, or `default`.
    pub fn profile_name(&self, asked: Option<&str>) -> String {
        asked.or(self.current.as_deref()).unwrap_or(DEFAULT_PROFILE).to_owned()
    }

    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    pub fn profile_mut(&mut self, name: &str) -> &mut Profile {
        self.profiles.entry(name.to_owned()).or_default()
    }
}

/// Profile names are file- and keyring-safe: letters, digits, `.`, `_` and `-`.
pub fn check_profile_name(name: &str) -> Result<(), Failure> {
    let valid = (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.starts_with(['.', '-']);
    if valid {
        Ok(())
    } else {
        Err(Failure::usage(format!(
            "{name:?} is not a valid profile name: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit."
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_round_trip_without_secrets() {
        let dir = std::env::temp_dir().join(format!("svc-cli-config-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        assert!(Config::load(&dir).unwrap().profiles.is_empty());
        let mut config = Config { current: Some("ci".into()), ..Config::default() };
        *config.profile_mut("ci") = Profile {
            endpoint: Some("http://127.0.0.1:8080".into()),
            workspace: Some("ws_1".into()),
            api_key: Some(StoredSecret { location: Location::OsStore, key_prefix: Some("svck_AbCd1234".into()) }),
            session: None,
        };
        config.save(&dir).unwrap();
        let text = fs::read_to_string(dir.join("config.toml")).unwrap();
        assert!(text.contains("key_prefix = \"svck_AbCd1234\"") && text.contains("location = \"os_store\""), "{text}");
        let loaded = Config::load(&dir).unwrap();
        assert_eq!(loaded.profile("ci"), config.profile("ci"));
        assert_eq!(loaded.profile_name(None), "ci");
        assert_eq!(loaded.profile_name(Some("other")), "other");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_config_folder_follows_xdg() {
        assert_eq!(config_dir(Some("/x"), Some("/home/a")), Some(PathBuf::from("/x/svc")));
        assert_eq!(config_dir(Some("relative"), Some("/home/a")), Some(PathBuf::from("/home/a/.config/svc")));
        assert_eq!(config_dir(None, Some("/home/a")), Some(PathBuf::from("/home/a/.config/svc")));
        assert_eq!(config_dir(None, None), None);
    }

    #[test]
    fn profile_names() {
        for good in ["default", "ci", "prod.eu-1", "a_b"] {
            assert!(check_profile_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-x", ".x", "a b", "a/b", "a@b", &"x".repeat(65)] {
            assert!(check_profile_name(bad).is_err(), "{bad}");
        }
    }
}
