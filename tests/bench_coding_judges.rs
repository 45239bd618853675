//! The coding benchmark's judges (benches/bench_coding.rs), without a model: each task's judge
//! fails the untouched workspace and passes the task's reference solution. The benchmark itself
//! needs a real model (scripts/bench-coding.sh); its judges must hold whenever the code builds.

// The benchmark's own `main` and its reports go unused here: benches/bench_coding.rs allows
// dead code under `cfg(test)`.
#[path = "../benches/bench_coding.rs"]
mod bench_coding;
