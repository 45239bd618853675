//! A layer of your own, in a crate of its own: only the callers listed in a file may start
//! tasks (`tools/call agent_run`); everything else passes.
//!
//! It runs after auth, so `req.ctx.identity` is the caller's name, and it does I/O (it reads
//! the list on every `agent_run`, so an edit takes effect at once), so it is an
//! [`AsyncCheck`]: a few lines, no `Service` to write. Insert it with
//! `server.stack_builder().after_auth(AllowlistLayer::new(Allowlist::at(path)))`.

use std::path::PathBuf;

use agent_mcp_plugin::{AGENT_RUN, AsyncCheck, AsyncGateLayer, McpRequest, McpResponse, McpResult};

/// The file of callers who may start tasks: one name a line.
#[derive(Clone, Debug)]
pub struct Allowlist {
    path: PathBuf,
}

impl Allowlist {
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Whether `caller` is listed; a file that cannot be read lists no one.
    async fn lists(&self, caller: &str) -> Result<bool, String> {
        let text = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(|e| format!("cannot read the allowlist {}: {e}", self.path.display()))?;
        Ok(text.lines().any(|line| line.trim() == caller))
    }
}

/// `AllowlistLayer::new(Allowlist::at(path))`.
pub type AllowlistLayer = AsyncGateLayer<Allowlist>;

impl AsyncCheck for Allowlist {
    async fn check(&self, req: McpRequest) -> Result<McpRequest, McpResponse> {
        if req.tool_name() != Some(AGENT_RUN) {
            return Ok(req);
        }
        let caller = req.ctx.identity.clone().unwrap_or_default();
        let refusal = match self.lists(&caller).await {
            Ok(true) => return Ok(req),
            Ok(false) => format!(
                "caller '{caller}' may not start tasks here: add the name to {} (one a line)",
                self.path.display()
            ),
            Err(why) => format!("{why}; ask the operator to restore it"),
        };
        Err(req.result(McpResult::tool_text(refusal, true)))
    }
}
