//! `agent.approvals`: which of the agent's tool calls run at once, which wait for a person's
//! decision, and which are refused.
//!
//! ```yaml
//! agent:
//!   approvals:
//!     timeout: 5m            # no decision by then: refused
//!     write_file: ask
//!     edit_file: allow
//!     run_command:
//!       allow: ["cargo test", "cargo test *"]
//!       ask: ["cargo *"]
//!       default: deny
//! ```
//!
//! Every tool is `allow` unless set (each key is also an `AGENT_MCP_AGENT_APPROVALS_*`
//! variable), so a configuration without the section behaves as before. `run_command` takes either one policy for every command, or
//! patterns matched against the command's argv: the lists are tried in the order `deny`,
//! `allow`, `ask`, each in the order written, and the first pattern that matches decides;
//! none matches: `default` (`ask` unless set). A pattern is words separated by spaces, each
//! compared with one argument; `*` inside a word matches any characters of that argument
//! (`test*`), and a last word of `*` alone matches one or more further arguments.
//!
//! ```
//! use agent_mcp::config::{Approval, ApprovalsConfig};
//! let approvals: ApprovalsConfig = serde_yaml_ng::from_str(
//!     "run_command: {allow: [cargo test, 'cargo test *'], ask: ['cargo *'], default: deny}",
//! )
//! .unwrap();
//! let argv = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
//! assert_eq!(approvals.decide("run_command", Some(&argv("cargo test"))), Approval::Allow);
//! assert_eq!(approvals.decide("run_command", Some(&argv("cargo test -q"))), Approval::Allow);
//! assert_eq!(approvals.decide("run_command", Some(&argv("cargo build"))), Approval::Ask);
//! assert_eq!(approvals.decide("run_command", Some(&argv("make"))), Approval::Deny);
//! assert_eq!(approvals.decide("write_file", None), Approval::Allow);
//! ```

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::serde_with::humantime_serde_compat;

/// What happens to one tool call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// Runs at once.
    #[default]
    Allow,
    /// Waits for a person's decision: accepted, it runs; declined, dismissed or unanswered
    /// within the timeout, the model is told it was refused.
    Ask,
    /// Refused at once; the model is told so.
    Deny,
}

impl Approval {
    /// Its name in `agent.yaml` (`allow`, `ask`, `deny`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Approval::Allow => "allow",
            Approval::Ask => "ask",
            Approval::Deny => "deny",
        }
    }
}

/// `agent.approvals`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// How long a call that asks waits for a decision; then it is refused.
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// `list_dir` calls.
    pub list_dir: Approval,
    /// `read_file` calls.
    pub read_file: Approval,
    /// `search_text` calls.
    pub search_text: Approval,
    /// `write_file` calls, and `delete_file` calls (deleting is writing).
    pub write_file: Approval,
    /// `edit_file` calls.
    pub edit_file: Approval,
    /// `run_command` calls: one policy, or patterns on the argv.
    pub run_command: CommandApproval,
}

/// The default `agent.approvals.timeout`.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_APPROVAL_TIMEOUT,
            list_dir: Approval::Allow,
            read_file: Approval::Allow,
            search_text: Approval::Allow,
            write_file: Approval::Allow,
            edit_file: Approval::Allow,
            run_command: CommandApproval::Every(Approval::Allow),
        }
    }
}

/// `agent.approvals.run_command`: one policy, or patterns on the argv.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CommandApproval {
    /// The same policy for every command.
    Every(Approval),
    /// A policy chosen by the first pattern that matches the argv.
    Patterns(CommandPatterns),
}

/// `agent.approvals.run_command` as patterns (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandPatterns {
    /// Commands refused without asking (checked first).
    #[serde(default)]
    pub deny: Vec<String>,
    /// Commands run without asking.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Commands that wait for a person's decision.
    #[serde(default)]
    pub ask: Vec<String>,
    /// When no pattern matches.
    #[serde(default = "ask")]
    pub default: Approval,
}

fn ask() -> Approval {
    Approval::Ask
}

impl<'de> Deserialize<'de> for CommandApproval {
    /// A string is one policy; a map is patterns, read with their own unknown-key errors
    /// (an untagged enum would only say that nothing matched).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = CommandApproval;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "allow, ask or deny, or patterns such as {allow: [\"cargo test\"], ask: \
                     [\"cargo *\"], default: deny}",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Approval::deserialize(serde::de::value::StrDeserializer::<E>::new(v))
                    .map(CommandApproval::Every)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                CommandPatterns::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(CommandApproval::Patterns)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl ApprovalsConfig {
    /// The policy for a call of `tool`; `argv` is run_command's parsed command line.
    pub fn decide(&self, tool: &str, argv: Option<&[String]>) -> Approval {
        match tool {
            "list_dir" => self.list_dir,
            "read_file" => self.read_file,
            "search_text" => self.search_text,
            // Deleting is writing: a configuration that asks before (or denies) writes asks
            // before (or denies) deletes too.
            "write_file" | "delete_file" => self.write_file,
            "edit_file" => self.edit_file,
            "run_command" => match &self.run_command {
                CommandApproval::Every(approval) => *approval,
                CommandApproval::Patterns(patterns) => patterns.decide(argv.unwrap_or_default()),
            },
            _ => Approval::Allow,
        }
    }

    /// Whether any call may wait for a decision.
    pub fn asks_anything(&self) -> bool {
        [
            self.list_dir,
            self.read_file,
            self.search_text,
            self.write_file,
            self.edit_file,
        ]
        .contains(&Approval::Ask)
            || match &self.run_command {
                CommandApproval::Every(a) => *a == Approval::Ask,
                CommandApproval::Patterns(p) => !p.ask.is_empty() || p.default == Approval::Ask,
            }
    }

    /// Checks the section; `programs` is `agent.commands.allow` (empty: any program).
    pub(super) fn validate(&self, programs: &[String]) -> Result<(), (&'static str, String)> {
        if self.timeout.is_zero() {
            return Err((
                "agent.approvals.timeout",
                "must be greater than 0, e.g. 5m".into(),
            ));
        }
        let CommandApproval::Patterns(patterns) = &self.run_command else {
            return Ok(());
        };
        for (key, list) in [
            ("agent.approvals.run_command.deny", &patterns.deny),
            ("agent.approvals.run_command.allow", &patterns.allow),
            ("agent.approvals.run_command.ask", &patterns.ask),
        ] {
            for pattern in list {
                let Some(program) = pattern.split_whitespace().next() else {
                    return Err((
                        key,
                        "an empty pattern; write the program and its arguments, e.g. \"cargo \
                         test *\""
                            .into(),
                    ));
                };
                if program.contains('*') {
                    return Err((
                        key,
                        format!(
                            "'{pattern}' must start with a program name without `*`, e.g. \
                             \"cargo *\""
                        ),
                    ));
                }
                if !programs.is_empty() && !programs.iter().any(|p| p == program) {
                    return Err((
                        key,
                        format!(
                            "'{pattern}' names {program}, which agent.commands.allow does not \
                             list, so run_command never starts it; add {program} there or \
                             remove the pattern"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl CommandPatterns {
    /// The first matching pattern's list decides: `deny`, then `allow`, then `ask`.
    pub fn decide(&self, argv: &[String]) -> Approval {
        for (approval, list) in [
            (Approval::Deny, &self.deny),
            (Approval::Allow, &self.allow),
            (Approval::Ask, &self.ask),
        ] {
            if list.iter().any(|p| pattern_matches(p, argv)) {
                return approval;
            }
        }
        self.default
    }
}

/// Whether `pattern` (words; `*` globs inside a word; a last word `*` takes one or more
/// further arguments) matches `argv`.
pub fn pattern_matches(pattern: &str, argv: &[String]) -> bool {
    let words: Vec<&str> = pattern.split_whitespace().collect();
    let (words, rest) = match words.split_last() {
        Some((&"*", before)) if !before.is_empty() => (before, true),
        _ => (&words[..], false),
    };
    if rest {
        if argv.len() <= words.len() {
            return false;
        }
    } else if argv.len() != words.len() {
        return false;
    }
    words.iter().zip(argv).all(|(w, a)| glob(w, a))
}

/// `*` in `pattern` matches any run of characters of `text`; everything else is literal.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return text.is_empty();
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn patterns_match_word_by_word() {
        for (pattern, line, matches) in [
            ("cargo test", "cargo test", true),
            ("cargo test", "cargo test -q", false),
            ("cargo test *", "cargo test", false),
            ("cargo test *", "cargo test -q --lib", true),
            ("cargo *", "cargo", false),
            ("cargo *", "cargo build", true),
            ("cargo test*", "cargo tests", true),
            ("cargo t*t", "cargo test", true),
            ("cargo t*t", "cargo tea", false),
            ("cargo * --release", "cargo build --release", true),
            ("cargo * --release", "cargo build", false),
            ("*", "cargo", true),
            ("python3 -m unittest", "python3 -m pytest", false),
        ] {
            assert_eq!(
                pattern_matches(pattern, &argv(line)),
                matches,
                "{pattern} vs {line}"
            );
        }
    }

    #[test]
    fn deny_then_allow_then_ask_then_the_default() {
        let p = CommandPatterns {
            deny: vec!["cargo publish *".into()],
            allow: vec!["cargo test".into(), "cargo *".into()],
            ask: vec!["cargo *".into(), "git *".into()],
            default: Approval::Deny,
        };
        assert_eq!(p.decide(&argv("cargo publish --dry-run")), Approval::Deny);
        assert_eq!(p.decide(&argv("cargo build")), Approval::Allow);
        assert_eq!(p.decide(&argv("git status")), Approval::Ask);
        assert_eq!(p.decide(&argv("make")), Approval::Deny);
    }

    #[test]
    fn bad_values_say_what_to_write() {
        let err = |yaml: &str| {
            serde_yaml_ng::from_str::<ApprovalsConfig>(yaml)
                .unwrap_err()
                .to_string()
        };
        assert!(err("write_file: maybe").contains("expected one of `allow`, `ask`, `deny`"));
        assert!(err("format_disk: ask").contains("unknown field `format_disk`"));
        assert!(
            err("run_command: {allow: [x], sometimes: [y]}").contains("unknown field `sometimes`")
        );
        assert!(err("run_command: 3").contains("allow, ask or deny, or patterns"));
        let unlisted: ApprovalsConfig =
            serde_yaml_ng::from_str("run_command: {allow: [make all]}").unwrap();
        let (key, message) = unlisted.validate(&["cargo".into()]).unwrap_err();
        assert_eq!(key, "agent.approvals.run_command.allow");
        assert!(message.contains("add make there"), "{message}");
        assert!(unlisted.validate(&["make".into()]).is_ok());
    }

    #[test]
    fn each_tool_is_an_environment_variable_too() {
        let (config, unknown) = crate::config::Config::default()
            .with_env_overrides([
                (
                    "AGENT_MCP_AGENT_APPROVALS_RUN_COMMAND".to_owned(),
                    "ask".to_owned(),
                ),
                (
                    "AGENT_MCP_AGENT_APPROVALS_WRITE_FILE".to_owned(),
                    "deny".to_owned(),
                ),
                (
                    "AGENT_MCP_AGENT_APPROVALS_TIMEOUT".to_owned(),
                    "30s".to_owned(),
                ),
            ])
            .unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        let approvals = &config.agent.approvals;
        assert_eq!(
            approvals.decide("run_command", Some(&argv("ls"))),
            Approval::Ask
        );
        assert_eq!(approvals.decide("write_file", None), Approval::Deny);
        assert_eq!(approvals.timeout, Duration::from_secs(30));
    }

    #[test]
    fn without_the_section_everything_runs() {
        let none = ApprovalsConfig::default();
        for tool in crate::config::AGENT_TOOL_NAMES {
            assert_eq!(none.decide(tool, Some(&argv("rm -rf x"))), Approval::Allow);
        }
        assert!(!none.asks_anything());
    }
}
