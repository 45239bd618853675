//! Reading `agent.yaml`: the file, YAML parsing and the redacted copy that is safe to print.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError};
use crate::redact::redact_url;

impl Config {
    /// Loads `path`; with `None`, `./agent.yaml` if it exists, else the defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with_file(path).map(|(config, _)| config)
    }

    /// [`Self::load`], also returning the file read and its text.
    pub(super) fn load_with_file(
        path: Option<&Path>,
    ) -> Result<(Config, Option<(PathBuf, String)>), ConfigError> {
        let path = match path {
            Some(p) => Some(p.to_path_buf()),
            None => Some(PathBuf::from("agent.yaml")).filter(|p| p.is_file()),
        };
        match path {
            None => Ok((Config::default(), None)),
            Some(path) => {
                let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                let config = Config::from_yaml(&text).map_err(|e| match e {
                    ConfigError::Parse { message, .. } => ConfigError::Parse {
                        path: path.clone(),
                        message,
                    },
                    other => other,
                })?;
                Ok((config, Some((path, text))))
            }
        }
    }

    /// Parses and validates YAML text. An empty document means all defaults.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = if text.trim().is_empty() {
            Config::default()
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Parse {
                path: PathBuf::from("<yaml>"),
                message: e.to_string(),
            })?
        };
        config.validate()?;
        Ok(config)
    }

    /// A copy safe to print: token hashes and URL passwords are replaced.
    pub fn redacted(&self) -> Config {
        let mut copy = self.clone();
        for token in &mut copy.auth.tokens {
            token.sha256 = "<redacted>".into();
        }
        copy.store.url = copy.store.url.as_deref().map(redact_url);
        copy.ollama.url = redact_url(&copy.ollama.url);
        copy
    }
}
