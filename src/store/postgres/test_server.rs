//! The PostgreSQL server of the tests: `AGENT_MCP_TEST_PG_URL`, set by `scripts/postgres.sh`.
//! Without it a test is skipped with a loud note, except under CI (`CI` set), where it fails.
//!
//! One file for the store's unit tests (`#[cfg(test)]` here) and the integration tests
//! (`tests/support/pg.rs` includes it by path), so both skip and fail alike.

use tokio_postgres::NoTls;

/// The server the tests use, or `None` (with the SKIPPED note) when there is none.
pub fn server_url() -> Option<String> {
    match std::env::var("AGENT_MCP_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "AGENT_MCP_TEST_PG_URL is not set, and CI must run the PostgreSQL tests: run them \
             as `bash scripts/postgres.sh cargo test --locked`"
        ),
        _ => {
            eprintln!(
                "SKIPPED: no PostgreSQL for this test (AGENT_MCP_TEST_PG_URL is not set); run \
                 `bash scripts/postgres.sh cargo test --locked` to include it"
            );
            None
        }
    }
}

/// A new empty database on the test server: its URL.
pub async fn fresh_database() -> Option<String> {
    let url = server_url()?;
    let client = connect(&url).await;
    let name = format!("agent_mcp_test_{}", uuid::Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a test database");
    let base = url.split('?').next().unwrap_or(&url);
    let (server, _) = base.rsplit_once('/').expect("the URL names a database");
    Some(format!("{server}/{name}"))
}

/// A plain connection, for looking at what the servers wrote.
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(conn);
    client
}
