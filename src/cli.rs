//! The `agent-mcp` command line, as the `agent-mcp` binary runs it: `serve` (HTTP, and the
//! oversight page at `/`), `stdio`, `check-config`, `hash-token`, and the terminal client
//! `run` / `status` / `diff` / `undo`.
//!
//! [`main`] is the whole of it: it parses the process's arguments, loads the configuration,
//! sets up logging and OpenTelemetry export, and serves. A program of your own serves through
//! [`AgentMcp`] instead; this is here so the binary is one call into the
//! library and the parts it wires (the log writer, telemetry, the terminal client) stay the
//! crate's own.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::AgentMcp;
use crate::config::Config;
use crate::telemetry::spans::{self, Network};
use crate::telemetry::{Telemetry, subscriber};
use clap::{Parser, Subcommand};
use tracing::{Instrument, error, info};

#[derive(Parser)]
#[command(
    name = "agent-mcp",
    version,
    about = "An MCP server that hands natural-language work requests to a local Ollama-backed agent"
)]
struct Cli {
    /// Log line format on stderr: `text` for people, `json` (one object per line) for machines.
    /// Filter with RUST_LOG (default: info).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stateless Streamable HTTP at POST /mcp, and the oversight page at /.
    Serve {
        /// The agent.yaml to use (default: ./agent.yaml if present, else built-in defaults).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Listen address, overriding http.bind (default 127.0.0.1:8080).
        #[arg(long)]
        bind: Option<SocketAddr>,
    },
    /// Serve MCP over stdin/stdout (one JSON message per line; logs go to stderr).
    Stdio {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Check the configuration and print it as it will be used, each value with where it came
    /// from (default, file, AGENT_MCP_* or OLLAMA_HOST); warn about the server's own files
    /// inside the agent's workspace.
    CheckConfig {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Read a bearer token from stdin and print its SHA-256 for auth.tokens[].sha256.
    HashToken,
    #[command(flatten)]
    Client(crate::client::ClientCommand),
}

/// Runs the `agent-mcp` command with the process's arguments (`agent-mcp --help` lists them)
/// and returns its exit status: 0 on success, 2 for a configuration that cannot be used, 1 for
/// any other failure. It installs the global log subscriber and blocks until the command ends.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::HashToken = cli.command {
        return hash_token();
    }
    // The terminal client (`run`, `status`) loads no server configuration and logs nothing.
    if let Command::Client(command) = cli.command {
        return crate::client::main(command);
    }
    let config_path = match &cli.command {
        Command::Serve { config, .. }
        | Command::Stdio { config }
        | Command::CheckConfig { config } => config.clone(),
        Command::HashToken | Command::Client(_) => None,
    };
    // The configuration comes before the logs: it says whether spans are also exported. Its
    // errors go to stderr directly, its warnings to the log once it is up.
    let loaded = match Config::load_traced(config_path.as_deref(), std::env::vars()) {
        Ok(loaded) => loaded,
        Err(e) => {
            report(&format!("configuration error: {e}"));
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            report(&format!("cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    // check-config only prints; it exports nothing.
    let (telemetry, telemetry_error) = match &cli.command {
        Command::CheckConfig { .. } => (None, None),
        _ => match Telemetry::start(
            &loaded.config.telemetry.settings(),
            runtime.handle().clone(),
        ) {
            Ok(telemetry) => (telemetry, None),
            Err(e) => (None, Some(e)),
        },
    };
    // Held until the process ends: dropping it writes out the log lines still queued.
    let _log = init_logging(cli.log_format, telemetry.as_ref());
    if let Some(e) = telemetry_error {
        // Telemetry is the operators' view, not the service: serve without it.
        tracing::warn!("OpenTelemetry export is off: {e}");
    }
    if let Some(telemetry) = &telemetry {
        info!(
            traces = telemetry.traces_endpoint(),
            metrics = telemetry.metrics_endpoint().unwrap_or("off"),
            "exporting OpenTelemetry spans over OTLP/HTTP"
        );
    }
    for name in &loaded.unknown_env {
        tracing::warn!(
            "environment variable {name} names no configuration key; it is ignored \
             (see `agent-mcp check-config` for the keys)"
        );
    }
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    let (mut config, sources) = (loaded.config, loaded.sources);
    let config_file = sources.file().map(std::path::Path::to_path_buf);
    for warning in config.overlap_warnings(config_file.as_deref()) {
        tracing::warn!("{warning}");
    }
    if matches!(cli.command, Command::Serve { .. } | Command::Stdio { .. }) {
        audit_off_the_terminal(&mut config);
    }
    let result = match cli.command {
        Command::CheckConfig { .. } => return check_config(&config, &sources, &runtime),
        Command::Serve { bind, .. } => {
            if let Some(bind) = bind {
                config.http.bind = bind;
                // Checks that depend on the bind (auth.oauth.resource) see the one in force.
                if let Err(e) = config.validate() {
                    report(&format!("configuration error: {e}"));
                    return ExitCode::from(2);
                }
            }
            if let Some(why) = config.unsafe_bind() {
                report(&format!("refusing to start: {why}"));
                return ExitCode::from(2);
            }
            runtime.block_on(serve_http(config, config_file, telemetry.as_ref()))
        }
        Command::Stdio { .. } => runtime.block_on(serve_stdio(config, config_file)),
        Command::HashToken => return hash_token(),
        Command::Client(command) => return crate::client::main(command),
    };
    // The last spans are sent on the runtime, so before it stops; a collector that does not
    // answer holds the exit at most this long.
    if let Some(telemetry) = telemetry
        && let Err(e) = telemetry.shutdown(TELEMETRY_SHUTDOWN_BOUND)
    {
        tracing::warn!("{e}");
    }
    // Dropping the runtime would wait for every blocking thread, one stuck in the kernel
    // included (a tool on a hung file system): give them a moment, then leave them.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_GRACE);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e}");
            report(&e.to_string());
            ExitCode::FAILURE
        }
    }
}

/// With `audit.file` unset, audit lines go to stderr, unless stderr is a terminal: then to
/// [`Config::terminal_audit_path`], said once on the log. A terminal drawing a line per request
/// cost more CPU than the server answering it and halved what `agent-mcp serve` answered on a
/// 2-core machine (benches/README.md, issue 54); a file keeps the same lines, rotated.
fn audit_off_the_terminal(config: &mut Config) {
    if !config.audit.enabled
        || config.audit.file.is_some()
        || !std::io::IsTerminal::is_terminal(&std::io::stderr())
    {
        return;
    }
    match config.terminal_audit_path() {
        Some(path) => {
            info!(
                "audit lines go to {} (stderr is a terminal; set audit.file to choose, \
                 e.g. /dev/stderr with audit.max_bytes: null to see them here)",
                path.display()
            );
            config.audit.file = Some(path);
        }
        None => tracing::warn!(
            "audit lines go to this terminal: no state directory (HOME, XDG_STATE_HOME) for \
             a file of them; set audit.file"
        ),
    }
}

/// `agent-mcp check-config`: the configuration in force, then what would keep `serve` from
/// starting or commands from being isolated. Exit 2 when the configuration is unsafe to serve.
fn check_config(
    config: &Config,
    sources: &crate::config::Sources,
    runtime: &tokio::runtime::Runtime,
) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(config.annotated_yaml(sources).as_bytes());
    // What the model gets (steering, num_ctx, think), asked from Ollama now.
    let model = runtime.block_on(crate::agent::probe_model(config));
    let _ = writeln!(out, "# {model}");
    let _ = out.flush();
    match crate::agent::tools::sandbox::describe(config.agent.commands.enabled) {
        Ok(how) => report(&format!("run_command: {how}")),
        Err(why) => report(&format!("warning: run_command: {why}")),
    }
    if config.agent.commands.enabled != crate::config::CommandsSwitch::Off {
        match crate::agent::tools::describe_network_isolation(config.agent.commands.network) {
            Ok(how) => report(&format!("run_command: {how}")),
            Err(why) => report(&format!("warning: run_command: {why}")),
        }
    }
    match config.unsafe_bind() {
        Some(why) => {
            report(&format!(
                "warning: `agent-mcp serve` would refuse to start: {why}"
            ));
            ExitCode::from(2)
        }
        None => ExitCode::SUCCESS,
    }
}

/// One line on stderr that never fails the process: a closed or unread stderr costs the line,
/// not a panic (as `eprintln!` would).
fn report(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "agent-mcp: {message}");
}

/// `agent-mcp hash-token`: the token is read from stdin (one trailing newline dropped) so it
/// never appears in the shell history or the process list.
fn hash_token() -> ExitCode {
    let mut token = String::new();
    if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut token) {
        report(&format!("cannot read the token from stdin: {e}"));
        return ExitCode::from(2);
    }
    let token = token
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&token);
    if token.is_empty() {
        report("no token on stdin; try: printf %s \"$TOKEN\" | agent-mcp hash-token");
        return ExitCode::from(2);
    }
    let _ = writeln!(
        std::io::stdout(),
        "{}",
        crate::layers::auth::sha256_hex(token)
    );
    ExitCode::SUCCESS
}

/// Logs go to stderr through a bounded queue ([`crate::logging`]): a host that does not
/// read stderr, or closed it, loses log lines (counted), never a task or a request. Spans are
/// exported too when `telemetry` runs ([`crate::telemetry::subscriber`]).
fn init_logging(format: LogFormat, telemetry: Option<&Telemetry>) -> crate::logging::LogGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = crate::logging::LogWriter::stderr();
    let format = match format {
        LogFormat::Text => subscriber::LogFormat::Text,
        LogFormat::Json => subscriber::LogFormat::Json,
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let writer = tracing_subscriber::fmt::writer::BoxMakeWriter::new(writer);
    let dispatch = subscriber::dispatch(format, ansi, filter, telemetry, writer);
    if let Err(e) = tracing::dispatcher::set_global_default(dispatch) {
        report(&format!("cannot install the log output: {e}"));
    }
    guard
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn serve_stdio(config: Config, config_file: Option<PathBuf>) -> Result<(), BoxError> {
    log_descriptor_limit(crate::transport::server::raise_descriptor_limit());
    let server = AgentMcp::start_protecting(&config, config_file.into_iter().collect())
        .instrument(spans::startup_span(Network::Stdio))
        .await?;
    reopen_audit_on_sighup(&server);
    info!(ollama = %crate::redact::redact_url(&config.ollama.url), model = %config.ollama.model, "serving MCP on stdio");
    // Ends on stdin EOF (after answering every request in flight) or on SIGINT/SIGTERM.
    tokio::select! {
        served = crate::transport::stdio::serve_with(
            server.stack(),
            tokio::io::stdin(),
            tokio::io::stdout(),
            crate::transport::stdio::StdioOptions {
                asker: Some(server.stdio_asker()),
                ..Default::default()
            },
        ) => served?,
        () = shutdown_signal() => {}
    }
    server.shutdown().await;
    Ok(())
}

async fn serve_http(
    mut config: Config,
    config_file: Option<PathBuf>,
    telemetry: Option<&Telemetry>,
) -> Result<(), BoxError> {
    use crate::transport::server::{ServerOptions, raise_descriptor_limit, serve_with_options};
    // Before anything opens files: the connection cap is fitted below the raised limit.
    let descriptors = raise_descriptor_limit();
    let listener = tokio::net::TcpListener::bind(config.http.bind)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.http.bind))?;
    let addr = listener.local_addr()?;
    // auth.oauth.resource unset: this server's URL as its listener says (a bind to every
    // address is refused when the configuration is checked).
    if config.auth.oauth.is_enabled() && config.auth.oauth.resource.is_none() {
        config.auth.oauth.resource = Some(format!("http://{addr}/mcp"));
    }
    let server = AgentMcp::start_protecting(&config, config_file.into_iter().collect())
        .instrument(spans::startup_span(Network::Http { peer: None }))
        .await?;
    reopen_audit_on_sighup(&server);
    let options = ServerOptions::from_config(&config.http);
    info!(
        %addr,
        ollama = %crate::redact::redact_url(&config.ollama.url),
        model = %config.ollama.model,
        max_connections = options.max_connections,
        max_body_bytes = config.http.body_limit(&config.mcp.images),
        max_buffered_bytes = config.http.buffered_limit(),
        file_descriptors = %describe_descriptors(descriptors),
        auth = describe_auth(&config),
        "serving MCP at http://{addr}/mcp"
    );
    let metrics = crate::metrics::install()
        .inspect_err(|e| tracing::warn!("{e}"))
        .ok();
    if let (Some(_), Some(telemetry)) = (&metrics, telemetry) {
        telemetry.register_metrics();
    }
    serve_with_options(
        listener,
        server.http_service(),
        Some(std::sync::Arc::new(server.ops_endpoints(metrics))),
        options,
        async {
            shutdown_signal().await;
            // Open push streams end now, so draining does not wait for their tasks.
            server.end_streams();
        },
    )
    .await?;
    server.shutdown().await;
    Ok(())
}

/// How HTTP callers authenticate, for the start-up line (no secret in it).
fn describe_auth(config: &Config) -> String {
    let oauth = &config.auth.oauth;
    match (&oauth.issuer, config.auth.tokens.is_empty()) {
        (None, true) => "none (anonymous callers)".to_owned(),
        (None, false) => "bearer tokens, checked before the body is read".to_owned(),
        (Some(issuer), statics) => format!(
            "OAuth access tokens of {issuer} for {}{}, checked before the body is read",
            oauth.resource.as_deref().unwrap_or("?"),
            if statics {
                ""
            } else {
                ", and static bearer tokens"
            }
        ),
    }
}

/// The soft descriptor limit as the start-up line states it.
fn describe_descriptors(limit: crate::transport::server::DescriptorLimit) -> String {
    let shown = |n: Option<u64>| n.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    if limit.was == limit.now {
        format!("soft limit {}", shown(limit.now))
    } else {
        format!(
            "soft limit raised from {} to the hard limit {}",
            shown(limit.was),
            shown(limit.now)
        )
    }
}

fn log_descriptor_limit(limit: crate::transport::server::DescriptorLimit) {
    info!("file descriptors: {}", describe_descriptors(limit));
}

/// SIGHUP reopens `audit.file` (what logrotate's `postrotate` sends) instead of ending the
/// process. Lines written until the reopen go to the renamed file.
fn reopen_audit_on_sighup(server: &AgentMcp) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let sink = server.audit_sink().cloned();
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot listen for SIGHUP ({e}); audit.file cannot be reopened");
                return;
            }
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match &sink {
                    Some(sink) => {
                        info!(target: "agent_mcp::audit", "SIGHUP: reopening the audit log");
                        sink.reopen();
                    }
                    None => info!("SIGHUP: audit is off, nothing to reopen"),
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = server;
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    info!("shutting down");
    // The promise (docs/operations.md): stopped within 30 s of the signal, whatever is stuck.
    std::thread::spawn(|| {
        std::thread::sleep(SHUTDOWN_BOUND);
        report(&format!(
            "shutdown did not finish within {}s; exiting now",
            SHUTDOWN_BOUND.as_secs()
        ));
        std::process::exit(1);
    });
}

/// Longest time from SIGINT/SIGTERM to the process's exit (docs/operations.md: at most 30 s).
const SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(29);

/// How long the exit waits for the last OpenTelemetry export (docs/operations.md: within the 30 s).
const TELEMETRY_SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(3);

/// How long the runtime waits for blocking threads at exit.
const RUNTIME_SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);
