//! Helpers shared by the integration tests.

pub mod background;
pub mod fake_ollama;
pub mod harness;
pub mod instances;
pub mod oauth_provider;
pub mod otlp_receiver;
pub mod pg;
pub mod proxy;
