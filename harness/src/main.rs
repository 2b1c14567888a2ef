//! The `epochal` command line. Exit codes are documented in `epochal::cli`.

use std::io;
use std::process::ExitCode;

use clap::Parser;
use epochal::cli::{
    Cli, Command, EXIT_HARNESS_ERROR, EXIT_USAGE, anomalies, campaign, check, fault, gate, gc,
    inspect, merge, power, replay, run, serve, shrink, up,
};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version are "errors" to clap that print to stdout and exit 0.
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let result: anyhow::Result<()> = match &cli.command {
        Command::Inspect(args) => inspect(args, &mut io::stdout().lock()).map_err(Into::into),
        Command::Run(args) => return ExitCode::from(run(args, &mut io::stdout().lock())),
        Command::Up(args) => return ExitCode::from(up(args)),
        Command::Fault(args) => return ExitCode::from(fault(args, &mut io::stdout().lock())),
        Command::Check(args) => return ExitCode::from(check(args, &mut io::stdout().lock())),
        Command::Replay(args) => return ExitCode::from(replay(args, &mut io::stdout().lock())),
        Command::Gate(args) => return ExitCode::from(gate(args, &mut io::stdout().lock())),
        Command::Campaign(args) => {
            return ExitCode::from(campaign(args, &mut io::stdout().lock()));
        }
        Command::Shrink(args) => return ExitCode::from(shrink(args, &mut io::stdout().lock())),
        Command::Power(args) => return ExitCode::from(power(args, &mut io::stdout().lock())),
        Command::Gc(args) => return ExitCode::from(gc(args, &mut io::stdout().lock())),
        Command::Merge(args) => return ExitCode::from(merge(args, &mut io::stdout().lock())),
        Command::Serve(args) => return ExitCode::from(serve(args, &mut io::stdout().lock())),
        Command::Anomalies => return ExitCode::from(anomalies(&mut io::stdout().lock())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("epochal: {error:#}");
            ExitCode::from(EXIT_HARNESS_ERROR)
        }
    }
}
