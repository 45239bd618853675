//! Helpers shared by the integration tests.

pub mod fake_ollama;
pub mod harness;
pub mod oauth_provider;
pub mod otlp_receiver;
pub mod pg;
