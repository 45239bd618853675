//! Reading `agent.yaml`: the file, YAML parsing and the redacted copy that is safe to print.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError};

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

    /// A copy safe to print: token hashes are replaced.
    pub fn redacted(&self) -> Config {
        let mut copy = self.clone();
        for token in &mut copy.auth.tokens {
            token.sha256 = "<redacted>".into();
        }
        copy.store.url = copy.store.url.as_deref().map(redact_url);
        copy
    }
}

/// `url` with its password (`user:password@`, or a `password=` parameter) replaced by
/// `<redacted>`, for printing and logs.
pub fn redact_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            // The authority ends at the first '/', the userinfo at its last '@'.
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            match authority.rsplit_once('@') {
                Some((userinfo, host)) => {
                    let user = match userinfo.split_once(':') {
                        Some((user, _)) => format!("{user}:<redacted>"),
                        None => userinfo.to_owned(),
                    };
                    format!("{scheme}://{user}@{host}{path}")
                }
                None => head.to_owned(),
            }
        }
        None => head.to_owned(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=<redacted>"),
                _ => p.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

#[cfg(test)]
mod redact_tests {
    use super::redact_url;

    #[test]
    fn passwords_never_survive_redaction() {
        let cases = [
            (
                "postgres://app:s3cret@db:5432/agent",
                "postgres://app:<redacted>@db:5432/agent",
            ),
            (
                "postgresql://app:p@ss@db/agent?sslmode=disable",
                "postgresql://app:<redacted>@db/agent?sslmode=disable",
            ),
            (
                "postgres://app@db/agent?password=s3cret&application_name=x",
                "postgres://app@db/agent?password=<redacted>&application_name=x",
            ),
            ("postgres://db/agent", "postgres://db/agent"),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }
}
