//! Where each effective configuration value came from: the built-in default, the file,
//! an `AGENT_MCP_*` or `OTEL_*` variable, or `OLLAMA_HOST`. `agent-mcp check-config` prints the
//! configuration with the source of every key beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use super::{Config, ConfigError, normalize_ollama_host};

/// Where one effective value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// The configuration file.
    File(PathBuf),
    /// An `AGENT_MCP_*` or standard `OTEL_*` environment variable (its name).
    Env(String),
    /// `ollama.url` from Ollama's own `OLLAMA_HOST` (its value).
    OllamaHost(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(path) => write!(f, "file {}", path.display()),
            Source::Env(name) => write!(f, "environment {name}"),
            Source::OllamaHost(value) => write!(
                f,
                "environment OLLAMA_HOST={}",
                crate::redact::redact_url(value)
            ),
        }
    }
}

/// The sources of a loaded configuration (see [`Config::load_traced`]).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    file: Option<PathBuf>,
    /// Dotted keys the file sets (leaves; a list or an empty map is one leaf).
    file_keys: BTreeSet<String>,
    /// Dotted key → the `AGENT_MCP_*` or `OTEL_*` variable that set it.
    env_keys: BTreeMap<String, String>,
    /// `OLLAMA_HOST` as set in the environment, when it is not empty.
    ollama_host: Option<String>,
}

impl Sources {
    /// The configuration file read, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Where the effective value of the dotted `key` (e.g. `ollama.url`) came from.
    pub fn of(&self, key: &str) -> Source {
        if let Some(var) = self.env_keys.get(key) {
            return Source::Env(var.clone());
        }
        if let Some(file) = &self.file {
            let under = |outer: &str, inner: &str| {
                inner.len() > outer.len()
                    && inner.starts_with(outer)
                    && inner.as_bytes()[outer.len()] == b'.'
            };
            if self.file_keys.contains(key)
                || self
                    .file_keys
                    .iter()
                    .any(|k| under(key, k) || under(k, key))
            {
                return Source::File(file.clone());
            }
        }
        match &self.ollama_host {
            Some(host) if key == "ollama.url" => Source::OllamaHost(host.clone()),
            _ => Source::Default,
        }
    }
}

/// A configuration as loaded from its file and the environment.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The configuration to use.
    pub config: Config,
    /// `AGENT_MCP_*` variables that name no key (typos), for the caller to warn about.
    pub unknown_env: Vec<String>,
    /// Values read but ignored (an unreadable `OTEL_*` value), each with why, to warn about.
    pub warnings: Vec<String>,
    /// Where each value came from (default, file, environment), for `check-config`.
    pub sources: Sources,
}

impl Config {
    /// [`Config::load`], the standard `OTEL_*` variables over the `telemetry` section, then
    /// [`Config::with_env_overrides`], recording where each value came from.
    pub fn load_traced(
        path: Option<&Path>,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Loaded, ConfigError> {
        let vars: Vec<(String, String)> = vars.into_iter().collect();
        let (config, file) = Config::load_with_file(path)?;
        let mut sources = Sources {
            ollama_host: vars
                .iter()
                .find(|(name, _)| name == "OLLAMA_HOST")
                .map(|(_, value)| value.clone())
                .filter(|value| !normalize_ollama_host(value).is_empty()),
            ..Sources::default()
        };
        if let Some((path, text)) = file {
            if let Ok(tree) = serde_yaml_ng::from_str::<Value>(&text) {
                leaf_keys(&tree, String::new(), &mut sources.file_keys);
            }
            sources.file = Some(path);
        }
        // `ollama.url` not set by the file: from `OLLAMA_HOST` as given in `vars` (the process
        // environment when run), else the built-in default.
        let mut config = config;
        if !matches!(sources.of("ollama.url"), Source::File(_)) {
            config.ollama.url = sources
                .ollama_host
                .as_deref()
                .map(normalize_ollama_host)
                .unwrap_or_else(|| super::DEFAULT_OLLAMA_URL.to_owned());
        }
        // A secret: only from the environment, never from a file an agent might read.
        let api_key = vars
            .iter()
            .find(|(name, _)| name == "OLLAMA_API_KEY")
            .and_then(|(_, value)| super::ApiKey::new(value));
        // OTEL_* first, so an AGENT_MCP_TELEMETRY_* variable (more specific) has the last word.
        let otel = config.telemetry.apply_otel_env(&vars)?;
        let (mut config, unknown_env, applied) = config.apply_env_overrides(vars)?;
        // The overrides rebuild the configuration from its YAML, which does not carry the key.
        config.ollama.api_key = api_key;
        sources.env_keys = otel.applied.into_iter().chain(applied).collect();
        Ok(Loaded {
            config,
            unknown_env,
            warnings: otel.warnings,
            sources,
        })
    }

    /// This configuration as YAML with the source of every value in a comment beside it, and
    /// what an unset value that is derived at run time stands for. Token hashes are redacted.
    /// The text reads back as the same configuration.
    pub fn annotated_yaml(&self, sources: &Sources) -> String {
        let redacted = self.redacted();
        let tree = serde_yaml_ng::to_value(&redacted).unwrap_or(Value::Null);
        let mut out = String::new();
        emit(&tree, "", 0, sources, &self.derived(), &mut out);
        out
    }

    /// What the unset keys that are derived at run time stand for.
    fn derived(&self) -> BTreeMap<&'static str, String> {
        let mut derived = BTreeMap::new();
        if self.agent.workspace.is_none() {
            derived.insert(
                "agent.workspace",
                format!("the current directory, {}", self.workspace().display()),
            );
        }
        if self.store.path.is_none() && self.store.backend == super::StoreBackend::Sqlite {
            let path = match self.store_path() {
                Ok(path) => path.display().to_string(),
                Err(e) => e.to_string(),
            };
            derived.insert("store.path", format!("per workspace: {path}"));
        }
        if self.http.max_body_bytes.is_none() {
            derived.insert(
                "http.max_body_bytes",
                format!(
                    "from mcp.images: {} bytes",
                    self.http.body_limit(&self.mcp.images)
                ),
            );
        }
        if self.audit.file.is_none() {
            derived.insert(
                "audit.file",
                "stderr; audit.jsonl beside the default database when stderr is a terminal".into(),
            );
        }
        derived.insert(
            "ollama.num_ctx",
            "the most; the model's own context length from /api/show when smaller".into(),
        );
        if self.agent.steering == super::SteeringMode::Auto {
            derived.insert(
                "agent.steering",
                "small below 7B parameters, off from 7B, from /api/show; the model line below \
                 says which"
                    .into(),
            );
        }
        if self.audit.file.is_none() {
            derived.insert(
                "audit.max_bytes",
                "no effect while audit lines go to stderr".into(),
            );
        } else if self.audit.max_bytes.is_none() {
            derived.insert(
                "audit.max_bytes",
                "no size limit; SIGHUP reopens audit.file".into(),
            );
        }
        if self.agent.commands.allow.is_empty() {
            derived.insert(
                "agent.commands.allow",
                "empty: any program found on the command PATH".into(),
            );
        }
        derived.insert(
            "http.max_connections",
            format!(
                "also kept {} below the file descriptor limit",
                super::RESERVED_DESCRIPTORS
            ),
        );
        derived.extend(self.telemetry.derived());
        derived
    }
}

/// Dotted paths of every leaf of a YAML tree; a list or an empty map is one leaf.
fn leaf_keys(value: &Value, prefix: String, out: &mut BTreeSet<String>) {
    match value {
        Value::Mapping(map) if !map.is_empty() => {
            for (k, v) in map {
                let k = match k {
                    Value::String(s) => s.clone(),
                    other => serde_yaml_ng::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_owned(),
                };
                let path = if prefix.is_empty() {
                    k
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_keys(v, path, out);
            }
        }
        _ if prefix.is_empty() => {}
        _ => {
            out.insert(prefix);
        }
    }
}

fn emit(
    value: &Value,
    prefix: &str,
    indent: usize,
    sources: &Sources,
    derived: &BTreeMap<&'static str, String>,
    out: &mut String,
) {
    let Value::Mapping(map) = value else {
        return;
    };
    let pad = " ".repeat(indent);
    for (k, v) in map {
        let Some(k) = k.as_str() else { continue };
        let path = if prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{prefix}.{k}")
        };
        // Nested sections (and non-empty maps such as agent.commands.env) recurse.
        if matches!(v, Value::Mapping(m) if !m.is_empty()) {
            out.push_str(&format!("{pad}{k}:\n"));
            emit(v, &path, indent + 2, sources, derived, out);
            continue;
        }
        let mut note = sources.of(&path).to_string();
        if let Some(what) = derived.get(path.as_str()) {
            note.push_str(&format!(" ({what})"));
        }
        let note = note.replace('\n', " ");
        match scalar_text(v) {
            Some(text) => out.push_str(&format!("{pad}{k}: {text}  # {note}\n")),
            None => {
                // A non-empty list: block style, one level deeper.
                out.push_str(&format!("{pad}{k}:  # {note}\n"));
                let text = serde_yaml_ng::to_string(v).unwrap_or_default();
                for line in text.lines() {
                    out.push_str(&format!("{pad}  {line}\n"));
                }
            }
        }
    }
}

/// A value that fits on its key's line, as YAML; `None` for a non-empty list.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::Sequence(s) if !s.is_empty() => None,
        // JSON string syntax is YAML's double-quoted style, and never spans lines.
        Value::String(s) => {
            let plain = serde_yaml_ng::to_string(value).unwrap_or_default();
            let plain = plain.trim_end();
            if plain.contains('\n') || plain.starts_with('|') || plain.starts_with('>') {
                serde_json::to_string(s).ok()
            } else {
                Some(plain.to_owned())
            }
        }
        other => Some(
            serde_yaml_ng::to_string(other)
                .unwrap_or_default()
                .trim_end()
                .to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::vars;

    fn line<'a>(text: &'a str, key: &str) -> &'a str {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}:")))
            .unwrap_or_else(|| panic!("no line for {key} in\n{text}"))
    }

    #[test]
    fn every_value_names_its_source() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("agent.yaml");
        std::fs::write(
            &file,
            "ollama:\n  model: llama3.2\nagent:\n  commands:\n    allow: [cargo]\n    env: {RUST_LOG: debug}\n\
             auth:\n  tokens:\n  - {name: ci, sha256: 0000000000000000000000000000000000000000000000000000000000000000}\n",
        )
        .expect("write");
        let loaded = Config::load_traced(
            Some(&file),
            vars(&[
                ("OLLAMA_HOST", "gpu-box:11434"),
                ("AGENT_MCP_OLLAMA_NUM_CTX", "8192"),
            ]),
        )
        .expect("loads");
        let s = &loaded.sources;
        let from_file = Source::File(file.clone());
        assert_eq!(s.of("ollama.model"), from_file);
        assert_eq!(s.of("agent.commands.allow"), from_file);
        assert_eq!(s.of("agent.commands.env.RUST_LOG"), from_file);
        assert_eq!(s.of("auth.tokens"), from_file);
        assert_eq!(
            s.of("ollama.num_ctx"),
            Source::Env("AGENT_MCP_OLLAMA_NUM_CTX".into())
        );
        assert_eq!(loaded.config.ollama.num_ctx, 8192);
        assert_eq!(
            s.of("ollama.url"),
            Source::OllamaHost("gpu-box:11434".into())
        );
        assert_eq!(loaded.config.ollama.url, "http://gpu-box:11434");
        assert_eq!(s.of("ollama.retries"), Source::Default);

        let text = loaded.config.annotated_yaml(s);
        assert!(
            line(&text, "model").ends_with(&format!("# file {}", file.display())),
            "{text}"
        );
        assert!(
            line(&text, "num_ctx").contains("# environment AGENT_MCP_OLLAMA_NUM_CTX (the most"),
            "{text}"
        );
        assert!(line(&text, "retries").ends_with("# default"), "{text}");
        assert!(line(&text, "path").contains("# default"), "{text}");
        assert!(
            line(&text, "workspace").contains("# default (the current directory, "),
            "{text}"
        );
        assert!(
            !text.contains("000000000000"),
            "token hashes are redacted:\n{text}"
        );
        // The annotated text is YAML for the same configuration.
        let back: Config = serde_yaml_ng::from_str(&text).expect("reads back");
        assert_eq!(back, loaded.config.redacted());
    }

    #[test]
    fn the_api_key_comes_from_the_environment_and_is_never_printed() {
        let loaded =
            Config::load_traced(None, vars(&[("OLLAMA_API_KEY", "sk-secret-77")])).expect("loads");
        assert_eq!(
            loaded.config.ollama.api_key,
            crate::config::ApiKey::new("sk-secret-77")
        );
        let text = loaded.config.annotated_yaml(&loaded.sources);
        assert!(!text.contains("sk-secret-77"), "{text}");
        assert!(!format!("{:?}", loaded.config).contains("sk-secret-77"));
        let back: Config = serde_yaml_ng::from_str(&text).expect("reads back");
        assert_eq!(back.ollama.api_key, None, "never read from a file");
    }

    #[test]
    fn ollama_host_wins_only_where_nothing_else_sets_the_url() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("agent.yaml");
        std::fs::write(&file, "ollama:\n  url: http://10.1.2.3:11434\n").expect("write");
        let loaded =
            Config::load_traced(Some(&file), vars(&[("OLLAMA_HOST", "gpu-box")])).expect("loads");
        assert_eq!(loaded.sources.of("ollama.url"), Source::File(file));
        assert_eq!(loaded.config.ollama.url, "http://10.1.2.3:11434");

        let loaded = Config::load_traced(None, vars(&[])).expect("loads");
        assert_eq!(loaded.sources.of("ollama.url"), Source::Default);
        assert_eq!(loaded.config.ollama.url, "http://127.0.0.1:11434");
    }

    #[test]
    fn multi_line_strings_stay_on_their_key_line() {
        let mut config = Config::default();
        config.agent.system_prompt = "line one\nline two: with a colon".into();
        let text = config.annotated_yaml(&Sources::default());
        let back: Config = serde_yaml_ng::from_str(&text).expect("reads back");
        assert_eq!(back.agent.system_prompt, config.agent.system_prompt);
    }
}
