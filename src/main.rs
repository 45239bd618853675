//! The `agent-mcp` command: `serve` (HTTP), `stdio`, `check-config`, `hash-token`, and the
//! terminal client `run` / `status`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use agent_mcp::AgentMcp;
use agent_mcp::config::Config;
use agent_mcp::telemetry::spans::{self, Network};
use agent_mcp::telemetry::{Telemetry, logging};
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
    /// Serve MCP over stateless Streamable HTTP at POST /mcp.
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
    Client(agent_mcp::client::ClientCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::HashToken = cli.command {
        return hash_token();
    }
    // The terminal client (`run`, `status`) loads no server configuration and logs nothing.
    if let Command::Client(command) = cli.command {
        return agent_mcp::client::main(command);
    }
    let config_path = match &cli.command {
        Command::Serve { config, .. }
        | Command::Stdio { config }
        | Command::CheckConfig { config } => config.clone(),
        Command::HashToken | Command::Client(_) => None,
    };
    // The configuration comes before the logs: it says whether they are also exported. Its
    // errors go to stderr directly, its warnings to the log once it is up.
    let loaded = match Config::load_traced(config_path.as_deref(), std::env::vars()) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("agent-mcp: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agent-mcp: cannot start the async runtime: {e}");
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
    init_logging(cli.log_format, telemetry.as_ref());
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
    let result = match cli.command {
        Command::CheckConfig { .. } => {
            print!("{}", config.annotated_yaml(&sources));
            return ExitCode::SUCCESS;
        }
        Command::Serve { bind, .. } => {
            if let Some(bind) = bind {
                config.http.bind = bind;
            }
            runtime.block_on(serve_http(config, config_file, telemetry.as_ref()))
        }
        Command::Stdio { .. } => runtime.block_on(serve_stdio(config, config_file)),
        Command::HashToken => return hash_token(),
        Command::Client(command) => return agent_mcp::client::main(command),
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
            eprintln!("agent-mcp: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `agent-mcp hash-token`: the token is read from stdin (one trailing newline dropped) so it
/// never appears in the shell history or the process list.
fn hash_token() -> ExitCode {
    let mut token = String::new();
    if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut token) {
        eprintln!("agent-mcp: cannot read the token from stdin: {e}");
        return ExitCode::from(2);
    }
    let token = token
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&token);
    if token.is_empty() {
        eprintln!("agent-mcp: no token on stdin; try: printf %s \"$TOKEN\" | agent-mcp hash-token");
        return ExitCode::from(2);
    }
    println!("{}", agent_mcp::layers::auth::sha256_hex(token));
    ExitCode::SUCCESS
}

/// Log lines on stderr, filtered by RUST_LOG; spans exported too when `telemetry` runs.
fn init_logging(format: LogFormat, telemetry: Option<&Telemetry>) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let format = match format {
        LogFormat::Text => logging::LogFormat::Text,
        LogFormat::Json => logging::LogFormat::Json,
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let dispatch = logging::dispatch(format, ansi, filter, telemetry);
    if let Err(e) = tracing::dispatcher::set_global_default(dispatch) {
        eprintln!("agent-mcp: cannot install the log output: {e}");
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn serve_stdio(config: Config, config_file: Option<PathBuf>) -> Result<(), BoxError> {
    let server = AgentMcp::start_protecting(&config, config_file.into_iter().collect())
        .instrument(spans::startup_span(Network::Stdio))
        .await?;
    reopen_audit_on_sighup(&server);
    info!(ollama = %config.ollama.url, model = %config.ollama.model, "serving MCP on stdio");
    // Ends on stdin EOF (after answering every request in flight) or on SIGINT/SIGTERM.
    tokio::select! {
        served = agent_mcp::transport::stdio::serve(
            server.stack(),
            tokio::io::stdin(),
            tokio::io::stdout(),
        ) => served?,
        () = shutdown_signal() => {}
    }
    server.shutdown().await;
    Ok(())
}

async fn serve_http(
    config: Config,
    config_file: Option<PathBuf>,
    telemetry: Option<&Telemetry>,
) -> Result<(), BoxError> {
    let listener = tokio::net::TcpListener::bind(config.http.bind)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.http.bind))?;
    let server = AgentMcp::start_protecting(&config, config_file.into_iter().collect())
        .instrument(spans::startup_span(Network::Http { peer: None }))
        .await?;
    reopen_audit_on_sighup(&server);
    let addr = listener.local_addr()?;
    info!(%addr, ollama = %config.ollama.url, model = %config.ollama.model, "serving MCP at http://{addr}/mcp");
    let metrics = agent_mcp::metrics::install()
        .inspect_err(|e| tracing::warn!("{e}"))
        .ok();
    if let (Some(_), Some(telemetry)) = (&metrics, telemetry) {
        telemetry.register_metrics();
    }
    agent_mcp::transport::server::serve_with_timeouts(
        listener,
        server.http_service(),
        Some(server.ops_endpoints(metrics)),
        agent_mcp::transport::server::ServerTimeouts::from_config(&config.http),
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
    // The promise (README): stopped within 30 s of the signal, whatever is stuck.
    std::thread::spawn(|| {
        std::thread::sleep(SHUTDOWN_BOUND);
        eprintln!(
            "agent-mcp: shutdown did not finish within {}s; exiting now",
            SHUTDOWN_BOUND.as_secs()
        );
        std::process::exit(1);
    });
}

/// Longest time from SIGINT/SIGTERM to the process's exit (README: at most 30 s).
const SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(29);

/// How long the exit waits for the last OpenTelemetry export (README: within the 30 s).
const TELEMETRY_SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(3);

/// How long the runtime waits for blocking threads at exit.
const RUNTIME_SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);
