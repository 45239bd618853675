//! Helpers shared by the integration tests.

pub mod background;
pub mod calls;
pub mod fake_ollama;
/// Reading files back (names, modes, audit lines), as the audit sink's own tests do.
#[cfg(unix)]
#[path = "../../layers/audit/test_files.rs"]
pub mod files;
pub mod harness;
pub mod instances;
pub mod oauth_provider;
pub mod otlp_receiver;
pub mod pg;
pub mod proxy;
pub mod served;
/// The fields of a created task, as the tasks layer's own tests check them.
#[path = "../../layers/tasks/test_fields.rs"]
pub mod task_fields;
pub mod webdriver;
