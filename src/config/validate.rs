//! The checks serde cannot make: ranges, non-empty values, URL shapes, consistency between
//! keys. Every error names its key and says what to do.

use std::time::Duration;

use super::{AUDIT_MAX_KEEP, AUDIT_MIN_MAX_BYTES, AgentConfig, Config, ConfigError};

impl Config {
    /// `store.url`, `store.lease` and `store.timeout`, when the backend is PostgreSQL.
    fn validate_postgres(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        if self.store.backend != super::StoreBackend::Postgres {
            if self.store.url.is_some() {
                return invalid(
                    "store.url",
                    "is only used with store.backend: postgres; set store.backend to postgres, \
                     or remove store.url"
                        .into(),
                );
            }
            return Ok(());
        }
        let Some(url) = self.store.url.as_deref() else {
            return invalid(
                "store.url",
                "store.backend is postgres, so store.url must name the database, e.g. \
                 postgres://agent:PASSWORD@127.0.0.1:5432/agent_mcp"
                    .into(),
            );
        };
        let shown = crate::redact::redact_url(url);
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return invalid(
                "store.url",
                format!("\"{shown}\" is not a postgres:// or postgresql:// URL"),
            );
        }
        let parsed = url
            .parse::<tokio_postgres::Config>()
            .map_err(|e| ConfigError::Invalid {
                key: "store.url",
                message: format!("\"{shown}\" is not a usable PostgreSQL URL: {e}"),
            })?;
        if !matches!(
            parsed.get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable | tokio_postgres::config::SslMode::Prefer
        ) {
            return invalid(
                "store.url",
                format!(
                    "\"{shown}\" asks for TLS (sslmode), which agent-mcp does not speak to \
                     PostgreSQL yet; connect over loopback or a private network without sslmode, \
                     or through a TLS tunnel (e.g. stunnel) on localhost"
                ),
            );
        }
        if parsed.get_dbname().is_none() {
            return invalid(
                "store.url",
                format!("\"{shown}\" names no database; end it with /DBNAME"),
            );
        }
        if self.store.lease < Duration::from_secs(3) {
            return invalid(
                "store.lease",
                format!(
                    "must be at least 3s: it is renewed every sixth of it (at most every \
                     second) and its holder stops at five sixths, so a shorter lease would fail \
                     running tasks on a busy database (got {})",
                    humantime::format_duration(self.store.lease)
                ),
            );
        }
        if self.store.timeout < Duration::from_millis(100) || self.store.timeout > self.store.lease
        {
            return invalid(
                "store.timeout",
                format!(
                    "must be between 100ms and store.lease ({}): it bounds every database call, \
                     so a call never outlasts a lease (got {})",
                    humantime::format_duration(self.store.lease),
                    humantime::format_duration(self.store.timeout)
                ),
            );
        }
        Ok(())
    }

    /// Checks values serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        let url = self.ollama.url.as_str();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 8 {
            return invalid(
                "ollama.url",
                format!(
                    "\"{}\" is not an http:// or https:// URL",
                    crate::redact::redact_url(url)
                ),
            );
        }
        if self.ollama.model.trim().is_empty() {
            return invalid("ollama.model", "must name a model, e.g. qwen3:8b".into());
        }
        if let Some(t) = self.ollama.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return invalid(
                "ollama.temperature",
                format!("must be from 0.0 through 2.0, got {t}"),
            );
        }
        if self.ollama.num_ctx == 0 {
            return invalid("ollama.num_ctx", "must be greater than 0".into());
        }
        if self.ollama.request_timeout.is_zero() {
            return invalid("ollama.request_timeout", "must be greater than 0".into());
        }
        if self.ollama.connect_timeout.is_zero() {
            return invalid("ollama.connect_timeout", "must be greater than 0".into());
        }
        if self.ollama.max_reply_bytes.as_u64() == 0 {
            return invalid("ollama.max_reply_bytes", "must be greater than 0".into());
        }
        if self.ollama.retries > 10 {
            return invalid("ollama.retries", "must be from 0 through 10".into());
        }
        if self.store.retention < Duration::from_secs(60) {
            return invalid(
                "store.retention",
                format!(
                    "must be at least 1m, so clients can still read a finished task's result \
                     (got {}); e.g. 1h or 7d",
                    humantime::format_duration(self.store.retention)
                ),
            );
        }
        self.validate_postgres()?;
        if self.http.header_timeout.is_zero() || self.http.body_timeout.is_zero() {
            return invalid(
                "http",
                "header_timeout and body_timeout must be greater than 0".into(),
            );
        }
        let images = &self.mcp.images;
        if images.max_bytes.as_u64() == 0 {
            return invalid("mcp.images.max_bytes", "must be greater than 0".into());
        }
        if images.max_total_bytes < images.max_bytes {
            return invalid(
                "mcp.images.max_total_bytes",
                format!(
                    "must be at least mcp.images.max_bytes ({})",
                    images.max_bytes.display().iec()
                ),
            );
        }
        if let Some(cap) = self.http.max_body_bytes
            && cap.as_u64() < 1024
        {
            return invalid(
                "http.max_body_bytes",
                "must be at least 1 KiB to carry any request".into(),
            );
        }
        self.validate_http()?;
        for (i, token) in self.auth.tokens.iter().enumerate() {
            if token.name.trim().is_empty() {
                return invalid("auth.tokens", format!("entry {i} has an empty name"));
            }
            if token.name.contains(':') {
                return invalid(
                    "auth.tokens",
                    format!(
                        "entry {i} is named \"{}\", with a ':'; names with ':' are kept for \
                         OAuth callers (oauth:<issuer>#<subject>), so a token so named could \
                         stand for one of them; give the token a name without ':'",
                        token.name
                    ),
                );
            }
            if token
                .name
                .eq_ignore_ascii_case(crate::protocol::STDIO_IDENTITY)
            {
                return invalid(
                    "auth.tokens",
                    format!(
                        "entry {i} is named \"{}\", the identity of the local stdio client: its \
                         holder would read and continue the stdio client's tasks and sessions; \
                         give the token another name",
                        token.name
                    ),
                );
            }
            if let Some(first) = self.auth.tokens[..i]
                .iter()
                .position(|t| t.name == token.name)
            {
                return invalid(
                    "auth.tokens",
                    format!(
                        "entries {first} and {i} are both named \"{}\"; a name is one caller \
                         identity, so give each token a name of its own",
                        token.name
                    ),
                );
            }
            if !is_sha256_hex(&token.sha256) {
                return invalid(
                    "auth.tokens",
                    format!(
                        "entry {i} ({}): sha256 must be 64 lowercase hex digits; \
                         print it with `agent-mcp hash-token`",
                        token.name
                    ),
                );
            }
            if let Some(first) = self.auth.tokens[..i]
                .iter()
                .position(|t| t.sha256.eq_ignore_ascii_case(&token.sha256))
            {
                return invalid(
                    "auth.tokens",
                    format!(
                        "entries {first} and {i} ({}) have the same sha256, so one token would \
                         stand for two callers; give each caller its own token",
                        token.name
                    ),
                );
            }
        }
        self.auth.oauth.validate()?;
        if self.auth.oauth.is_enabled()
            && self.auth.oauth.resource.is_none()
            && self.http.bind.ip().is_unspecified()
        {
            return invalid(
                "auth.oauth.resource",
                format!(
                    "must be set when http.bind is {} (every address): tokens name the URL \
                     clients reach this server at, which the bind address does not say; write \
                     e.g. https://mcp.example.com/mcp",
                    self.http.bind
                ),
            );
        }
        self.telemetry.validate()?;
        self.agent.validate()?;
        if self.rate_limit.enabled {
            if self.rate_limit.per_minute == 0 {
                return invalid(
                    "rate_limit.per_minute",
                    "must be greater than 0 (set rate_limit.enabled: false to turn limits off)"
                        .into(),
                );
            }
            if self.rate_limit.burst == 0 {
                return invalid("rate_limit.burst", "must be greater than 0".into());
            }
            if self.rate_limit.reads.per_minute == 0 {
                return invalid(
                    "rate_limit.reads.per_minute",
                    "must be greater than 0 (set rate_limit.enabled: false to turn limits off)"
                        .into(),
                );
            }
            if self.rate_limit.reads.burst == 0 {
                return invalid("rate_limit.reads.burst", "must be greater than 0".into());
            }
        }
        self.validate_audit()
    }

    fn validate_audit(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        let audit = &self.audit;
        if !(1..=AUDIT_MAX_KEEP).contains(&audit.keep) {
            return invalid(
                "audit.keep",
                format!(
                    "must be from 1 through {AUDIT_MAX_KEEP} (rotated files kept), got {}",
                    audit.keep
                ),
            );
        }
        let Some(max) = audit.max_bytes else {
            return Ok(());
        };
        if max.as_u64() < AUDIT_MIN_MAX_BYTES {
            return invalid(
                "audit.max_bytes",
                format!(
                    "must be at least 64 KiB, got {} bytes; e.g. 100 MiB, or null to rotate \
                     only on SIGHUP",
                    max.as_u64()
                ),
            );
        }
        Ok(())
    }

    /// The `http` caps and the `mcp` limits on what callers may queue.
    fn validate_http(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        if self.http.max_connections == 0 {
            return invalid("http.max_connections", "must be at least 1".into());
        }
        let body = self.http.body_limit(&self.mcp.images);
        if self.http.buffered_limit() < body {
            return invalid(
                "http.max_buffered_bytes",
                format!(
                    "must be at least the body cap (http.max_body_bytes, {body} bytes), or a \
                     request of that size could never be read; raise it or lower the body cap"
                ),
            );
        }
        if let Some(hash) = &self.http.metrics_token_sha256
            && !is_sha256_hex(hash)
        {
            return invalid(
                "http.metrics_token_sha256",
                "must be 64 lowercase hex digits; print it with `agent-mcp hash-token`".into(),
            );
        }
        if self.mcp.max_request_bytes.as_u64() == 0 {
            return invalid("mcp.max_request_bytes", "must be greater than 0".into());
        }
        if self.mcp.max_queued_tasks == 0 || self.mcp.max_queued_per_caller == 0 {
            return invalid(
                "mcp",
                "max_queued_tasks and max_queued_per_caller must be at least 1".into(),
            );
        }
        Ok(())
    }

    /// Why serving HTTP on `http.bind` is unsafe as configured, if it is: a non-loopback
    /// address without `auth.tokens` (and without `http.allow_unauthenticated_remote`) lets
    /// anyone who reaches the port run the agent; the Host check stops browsers, not a script
    /// that sends `Host: 127.0.0.1`. `agent-mcp serve` refuses to start then, and
    /// `check-config` warns.
    pub fn unsafe_bind(&self) -> Option<String> {
        let bind = self.http.bind;
        if bind.ip().is_loopback()
            || !self.auth.tokens.is_empty()
            || self.auth.oauth.is_enabled()
            || self.http.allow_unauthenticated_remote
        {
            return None;
        }
        Some(format!(
            "http.bind {bind} is not a loopback address and neither auth.tokens nor auth.oauth is \
             set: anyone who can reach the port could run the agent on this machine. Add \
             auth.tokens (see `agent-mcp hash-token`) or auth.oauth, bind 127.0.0.1, or set \
             http.allow_unauthenticated_remote: true if a proxy in front authenticates every \
             request"
        ))
    }
}

/// 64 lowercase hex digits.
fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl AgentConfig {
    /// Checks the `agent` section.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        if !(1..=64).contains(&self.max_steps) {
            return invalid("agent.max_steps", "must be from 1 through 64".into());
        }
        if !(1..=16).contains(&self.step_concurrency) {
            return invalid("agent.step_concurrency", "must be from 1 through 16".into());
        }
        if self.max_iterations == 0 {
            return invalid("agent.max_iterations", "must be greater than 0".into());
        }
        if self.check_rounds > 10 {
            return invalid("agent.check_rounds", "must be from 0 through 10".into());
        }
        for (i, check) in self.checks.iter().enumerate() {
            match check.first() {
                Some(program) if !program.is_empty() && !program.contains(['/', '\\']) => {}
                _ => {
                    return invalid(
                        "agent.checks",
                        format!(
                            "entry {i} must be a command as a list that starts with a bare \
                             program name found on PATH, e.g. [python3, -m, unittest]"
                        ),
                    );
                }
            }
        }
        for name in &self.tools.disabled {
            if !super::AGENT_TOOL_NAMES.contains(&name.as_str()) {
                return invalid(
                    "agent.tools.disabled",
                    format!(
                        "unknown tool '{name}'; tools are {}",
                        super::AGENT_TOOL_NAMES.join(", ")
                    ),
                );
            }
        }
        for path in &self.tools.read_only_paths {
            let p = std::path::Path::new(path);
            let plain = p
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if path.trim().is_empty() || !plain {
                return invalid(
                    "agent.tools.read_only_paths",
                    format!(
                        "'{path}' must be a name (such as .git) or a path inside the workspace \
                         without `..`, `.` or a leading `/`"
                    ),
                );
            }
        }
        if self.tools.max_read_bytes.as_u64() == 0 || self.tools.max_output_bytes.as_u64() == 0 {
            return invalid(
                "agent.tools",
                "max_read_bytes and max_output_bytes must be greater than 0".into(),
            );
        }
        for program in &self.commands.allow {
            if program.is_empty() || program.contains(['/', '\\']) {
                return invalid(
                    "agent.commands.allow",
                    format!("'{program}' must be a bare program name found on PATH, e.g. cargo"),
                );
            }
        }
        if let Some(path) = self.commands.read_paths.iter().find(|p| !p.is_absolute()) {
            return invalid(
                "agent.commands.read_paths",
                format!(
                    "'{}' must be an absolute path, e.g. /opt/toolchains",
                    path.display()
                ),
            );
        }
        if self.commands.timeout.is_zero() {
            return invalid("agent.commands.timeout", "must be greater than 0".into());
        }
        let limits = &self.commands.limits;
        if limits.cpu_time.is_some_and(|t| t.as_secs() == 0)
            || limits
                .address_space
                .is_some_and(|b| b.as_u64() < 1024 * 1024)
            || limits.processes == Some(0)
            || limits.file_size.is_some_and(|b| b.as_u64() == 0)
        {
            return invalid(
                "agent.commands.limits",
                "cpu_time must be at least 1s, address_space at least 1 MiB, processes and \
                 file_size greater than 0; use null for no limit"
                    .into(),
            );
        }
        if self.commands.max_output_bytes.as_u64() == 0 {
            return invalid(
                "agent.commands.max_output_bytes",
                "must be greater than 0".into(),
            );
        }
        if let Err((key, message)) = self.approvals.validate(&self.commands.allow) {
            return invalid(key, message);
        }
        Ok(())
    }
}
