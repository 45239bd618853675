//! [`ScopePolicy`]: which OAuth scope allows which operation.
//!
//! An *operation* is what one request asks for: the tool's name for `tools/call`
//! (`agent_run`, `agent_status`), the method's name for anything else (`tasks/cancel`,
//! `tasks/get`). The policy is written scope by scope, as "what this scope allows"; an
//! operation listed under several scopes is allowed by any of them, which is how a broader
//! scope includes a narrower one (`agent:run` may list the reads `agent:status` lists). An
//! operation that no scope lists needs a valid token and nothing more (`tools/list`,
//! `server/discover`, `ping`).
//!
//! When a token lacks every scope that allows an operation, the scope to ask for is the
//! narrowest of them: the one that allows the fewest operations (by name when two tie), so
//! that a client stepping up asks for no more than the request needs.
//!
//! ```
//! use std::collections::BTreeSet;
//! use agent_mcp::oauth::ScopePolicy;
//!
//! let policy = ScopePolicy::default()
//!     .grant("agent:status", ["agent_status", "tasks/get"])
//!     .grant("agent:run", ["agent_run", "tasks/cancel", "agent_status", "tasks/get"]);
//! let reader: BTreeSet<String> = ["agent:status".to_owned()].into();
//! assert_eq!(policy.permits(&reader, "agent_status"), Ok(()));
//! assert_eq!(policy.permits(&reader, "agent_run"), Err("agent:run"));
//! assert_eq!(policy.permits(&BTreeSet::new(), "tasks/get"), Err("agent:status"));
//! assert_eq!(policy.permits(&BTreeSet::new(), "tools/list"), Ok(()));
//! assert_eq!(policy.scopes().collect::<Vec<_>>(), ["agent:run", "agent:status"]);
//! ```

use std::collections::{BTreeMap, BTreeSet};

/// A grant [`ScopePolicy::check`] turns down: the scope, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("scope \"{scope}\" {why}")]
pub struct BadScope {
    pub scope: String,
    pub why: &'static str,
}

/// Scope → the operations it allows. Built with [`ScopePolicy::grant`]; checked when the
/// validator is built ([`ScopePolicy::check`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopePolicy {
    grants: BTreeMap<String, BTreeSet<String>>,
}

impl ScopePolicy {
    /// `scope` allows each of `operations` (added to what it allowed already).
    pub fn grant<S: Into<String>>(
        mut self,
        scope: impl Into<String>,
        operations: impl IntoIterator<Item = S>,
    ) -> Self {
        self.grants
            .entry(scope.into())
            .or_default()
            .extend(operations.into_iter().map(Into::into));
        self
    }

    /// Every scope of the policy, in name order: the metadata's `scopes_supported`, and what a
    /// `401` challenge asks for.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.grants.keys().map(String::as_str)
    }

    /// The scope to ask for to be allowed `operation`: `None` when no scope guards it.
    pub fn needed_for(&self, operation: &str) -> Option<&str> {
        self.grants
            .iter()
            .filter(|(_, allowed)| allowed.contains(operation))
            .min_by_key(|(scope, allowed)| (allowed.len(), scope.as_str()))
            .map(|(scope, _)| scope.as_str())
    }

    /// Whether a token holding `granted` may do `operation`; `Err` names the scope to ask for.
    pub fn permits(&self, granted: &BTreeSet<String>, operation: &str) -> Result<(), &str> {
        let Some(needed) = self.needed_for(operation) else {
            return Ok(());
        };
        let allowed = granted.iter().any(|scope| {
            self.grants
                .get(scope)
                .is_some_and(|ops| ops.contains(operation))
        });
        if allowed { Ok(()) } else { Err(needed) }
    }

    /// Every scope name is an RFC 6749 scope token (visible ASCII but `"` and `\`, no space),
    /// so it can be sent in a token request and quoted in a challenge; every operation is
    /// named.
    pub fn check(&self) -> Result<(), BadScope> {
        for (scope, operations) in &self.grants {
            if let Some(why) = scope_token_problem(scope) {
                return Err(BadScope {
                    scope: scope.clone(),
                    why,
                });
            }
            if operations.iter().any(|op| op.trim().is_empty()) {
                return Err(BadScope {
                    scope: scope.clone(),
                    why: "lists an empty operation name",
                });
            }
        }
        Ok(())
    }
}

/// Why `scope` is not an RFC 6749 §3.3 scope token (`%x21 / %x23-5B / %x5D-7E`), if it is not.
pub(crate) fn scope_token_problem(scope: &str) -> Option<&'static str> {
    if scope.is_empty() {
        return Some("is empty");
    }
    let token_char = |c: char| matches!(c, '\x21' | '\x23'..='\x5b' | '\x5d'..='\x7e');
    if scope.chars().all(token_char) {
        None
    } else {
        Some("may hold only visible ASCII characters other than '\"' and '\\', and no space")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ScopePolicy {
        ScopePolicy::default()
            .grant("agent:status", ["agent_status", "tasks/get", "tasks/list"])
            .grant(
                "agent:run",
                ["agent_run", "tasks/cancel", "agent_status", "tasks/get"],
            )
            .grant("admin", ["tasks/list"])
    }

    fn set(scopes: &[&str]) -> BTreeSet<String> {
        scopes.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn any_scope_that_lists_an_operation_allows_it() {
        let p = policy();
        assert_eq!(p.permits(&set(&["agent:run"]), "agent_status"), Ok(()));
        assert_eq!(p.permits(&set(&["agent:status"]), "agent_status"), Ok(()));
        assert_eq!(p.permits(&set(&["admin"]), "tasks/list"), Ok(()));
        assert_eq!(
            p.permits(&set(&["agent:status", "other"]), "tasks/cancel"),
            Err("agent:run")
        );
        // A scope the policy does not know allows nothing.
        assert_eq!(p.permits(&set(&["unknown"]), "agent_run"), Err("agent:run"));
    }

    #[test]
    fn the_scope_asked_for_is_the_narrowest_that_allows_the_operation() {
        let p = policy();
        // agent:status allows 3 operations, agent:run 4.
        assert_eq!(p.needed_for("agent_status"), Some("agent:status"));
        assert_eq!(p.needed_for("agent_run"), Some("agent:run"));
        // admin (1) is narrower than agent:status (3) for tasks/list.
        assert_eq!(p.needed_for("tasks/list"), Some("admin"));
        // A tie goes to the first name.
        let tie = ScopePolicy::default().grant("b", ["x"]).grant("a", ["x"]);
        assert_eq!(tie.needed_for("x"), Some("a"));
    }

    #[test]
    fn unlisted_operations_need_no_scope() {
        let p = policy();
        assert_eq!(p.needed_for("tools/list"), None);
        assert_eq!(p.permits(&BTreeSet::new(), "server/discover"), Ok(()));
        assert_eq!(
            ScopePolicy::default().permits(&BTreeSet::new(), "agent_run"),
            Ok(())
        );
    }

    #[test]
    fn grants_accumulate_and_scopes_are_listed_in_order() {
        let p = ScopePolicy::default()
            .grant("z", ["a"])
            .grant("m", ["b"])
            .grant("z", ["c"]);
        assert_eq!(p.scopes().collect::<Vec<_>>(), ["m", "z"]);
        assert_eq!(p.permits(&set(&["z"]), "c"), Ok(()));
        assert_eq!(p.permits(&set(&["z"]), "a"), Ok(()));
    }

    #[test]
    fn scope_names_must_be_scope_tokens() {
        assert!(policy().check().is_ok());
        for bad in ["", "two words", "quo\"te", "back\\slash", "tab\t", "é"] {
            let err = ScopePolicy::default()
                .grant(bad, ["x"])
                .check()
                .unwrap_err();
            assert!(err.scope == bad, "{bad:?}: {err}");
        }
        let err = ScopePolicy::default()
            .grant("ok", [" "])
            .check()
            .unwrap_err();
        assert!(err.to_string().contains("empty operation"), "{err}");
    }
}
