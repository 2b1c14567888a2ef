//! `epochal serve`: the store, read-only, on 127.0.0.1.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::drive::current_thread_runtime;
use super::exit::{EXIT_HARNESS_ERROR, EXIT_VALID};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The store to serve: where `run`, `gate` and `campaign` keep runs (their `--store`).
    #[arg(default_value = "store")]
    pub store: PathBuf,
    /// The port on 127.0.0.1; 0 (the default) lets the system pick a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

/// `epochal serve`: rewrites the store's index, prints one line `serving
/// <store> on http://127.0.0.1:<port>/` (flushed, so a script can read the
/// port) and serves until SIGINT or SIGTERM: then 0. 4 when the store is not a
/// directory or the port cannot be had.
pub fn serve(args: &ServeArgs, out: &mut impl Write) -> u8 {
    use crate::report::{index, serve};
    if !args.store.is_dir() {
        eprintln!(
            "epochal: serve: {} is not a directory (a store is made by `run` or `gate`)",
            args.store.display()
        );
        return EXIT_HARNESS_ERROR;
    }
    let Some(runtime) = current_thread_runtime() else {
        return EXIT_HARNESS_ERROR;
    };
    let code = runtime.block_on(async {
        // The handlers first: a Ctrl-C any time after the address is printed
        // must stop the server cleanly, not kill it.
        let stop = match serve::stop_signals() {
            Ok(stop) => stop,
            Err(e) => {
                eprintln!("epochal: serve: installing the signal handlers: {e}");
                return EXIT_HARNESS_ERROR;
            }
        };
        let listener = match serve::bind(args.port) {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("epochal: serve: 127.0.0.1:{}: {e}", args.port);
                return EXIT_HARNESS_ERROR;
            }
        };
        let port = listener.local_addr().map_or(args.port, |a| a.port());
        index::update_store_index(&args.store);
        let _ = writeln!(
            out,
            "serving {} on http://127.0.0.1:{port}/",
            args.store.display()
        );
        let _ = out.flush();
        match serve::serve(&args.store, listener, stop).await {
            Ok(()) => EXIT_VALID,
            Err(e) => {
                eprintln!("epochal: serve: {e}");
                EXIT_HARNESS_ERROR
            }
        }
    });
    // Blocking reads still in flight (a file a stopped connection was
    // reading) get a moment, not a wait without end.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}
