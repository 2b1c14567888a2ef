//! `epochal power`'s command line: the power table (campaign/power/) over
//! the settings of `suites/power/table.toml`, each seed's outcome printed as it
//! ends, then the table; `power.json` written beside the runs, and with
//! `--history` one summary line appended to a file kept between nights.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::exit::{EXIT_HARNESS_ERROR, EXIT_INVALID, EXIT_USAGE, EXIT_VALID};
use super::run_settings::RunSettings;
use crate::campaign::explore::pairs::{Coverage, CoverageError, Guide, SharedCoverage};
use crate::campaign::power::{self, PowerFile, PowerOptions, PowerSetting, SeedOutcome};
use crate::checker::Verdict;
use crate::duration::parse_duration;

#[derive(Debug, Args)]
pub struct PowerArgs {
    /// The settings, seeds and duration (suites/power/table.toml's format).
    #[arg(long, default_value = "suites/power/table.toml")]
    pub file: PathBuf,
    /// The file's `[quick]` settings, seeds and duration: a few minutes, for CI.
    #[arg(long)]
    pub quick: bool,
    /// Only these settings (by name; repeatable).
    #[arg(long = "setting", value_name = "NAME")]
    pub only: Vec<String>,
    /// Seeds `A..B` (both included) instead of the file's.
    #[arg(long, value_parser = parse_seed_range)]
    pub seeds: Option<(u64, u64)>,
    /// How long each campaign fires faults, instead of the file's.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Campaigns run at once. More than 1 shares the machine between
    /// clusters, which stretches every timing window: compare tables run
    /// with the same value on the same machine.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// A positive control must be invalid in at least this many seeds
    /// (else exit 1); a negative control in none.
    #[arg(long, default_value_t = 1)]
    pub min_detected: usize,
    /// Where the table's JSON goes (default `<store>/power/power.json`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A file of one summary line per table: the last comparable line is
    /// printed beside each row, and this table's is appended.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Run nothing: build the table from the runs an earlier `epochal
    /// power` left in the store (the latest of each setting and seed),
    /// measured with this build.
    #[arg(long)]
    pub remeasure: bool,
    /// Leave the targeted fault sequences out of every setting's mix
    /// (`campaign --no-sequences`; docs/power.md).
    #[arg(long)]
    pub no_sequences: bool,
    /// Guide every campaign toward state-fault pairs not reached yet
    /// (`campaign --guided`), each seed measured against the pairs the
    /// seeds before it reached.
    #[arg(long)]
    pub guided: bool,
    /// With `--guided`, ties broken by rarity ahead (`campaign --lookahead`).
    #[arg(long, requires = "guided")]
    pub lookahead: bool,
    /// A coverage map read first and written back with every run's pairs
    /// added (`campaign --coverage`).
    #[arg(long, value_name = "FILE")]
    pub coverage: Option<PathBuf>,
    #[command(flatten)]
    pub settings: RunSettings,
}

fn parse_seed_range(s: &str) -> Result<(u64, u64), power::settings::SeedRangeError> {
    power::settings::parse_seeds(s)
}

/// `epochal power`: 0 when every positive control was invalid in at least
/// `--min-detected` seeds and no negative control was; 1 when not; 3 a bad
/// file or flag; 4 a run that could not be made, or the JSON not written.
pub fn power(args: &PowerArgs, out: &mut impl Write) -> u8 {
    let options = match options(args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("epochal: {why}");
            return EXIT_USAGE;
        }
    };
    let _ = writeln!(
        out,
        "power: {} settings x {} seeds x {} s, {} at once; runs under {}",
        options.settings.len(),
        options.seeds.len(),
        options.duration.as_secs(),
        options.jobs,
        args.settings.store.join("power").display()
    );
    for s in &options.settings {
        let _ = writeln!(out, "  {:<18} {}", s.name, options.command(s));
    }
    let _ = out.flush();
    let Some(runtime) = super::drive::current_thread_runtime() else {
        return EXIT_HARNESS_ERROR;
    };
    let table = if args.remeasure {
        let table = power::remeasure(&options);
        for row in &table.rows {
            for outcome in &row.seeds {
                let _ = writeln!(out, "{}", line(&row.setting, outcome));
            }
        }
        table
    } else {
        runtime.block_on(power::run_power(&options, &mut |setting, outcome| {
            let _ = writeln!(out, "{}", line(setting, outcome));
            let _ = out.flush();
        }))
    };
    if let Err(e) = save_coverage(args, &options, out) {
        eprintln!("epochal: {e}");
        return EXIT_HARNESS_ERROR;
    }
    let previous = args.history.as_ref().and_then(|h| {
        let text = std::fs::read_to_string(h).ok()?;
        power::table::previous(&text, table.quick, table.duration_s)
    });
    let _ = write!(out, "\n{}", table.render(previous.as_ref()));
    let mut code = if table.rows.iter().all(|r| r.met(args.min_detected)) {
        EXIT_VALID
    } else {
        for r in table.rows.iter().filter(|r| !r.met(args.min_detected)) {
            let _ = writeln!(
                out,
                "power: {} missed: {} of {} seeds invalid ({})",
                r.setting.name,
                r.invalid,
                r.runs,
                match r.setting.control {
                    power::Control::Positive =>
                        format!("a positive control needs at least {}", args.min_detected),
                    power::Control::Negative => "a negative control needs none".to_owned(),
                }
            );
        }
        EXIT_INVALID
    };
    if table.rows.iter().any(|r| r.errors > 0) {
        let _ = writeln!(out, "power: some runs could not be made (see above)");
        code = EXIT_HARNESS_ERROR;
    }
    let json = args
        .json
        .clone()
        .unwrap_or_else(|| args.settings.store.join("power/power.json"));
    if let Err(e) = write_json(&json, &table) {
        eprintln!("epochal: {}: {e}", json.display());
        return EXIT_HARNESS_ERROR;
    }
    let _ = writeln!(out, "power: JSON in {}", json.display());
    // A re-measured table is not a new night: the history is only read.
    if let Some(history) = args.history.as_ref().filter(|_| !args.remeasure) {
        let line = serde_json::to_string(&table.summary()).expect("a summary serializes");
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(history)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = appended {
            eprintln!("epochal: {}: {e}", history.display());
            return EXIT_HARNESS_ERROR;
        }
    }
    code
}

/// Writes the coverage map every run added its pairs to, when asked.
fn save_coverage(
    args: &PowerArgs,
    options: &PowerOptions,
    out: &mut impl Write,
) -> Result<(), CoverageError> {
    let Some(path) = &args.coverage else {
        return Ok(());
    };
    let map = options.guide.prior.snapshot();
    map.save(path)?;
    let _ = writeln!(
        out,
        "coverage: {} state-fault pairs in {}",
        map.pairs.len(),
        path.display()
    );
    Ok(())
}

/// Why the flags and the file do not make a power table.
#[derive(Debug, thiserror::Error)]
enum PowerArgsError {
    #[error("power takes each setting's --set from {file}; give --setting NAME to choose")]
    Set { file: String },
    #[error("--jobs must be at least 1")]
    NoJobs,
    #[error(transparent)]
    File(#[from] power::PowerFileError),
    #[error(transparent)]
    Coverage(#[from] CoverageError),
    #[error("{file}: no setting {name:?} (there are: {known})")]
    NoSuchSetting {
        file: String,
        name: String,
        known: String,
    },
}

/// What the flags and the file ask for.
fn options(args: &PowerArgs) -> Result<PowerOptions, PowerArgsError> {
    if !args.settings.sets.is_empty() {
        return Err(PowerArgsError::Set {
            file: args.file.display().to_string(),
        });
    }
    if args.jobs == 0 {
        return Err(PowerArgsError::NoJobs);
    }
    let file = PowerFile::load(&args.file)?;
    let names: Vec<String> = if !args.only.is_empty() {
        args.only.clone()
    } else if args.quick {
        file.quick.settings.clone()
    } else {
        file.settings.iter().map(|s| s.name.clone()).collect()
    };
    let settings: Vec<PowerSetting> = names
        .iter()
        .map(|n| {
            file.setting(n)
                .cloned()
                .ok_or_else(|| PowerArgsError::NoSuchSetting {
                    file: args.file.display().to_string(),
                    name: n.clone(),
                    known: file
                        .settings
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        })
        .collect::<Result<_, _>>()?;
    let seeds = match (args.seeds, args.quick) {
        (Some((a, b)), _) => (a..=b).collect(),
        (None, true) => file.quick.seeds.clone(),
        (None, false) => file.seeds(),
    };
    let duration = args.duration.unwrap_or(if args.quick {
        file.quick_duration()
    } else {
        file.duration()
    });
    let mut run = args.settings.options(std::path::Path::new("power"));
    run.echo = false;
    Ok(PowerOptions {
        settings,
        seeds,
        duration,
        jobs: args.jobs,
        quick: args.quick,
        sequences: !args.no_sequences,
        guide: Guide {
            guided: args.guided,
            lookahead: args.lookahead,
            prior: SharedCoverage::new(match &args.coverage {
                Some(path) => Coverage::load(path)?,
                None => Coverage::default(),
            }),
        },
        run,
    })
}

/// One seed's line, printed as it ends.
fn line(setting: &PowerSetting, o: &SeedOutcome) -> String {
    let verdict = match (&o.verdict, &o.error) {
        (Some(Verdict::Invalid), _) => {
            let kinds: Vec<&str> = o.anomalies.iter().map(|a| a.name()).collect();
            let at = o.detection.as_ref().map_or(String::new(), |d| {
                format!(
                    " first evidence at {:.1} s{}",
                    d.evidence_s,
                    if d.placed {
                        ""
                    } else {
                        " (not placed: the campaign's end)"
                    }
                )
            });
            format!("invalid ({}){at}", kinds.join(", "))
        }
        (Some(v), _) => format!("{v:?}").to_lowercase(),
        (None, Some(e)) => format!("error: {e}"),
        (None, None) => "error".into(),
    };
    format!(
        "  {} seed {}: {verdict}; {} faults{}, {:.0} s{}",
        setting.name,
        o.seed,
        o.faults,
        o.pairs
            .map(|n| format!(", {n} state-fault pairs"))
            .unwrap_or_default(),
        o.wall_s,
        o.run_dir
            .as_ref()
            .map(|d| format!("; {}", d.display()))
            .unwrap_or_default()
    )
}

fn write_json(path: &std::path::Path, table: &power::PowerTable) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(table).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}
