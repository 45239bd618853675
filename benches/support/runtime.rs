//! How every benchmark and peer here starts: a Tokio runtime with every driver on, or a line
//! on stderr saying why there is none and exit status 1.

/// `builder` with I/O and time on, built.
pub fn start(builder: &mut tokio::runtime::Builder) -> tokio::runtime::Runtime {
    match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            std::process::exit(1);
        }
    }
}
