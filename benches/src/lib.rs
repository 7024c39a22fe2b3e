//! Benchmarks live in `benches/benches/`; run them with `cargo xtask bench`.
