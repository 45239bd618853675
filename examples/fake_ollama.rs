//! The test suite's fake Ollama as a standalone process, for scripts that run the real server
//! without a model (the conformance run). Prints its URL on stdout, then serves until killed.
//!
//! ```sh
//! cargo run --example fake_ollama   # → http://127.0.0.1:PORT
//! ```

#[path = "../tests/support"]
mod support {
    pub mod fake_ollama;
}

use support::fake_ollama;

use std::io::Write;

fn main() {
    let fake = fake_ollama::FakeOllama::spawn(fake_ollama::FakeConfig::default());
    println!("{}", fake.url());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
