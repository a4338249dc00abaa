//! What every command runs with: the global flags, the environment, the profiles,
//! the credential store and the HTTP client.

use std::path::PathBuf;

use clap::ArgMatches;
use secrecy::SecretString;

use crate::config::{Config, Profile};
use crate::http::Http;
use crate::outcome::Failure;
use crate::secrets::Secrets;

/// The global flags (`--json`, `--workspace`, `--profile`, `--endpoint`).
#[derive(Debug, Default)]
pub struct Globals {
    pub json: bool,
    pub workspace: Option<String>,
    pub profile: Option<String>,
    pub endpoint: Option<String>,
}

impl Globals {
    pub fn from_matches(matches: &ArgMatches) -> Self {
        let text = |id: &str| matches.get_one::<String>(id).cloned();
        Self {
            json: matches.get_flag("json"),
            workspace: text("workspace"),
            profile: text("profile"),
            endpoint: text("endpoint"),
        }
    }
}

/// The environment, read once.
pub struct Env {
    /// `SVC_API_KEY`: wins over every stored credential.
    pub api_key: Option<SecretString>,
    /// `SVC_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `$XDG_CONFIG_HOME/svc`, else `~/.config/svc`.
    pub config_dir: Option<PathBuf>,
    /// `SVC_KEYRING_SERVICE`: the service name credentials are filed under.
    pub keyring_service: Option<String>,
    /// `SVC_CREDENTIAL_STORE=file`: skip the OS store.
    pub file_store_only: bool,
}

impl Env {
    pub fn from_process() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let home = var("HOME").or_else(|| var("USERPROFILE"));
        Self {
            api_key: var("SVC_API_KEY").map(SecretString::from),
            endpoint: var("SVC_ENDPOINT"),
            config_dir: crate::config::config_dir(var("XDG_CONFIG_HOME").as_deref(), home.as_deref()),
            keyring_service: var("SVC_KEYRING_SERVICE"),
            file_store_only: var("SVC_CREDENTIAL_STORE").is_some_and(|v| v == "file"),
        }
    }
}

pub struct Context {
    pub globals: Globals,
    pub env: Env,
    pub config: Config,
    /// The profile in use: `--profile`, else the current one, else `default`.
    pub profile_name: String,
    pub secrets: Secrets,
    pub http: Http,
}

impl Context {
    pub fn new(globals: Globals, env: Env) -> Result<Self, Failure> {
        let config = match &env.config_dir {
            Some(dir) => Config::load(dir)?,
            None => Config::default(),
        };
        let profile_name = config.profile_name(globals.profile.as_deref());
        let secrets_file = env.config_dir.as_ref().map(|dir| dir.join("secrets.toml"));
        let secrets = Secrets::new(env.keyring_service.clone(), secrets_file, env.file_store_only);
        Ok(Self { globals, env, config, profile_name, secrets, http: Http::default() })
    }

    /// The profile in use, or an empty one. A profile named with `--profile` must
    /// exist: a typo must not silently run without its credential.
    pub fn profile(&self) -> Result<Profile, Failure> {
        match (self.config.profile(&self.profile_name), &self.globals.profile) {
            (Some(profile), _) => Ok(profile.clone()),
            (None, Some(name)) => {
                Err(Failure::usage(format!("There is no profile named {name:?} (see `svc profile list`).")))
            }
            (None, None) => Ok(Profile::default()),
        }
    }

    /// The endpoint: `--endpoint`, then `SVC_ENDPOINT`, then the profile's.
    pub fn endpoint(&self) -> Result<String, Failure> {
        let profile = self.profile()?;
        let endpoint = self.globals.endpoint.clone().or_else(|| self.env.endpoint.clone()).or(profile.endpoint);
        let endpoint = endpoint.ok_or_else(|| {
            Failure::usage("No endpoint: pass --endpoint, set SVC_ENDPOINT, or use a profile that has one.")
        })?;
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(Failure::usage(format!("The endpoint {endpoint:?} is not an http:// or https:// URL.")));
        }
        Ok(endpoint)
    }

    /// The Workspace to send: `--workspace`, then the profile's.
    pub fn workspace(&self) -> Result<Option<String>, Failure> {
        Ok(self.globals.workspace.clone().filter(|w| !w.is_empty()).or(self.profile()?.workspace))
    }

    /// The folder of `config.toml`; needed only by commands that write it.
    pub fn config_dir(&self) -> Result<PathBuf, Failure> {
        self.env
            .config_dir
            .clone()
            .ok_or_else(|| Failure::usage("No configuration folder: set XDG_CONFIG_HOME or HOME."))
    }

    /// Applies `change` to the profile in use and writes the configuration.
    pub fn update_profile(&mut self, change: impl FnOnce(&mut Profile)) -> Result<(), Failure> {
        let dir = self.config_dir()?;
        let name = self.profile_name.clone();
        change(self.config.profile_mut(&name));
        if self.config.current.is_none() {
            self.config.current = Some(name);
        }
        self.config.save(&dir)
    }
}
