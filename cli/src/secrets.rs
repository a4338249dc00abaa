//! Where secrets live (contract §14): the OS credential store through the keyring
//! ecosystem (the kernel keyring on Linux, which works headless; the Keychain on
//! macOS; the Credential Manager on Windows), and a file readable by its owner only
//! when no store works.
//!
//! Two environment variables exist for tests and unusual machines:
//! `SVC_KEYRING_SERVICE` names the service entries are filed under (default `svc`),
//! so parallel tests cannot see each other's entries, and `SVC_CREDENTIAL_STORE=file`
//! skips the OS store.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keyring_core::Entry;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use crate::outcome::Failure;

/// Where a credential came from; sent as `Svc-Secret-Location` (contract §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    OsStore,
    SecretFile,
    Environment,
}

impl Location {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OsStore => "os_store",
            Self::SecretFile => "secret_file",
            Self::Environment => "environment",
        }
    }
}

/// The credential store of this user.
pub struct Secrets {
    service: String,
    /// The fallback file; `None` without a config folder (then only the OS store).
    file: Option<PathBuf>,
    file_only: bool,
}

/// The fallback file: one secret per account.
#[derive(Default, Serialize, Deserialize)]
struct SecretFile {
    #[serde(default)]
    secrets: BTreeMap<String, String>,
}

impl Secrets {
    pub fn new(service: Option<String>, file: Option<PathBuf>, file_only: bool) -> Self {
        Self { service: service.filter(|s| !s.is_empty()).unwrap_or_else(|| "svc".into()), file, file_only }
    }

    /// Stores `secret` under `account`: in the OS store when it works, else in the
    /// file. Says where it went.
    pub fn save(&self, account: &str, secret: &str) -> Result<Location, Failure> {
        if !self.file_only && self.in_os_store(account, |entry| entry.set_password(secret)).is_ok() {
            // A file copy from an earlier fallback must not outlive the new secret.
            self.delete_from_file(account)?;
            return Ok(Location::OsStore);
        }
        self.save_to_file(account, secret)?;
        Ok(Location::SecretFile)
    }

    /// The secret under `account` at `location`; `None` when it is not there (the
    /// kernel keyring, for one, forgets everything at reboot).
    pub fn load(&self, location: Location, account: &str) -> Result<Option<SecretString>, Failure> {
        match location {
            Location::OsStore => match self.in_os_store(account, Entry::get_password) {
                Ok(secret) => Ok(Some(secret.into())),
                Err(keyring_core::Error::NoEntry) => Ok(None),
                Err(keyring_core::Error::NoStorageAccess(_) | keyring_core::Error::NotSupportedByStore(_)) => {
                    Err(no_store(account))
                }
                Err(e) => Err(Failure::transport(format!("The OS credential store failed: {e}"))),
            },
            Location::SecretFile => Ok(self.read_file()?.secrets.remove(account).map(SecretString::from)),
            Location::Environment => Ok(None),
        }
    }

    /// Forgets the secret under `account` (nothing to do when it is gone already).
    pub fn delete(&self, location: Location, account: &str) -> Result<(), Failure> {
        match location {
            Location::OsStore => match self.in_os_store(account, Entry::delete_credential) {
                Ok(()) | Err(keyring_core::Error::NoEntry | keyring_core::Error::NoStorageAccess(_)) => Ok(()),
                Err(e) => Err(Failure::transport(format!("The OS credential store failed: {e}"))),
            },
            Location::SecretFile => self.delete_from_file(account),
            Location::Environment => Ok(()),
        }
    }

    /// Runs `action` on this account's entry in the OS store.
    fn in_os_store<T>(
        &self,
        account: &str,
        action: impl Fn(&Entry) -> keyring_core::Result<T>,
    ) -> keyring_core::Result<T> {
        action(&os_entry(&self.service, account)?)
    }

    fn file(&self) -> Result<&Path, Failure> {
        self.file
            .as_deref()
            .ok_or_else(|| Failure::usage("No configuration folder for secrets: set XDG_CONFIG_HOME or HOME."))
    }

    fn read_file(&self) -> Result<SecretFile, Failure> {
        let file = self.file()?;
        match fs::read_to_string(file) {
            Ok(text) => toml::from_str(&text).map_err(|_| {
                Failure::usage(format!("{} is not a valid secret file; remove it and save again.", file.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SecretFile::default()),
            Err(e) => Err(Failure::usage(format!("Cannot read {}: {e}.", file.display()))),
        }
    }

    fn save_to_file(&self, account: &str, secret: &str) -> Result<(), Failure> {
        let mut file = self.read_file()?;
        file.secrets.insert(account.to_owned(), secret.to_owned());
        self.write_file(&file)
    }

    fn delete_from_file(&self, account: &str) -> Result<(), Failure> {
        if !self.file.as_deref().is_some_and(Path::exists) {
            return Ok(());
        }
        let mut file = self.read_file()?;
        if file.secrets.remove(account).is_some() {
            self.write_file(&file)?;
        }
        Ok(())
    }

    fn write_file(&self, file: &SecretFile) -> Result<(), Failure> {
        let text = toml::to_string(file).map_err(|e| Failure::transport(format!("Cannot encode secrets: {e}")))?;
        let path = self.file()?;
        write_private(path, text.as_bytes())
            .map_err(|e| Failure::usage(format!("Cannot write {}: {e}.", path.display())))
    }
}

fn no_store(account: &str) -> Failure {
    Failure::authentication(
        "credential_missing",
        format!(
            "The OS credential store holding {account} is not available on this machine; save the credential again."
        ),
    )
}

/// This account's entry in the platform's credential store.
#[cfg(not(target_os = "linux"))]
fn os_entry(service: &str, account: &str) -> keyring_core::Result<Entry> {
    use keyring_core::api::CredentialStoreApi;
    #[cfg(target_os = "macos")]
    let store = apple_native_keyring_store::keychain::Store::new()?;
    #[cfg(target_os = "windows")]
    let store = windows_native_keyring_store::Store::new()?;
    #[cfg(not(any(target_os = "macos", target_os = "windows")))]
    return Err(keyring_core::Error::NotSupportedByStore("no OS credential store on this platform".into()));
    #[cfg(any(target_os = "macos", target_os = "windows"))]
    store.build(service, account, None)
}

/// This account's entry in the kernel keyring.
///
/// In a login session the keyutils store keeps entries in the session keyring and
/// links them into the user's persistent keyring, so they outlive a logout. Without
/// one (containers, CI, services) the kernel refuses that link and the store fails
/// outright; the same entry (same description) then lives in the user-session
/// keyring, which the kernel keeps while the user has processes.
#[cfg(target_os = "linux")]
fn os_entry(service: &str, account: &str) -> keyring_core::Result<Entry> {
    use keyring_core::api::CredentialStoreApi;
    use linux_keyutils::{KeyRing, KeyRingIdentifier};

    let store = linux_keyutils_keyring_store::Store::new()?;
    let special = |id| KeyRing::from_special_id(id, false).ok();
    let user_session = special(KeyRingIdentifier::UserSession);
    if special(KeyRingIdentifier::Session) != user_session {
        return store.build(service, account, None);
    }
    let session = user_session.ok_or_else(|| keyring_core::Error::NoStorageAccess("no user-session keyring".into()))?;
    let [prefix, divider, suffix] = &store.delimiters;
    let credential = linux_keyutils_keyring_store::Cred {
        session,
        persistent: None,
        description: format!("{prefix}{account}{divider}{service}{suffix}"),
        specifiers: Some((service.to_owned(), account.to_owned())),
    };
    Ok(Entry::new_with_credential(Arc::new(credential)))
}

/// Writes a file only its owner can read (0600; its folder 0700), replacing it in
/// one step so a crash never leaves half a file.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary)?;
    file.write_all(contents)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("svc-cli-secrets-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_file_fallback_is_private_and_forgets() {
        let dir = scratch("file");
        let secrets = Secrets::new(None, Some(dir.join("secrets.toml")), true);
        assert_eq!(secrets.save("ci/api-key", "svck_x_y").unwrap(), Location::SecretFile);
        let loaded = secrets.load(Location::SecretFile, "ci/api-key").unwrap().unwrap();
        assert_eq!(secrecy::ExposeSecret::expose_secret(&loaded), "svck_x_y");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.join("secrets.toml")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        secrets.delete(Location::SecretFile, "ci/api-key").unwrap();
        assert!(secrets.load(Location::SecretFile, "ci/api-key").unwrap().is_none());
        let _ = fs::remove_dir_all(&dir);
    }

    /// The kernel keyring is there on Linux, containers and CI included.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_keyring_keeps_secrets() {
        let dir = scratch("os");
        let service = format!("svc-cli-unit-{}", std::process::id());
        let secrets = Secrets::new(Some(service), Some(dir.join("secrets.toml")), false);
        assert_eq!(secrets.save("p/api-key", "svck_kernel").unwrap(), Location::OsStore);
        assert!(!dir.join("secrets.toml").exists(), "nothing written to a file");
        let loaded = secrets.load(Location::OsStore, "p/api-key").unwrap().unwrap();
        assert_eq!(secrecy::ExposeSecret::expose_secret(&loaded), "svck_kernel");
        secrets.delete(Location::OsStore, "p/api-key").unwrap();
        let _ = fs::remove_dir_all(&dir);
    }
}
