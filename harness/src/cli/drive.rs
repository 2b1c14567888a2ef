//! Driving a subcommand's async work: a run to its summary, report and exit
//! code; a one-thread runtime for the rest.

use std::io::Write;

use super::exit::{EXIT_HARNESS_ERROR, EXIT_USAGE, exit_code};

/// Drives a run to its end on a two-thread runtime, prints its summary and
/// report, and gives its exit code (and the report, when it ran).
pub(super) fn finish_run(
    run: impl std::future::Future<Output = Result<crate::run::RunReport, crate::run::RunError>>,
    out: &mut impl Write,
) -> (u8, Option<crate::run::RunReport>) {
    finish_run_with(run, out, |report, out| {
        crate::run::write_summary(report, out)
            .and_then(|()| crate::run::write_report(&report.report, out))
    })
}

/// As [`finish_run`], with `summary` telling the run's end instead.
pub(super) fn finish_run_with<W: Write>(
    run: impl std::future::Future<Output = Result<crate::run::RunReport, crate::run::RunError>>,
    out: &mut W,
    summary: impl FnOnce(&crate::run::RunReport, &mut W) -> std::io::Result<()>,
) -> (u8, Option<crate::run::RunReport>) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("epochal: starting the async runtime: {e}");
            return (EXIT_HARNESS_ERROR, None);
        }
    };
    match runtime.block_on(run) {
        Ok(report) => {
            if let Err(e) = summary(&report, out) {
                eprintln!("epochal: writing the summary: {e}");
            }
            (exit_code(report.report.verdict), Some(report))
        }
        Err(e) => {
            eprintln!("epochal: {e}");
            let code = if e.is_usage() {
                EXIT_USAGE
            } else {
                EXIT_HARNESS_ERROR
            };
            (code, None)
        }
    }
}

/// A single-threaded tokio runtime, or `None` after saying why there is none.
pub(super) fn current_thread_runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .inspect_err(|e| eprintln!("epochal: starting the async runtime: {e}"))
        .ok()
}
