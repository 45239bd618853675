//! Where the server keeps its own files, and the check that none of them is inside the agent's
//! workspace.
//!
//! The agent's tools read, write and run commands in the workspace. The server's own files
//! (its configuration, the task database with its `-wal`/`-shm`/lock files, the audit log)
//! must not be among them: a model that can read them sees other callers' requests and token
//! hashes, and one that can write them can widen its own sandbox at the next start. So the
//! database lives, by default, under the user's state directory, in a folder of its own for
//! each workspace; and when an operator points a file inside the workspace anyway, start-up
//! and `check-config` say so (the tools also refuse those files by identity).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Config, ConfigError, StoreBackend};

/// The file name of the default database inside its per-workspace folder.
const DB_FILE: &str = "agent-mcp.db";
/// The audit file's name beside the default database, when stderr is a terminal.
const AUDIT_FILE: &str = "audit.jsonl";

/// Files SQLite keeps beside the database (`<db>-wal`, `<db>-shm`, `<db>.lock` of ours).
const DB_COMPANIONS: [&str; 4] = ["-wal", "-shm", "-journal", ".lock"];

impl Config {
    /// The folder the agent's tools work in: `agent.workspace`, else the current directory.
    pub fn workspace(&self) -> PathBuf {
        self.agent
            .workspace
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// The SQLite file in force: `store.path`, else
    /// `<state dir>/agent-mcp/workspaces/<folder name>-<hash of its path>/agent-mcp.db`, where
    /// the state directory is `$XDG_STATE_HOME`, else `$HOME/.local/state`. One server per
    /// workspace gets one database, outside that workspace.
    pub fn store_path(&self) -> Result<PathBuf, ConfigError> {
        if let Some(path) = &self.store.path {
            return Ok(path.clone());
        }
        let state = state_dir().ok_or_else(|| ConfigError::Invalid {
            key: "store.path",
            message: "no default location: neither XDG_STATE_HOME nor HOME is set; set \
                      store.path to a file outside the agent's workspace (or HOME)"
                .into(),
        })?;
        Ok(state
            .join("agent-mcp")
            .join("workspaces")
            .join(workspace_folder_name(&self.workspace()))
            .join(DB_FILE))
    }

    /// Where audit lines go when `audit.file` is unset and stderr is a terminal:
    /// `audit.jsonl` in the folder the default database has (see [`Self::store_path`]), so
    /// outside the workspace and apart for each one. `None` when there is no state directory.
    ///
    /// Why not the terminal: `agent-mcp serve` writes one line per answered request, and a
    /// terminal that draws tens of thousands of lines a second takes more CPU than the server
    /// spends answering them, on the same two cores (benches/README.md, issue 54). The lines
    /// are the audit trail: kept in a 0600 file, rotated by `audit.max_bytes`, they survive the
    /// terminal's scrollback too. A pipe, a file or a journal on stderr (an MCP host, systemd)
    /// still gets them there.
    pub fn terminal_audit_path(&self) -> Option<PathBuf> {
        let state = state_dir()?;
        Some(
            state
                .join("agent-mcp")
                .join("workspaces")
                .join(workspace_folder_name(&self.workspace()))
                .join(AUDIT_FILE),
        )
    }

    /// The files the server itself reads or writes, which the agent's tools must never touch:
    /// `config_file` (the agent.yaml in use), the SQLite database and its companions, the audit
    /// file. Paths as configured (relative ones are under the current directory); some may not
    /// exist yet.
    pub fn own_files(&self, config_file: Option<&Path>) -> Vec<PathBuf> {
        self.own_files_by_kind(config_file)
            .into_iter()
            .map(|(_, path)| path)
            .collect()
    }

    fn own_files_by_kind(&self, config_file: Option<&Path>) -> Vec<(OwnFile, PathBuf)> {
        let mut files = Vec::new();
        files.extend(config_file.map(|p| (OwnFile::Config, p.to_path_buf())));
        if self.store.backend == StoreBackend::Sqlite
            && let Ok(db) = self.store_path()
        {
            for suffix in DB_COMPANIONS {
                let mut name = db.clone().into_os_string();
                name.push(suffix);
                files.push((OwnFile::DatabaseCompanion, PathBuf::from(name)));
            }
            files.push((OwnFile::Database, db));
        }
        if self.audit.enabled
            && let Some(audit) = &self.audit.file
        {
            files.push((OwnFile::Audit, audit.clone()));
            // The files size rotation moves it to (audit.jsonl.1 …), before they exist too.
            if self.audit.max_bytes.is_some() {
                for n in 1..=self.audit.keep {
                    let mut name = audit.clone().into_os_string();
                    name.push(format!(".{n}"));
                    files.push((OwnFile::AuditRotated, PathBuf::from(name)));
                }
            }
        }
        files
    }

    /// One warning for each of the server's own files (see [`Self::own_files`]) that lies
    /// inside the agent's workspace, saying what to do.
    pub fn overlap_warnings(&self, config_file: Option<&Path>) -> Vec<String> {
        let Some(workspace) = resolve(&self.workspace()) else {
            return Vec::new();
        };
        let mut warnings = Vec::new();
        for (kind, file) in self.own_files_by_kind(config_file) {
            let (what, fix) = match kind {
                // The database stands for its companions, audit.file for its rotated files,
                // which sit beside them.
                OwnFile::DatabaseCompanion | OwnFile::AuditRotated => continue,
                OwnFile::Config => (
                    "the configuration file",
                    "keep agent.yaml outside the workspace and pass it with --config, or set \
                     agent.workspace to a folder that does not contain it",
                ),
                OwnFile::Database => (
                    "the task database (store.path)",
                    "unset store.path to keep it under the state directory, or point it \
                     outside the workspace",
                ),
                OwnFile::Audit => (
                    "the audit log (audit.file)",
                    "point audit.file outside the workspace",
                ),
            };
            if resolve(&file).is_some_and(|f| f.starts_with(&workspace)) {
                warnings.push(format!(
                    "{what} {} is inside the agent's workspace {}: the agent's tools refuse \
                     it, but keep the server's files out of the agent's reach: {fix}",
                    file.display(),
                    workspace.display()
                ));
            }
        }
        warnings
    }
}

/// What one of the server's own files is, for the overlap warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OwnFile {
    Config,
    Database,
    DatabaseCompanion,
    Audit,
    AuditRotated,
}

/// `$XDG_STATE_HOME` (when absolute, as the XDG spec requires), else `$HOME/.local/state`.
fn state_dir() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("XDG_STATE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|home| home.join(".local").join("state")))
}

/// `<folder name>-<16 hex digits of the SHA-256 of its absolute path>`: readable, and apart
/// for two workspaces of the same name.
fn workspace_folder_name(workspace: &Path) -> String {
    let absolute = resolve(workspace).unwrap_or_else(|| workspace.to_path_buf());
    let digest = Sha256::digest(absolute.as_os_str().as_encoded_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name: String = absolute
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    let name = name.trim_start_matches('.');
    if name.is_empty() {
        format!("root-{hex}")
    } else {
        format!("{name}-{hex}")
    }
}

/// `path` made absolute with every link resolved, as far as it exists: the longest existing
/// ancestor is canonicalized and the rest appended (files that are yet to be created).
fn resolve(path: &Path) -> Option<PathBuf> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let mut rest = Vec::new();
    let mut cursor = absolute.as_path();
    loop {
        if let Ok(real) = cursor.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Some(out);
        }
        rest.push(cursor.file_name()?.to_os_string());
        cursor = cursor.parent()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_in(workspace: &Path) -> Config {
        let mut config = Config::default();
        config.agent.workspace = Some(workspace.to_path_buf());
        config
    }

    #[test]
    fn a_terminal_s_audit_file_lies_beside_the_default_database() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("proj");
        std::fs::create_dir_all(&ws).expect("mkdir");
        let mut config = config_in(&ws);
        let audit = config.terminal_audit_path().expect("a state directory");
        assert_eq!(
            audit.parent(),
            config.store_path().expect("a path").parent()
        );
        assert_eq!(audit.file_name().and_then(|n| n.to_str()), Some(AUDIT_FILE));
        assert!(
            !audit.starts_with(&ws),
            "{} is in the workspace",
            audit.display()
        );
        // The agent's tools are kept off it once the server sets it.
        config.audit.file = Some(audit.clone());
        assert!(config.own_files(None).contains(&audit));
    }

    #[test]
    fn the_default_database_is_outside_the_workspace_and_apart_per_workspace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a/proj"), dir.path().join("b/proj"));
        std::fs::create_dir_all(&a).expect("mkdir");
        std::fs::create_dir_all(&b).expect("mkdir");
        // HOME or XDG_STATE_HOME is set wherever these tests run (CI and developers' shells).
        let pa = config_in(&a).store_path().expect("a default path");
        let pb = config_in(&b).store_path().expect("a default path");
        assert_ne!(pa, pb, "two workspaces of one name share no database");
        assert!(
            !pa.starts_with(&a),
            "{} is inside {}",
            pa.display(),
            a.display()
        );
        let folder = pa.parent().and_then(Path::file_name).expect("folder");
        let folder = folder.to_string_lossy();
        assert!(
            folder.starts_with("proj-") && folder.len() == "proj-".len() + 16,
            "{folder}"
        );
        assert_eq!(pa.file_name().and_then(|n| n.to_str()), Some(DB_FILE));
        assert_eq!(
            config_in(&a).store_path().expect("stable"),
            pa,
            "the same workspace always gets the same file"
        );
    }

    #[test]
    fn own_files_list_the_database_companions_config_and_audit() {
        let mut config = Config::default();
        config.store.path = Some(PathBuf::from("/srv/agent/tasks.db"));
        config.audit.file = Some(PathBuf::from("/var/log/agent-mcp/audit.jsonl"));
        // Not rotated by size: no numbered files.
        config.audit.max_bytes = None;
        let files = config.own_files(Some(Path::new("/etc/agent-mcp/agent.yaml")));
        let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            [
                "/etc/agent-mcp/agent.yaml",
                "/srv/agent/tasks.db-wal",
                "/srv/agent/tasks.db-shm",
                "/srv/agent/tasks.db-journal",
                "/srv/agent/tasks.db.lock",
                "/srv/agent/tasks.db",
                "/var/log/agent-mcp/audit.jsonl",
            ]
        );
        config.store.backend = StoreBackend::Memory;
        config.audit.max_bytes = Some(bytesize::ByteSize::mib(1));
        config.audit.keep = 2;
        let names: Vec<String> = config
            .own_files(None)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "/var/log/agent-mcp/audit.jsonl",
                "/var/log/agent-mcp/audit.jsonl.1",
                "/var/log/agent-mcp/audit.jsonl.2",
            ]
        );
        config.audit.enabled = false;
        assert_eq!(config.own_files(None), Vec::<PathBuf>::new());
    }

    #[test]
    fn files_inside_the_workspace_are_warned_about_once_each() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("proj");
        std::fs::create_dir_all(&ws).expect("mkdir");
        let mut config = config_in(&ws);
        assert_eq!(config.overlap_warnings(None), Vec::<String>::new());

        config.store.path = Some(ws.join(".agent-mcp/agent-mcp.db"));
        config.audit.file = Some(dir.path().join("audit.jsonl"));
        let yaml = ws.join("agent.yaml");
        let warnings = config.overlap_warnings(Some(&yaml));
        assert_eq!(warnings.len(), 2, "{warnings:#?}");
        assert!(
            warnings[0].starts_with("the configuration file "),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[1].starts_with("the task database (store.path) "),
            "{}",
            warnings[1]
        );
        assert!(warnings[1].contains("unset store.path"), "{}", warnings[1]);

        // Through a link into the workspace too.
        #[cfg(unix)]
        {
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&ws, &link).expect("symlink");
            config.store.path = None;
            config.audit.file = Some(link.join("logs/audit.jsonl"));
            // Its rotated files are not warned about on their own.
            config.audit.max_bytes = Some(bytesize::ByteSize::mib(1));
            let warnings = config.overlap_warnings(None);
            assert_eq!(warnings.len(), 1, "{warnings:#?}");
            assert!(
                warnings[0].starts_with("the audit log (audit.file) "),
                "{}",
                warnings[0]
            );
        }
    }
}
