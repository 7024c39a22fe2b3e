//! `svc-tls-inspect`: see the library's documentation (`svc_tls_inspect`) and
//! docs/operations.md.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    // svc-tls's own log lines (warnings at start-up) only when asked for.
    if let Ok(filter) = std::env::var("RUST_LOG") {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .init();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("svc-tls-inspect: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(svc_tls_inspect::run(&args));
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(outcome.stdout.as_bytes());
    if !outcome.stdout.ends_with('\n') {
        let _ = stdout.write_all(b"\n");
    }
    let _ = stdout.flush();
    ExitCode::from(outcome.exit_code)
}
