//! What the targets share: one runtime for the whole run, and what they share with the
//! property tests (`tests/support/surfaces.rs`).

// Each target uses a part.
#![allow(dead_code)]

use std::sync::OnceLock;

#[path = "../../../tests/support/surfaces.rs"]
pub mod surfaces;

/// A current-thread runtime, built once (the layers need no I/O driver).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}
