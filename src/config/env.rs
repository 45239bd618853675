//! `AGENT_MCP_*` environment overrides: every scalar key of the configuration tree, named by
//! its path in capitals with `_` for `.`.

use std::path::PathBuf;

use super::{Config, ConfigError};

impl Config {
    /// Applies `AGENT_MCP_*` environment overrides to every scalar key, then validates.
    ///
    /// The variable of a key is its path in capitals with `_` for `.`: `ollama.model` is
    /// `AGENT_MCP_OLLAMA_MODEL`, `mcp.images.max_bytes` is `AGENT_MCP_MCP_IMAGES_MAX_BYTES`.
    /// Values are read as YAML scalars (`0.2`, `true`, `"10 MiB"`, `null`). Returns the
    /// `AGENT_MCP_*` variables that name no key (typos), for the caller to warn about.
    pub fn with_env_overrides(
        self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        self.apply_env_overrides(vars)
            .map(|(config, unknown, _)| (config, unknown))
    }

    /// [`Self::with_env_overrides`], also returning each key set and the variable that set it.
    #[allow(clippy::type_complexity)]
    pub(super) fn apply_env_overrides(
        self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(Config, Vec<String>, Vec<(String, String)>), ConfigError> {
        let mut tree = serde_yaml_ng::to_value(&self).map_err(|e| ConfigError::Parse {
            path: PathBuf::from("<environment>"),
            message: e.to_string(),
        })?;
        let mut keys = Vec::new();
        scalar_keys(&tree, String::new(), &mut keys);
        let mut unknown = Vec::new();
        let mut applied = Vec::new();
        for (name, value) in vars {
            let Some(suffix) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let Some(path) = keys.iter().find(|k| env_suffix(k) == suffix) else {
                if !ENV_NOT_CONFIG.contains(&name.as_str()) {
                    unknown.push(name);
                }
                continue;
            };
            let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(&value)
                .unwrap_or(serde_yaml_ng::Value::String(value.clone()));
            set_path(&mut tree, path, parsed);
            // Deserialise after each variable so an error names the one that caused it.
            serde_yaml_ng::from_value::<Config>(tree.clone()).map_err(|e| ConfigError::Parse {
                path: PathBuf::from(format!("environment variable {name}")),
                message: format!("{path}: {e}"),
            })?;
            applied.push((path.clone(), name));
        }
        let config = if !applied.is_empty() {
            serde_yaml_ng::from_value::<Config>(tree).map_err(|e| ConfigError::Parse {
                path: PathBuf::from("<environment>"),
                message: e.to_string(),
            })?
        } else {
            self
        };
        config.validate()?;
        Ok((config, unknown, applied))
    }
}

/// Prefix of the environment variables that override configuration keys.
pub const ENV_PREFIX: &str = "AGENT_MCP_";

/// `AGENT_MCP_*` variables that are not configuration keys (the terminal client's token).
const ENV_NOT_CONFIG: &[&str] = &["AGENT_MCP_TOKEN"];

fn env_suffix(path: &str) -> String {
    path.replace('.', "_").to_ascii_uppercase()
}

/// Dotted paths of every scalar (or null) leaf of a configuration tree.
fn scalar_keys(value: &serde_yaml_ng::Value, prefix: String, out: &mut Vec<String>) {
    match value {
        serde_yaml_ng::Value::Mapping(map) => {
            for (k, v) in map {
                if let Some(k) = k.as_str() {
                    let path = if prefix.is_empty() {
                        k.to_owned()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    scalar_keys(v, path, out);
                }
            }
        }
        serde_yaml_ng::Value::Sequence(_) | serde_yaml_ng::Value::Tagged(_) => {}
        _ => out.push(prefix),
    }
}

fn set_path(tree: &mut serde_yaml_ng::Value, path: &str, value: serde_yaml_ng::Value) {
    let mut node = tree;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let serde_yaml_ng::Value::Mapping(map) = node else {
            return;
        };
        let key = serde_yaml_ng::Value::String(part.to_owned());
        if parts.peek().is_none() {
            map.insert(key, value);
            return;
        }
        match map.get_mut(&key) {
            Some(next) => node = next,
            None => return,
        }
    }
}
