//! The cluster bench's tables, its figures against their goals, and its JSON
//! (`{"bench": "cluster", "mode", "figures": [...], ...raw numbers}`, the
//! shape of the checkers bench's).

use serde_json::{Value, json};

use super::{
    Args, GOAL_PAUSE_P99_MS_MAX, GOAL_READY_RATIO_MAX, GOAL_RF_RATIO_MIN, GOAL_SENDS_PER_S_MIN,
    GOAL_SENDS_SHARE_MIN, Kcat, Measured, Pause, Ready,
};

/// One row of the figures table.
struct Figure {
    figure: String,
    measured: String,
    baseline: String,
    goal: String,
    met: Option<bool>,
}

/// The middle sample, or the mean of the middle two.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Nearest rank: the smallest sample with at least `p` of them at or below it.
fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn mark(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

fn failed(figure: &str, goal: &str, why: &str) -> Figure {
    Figure {
        figure: figure.to_owned(),
        measured: format!("not measured: {why}"),
        baseline: "—".into(),
        goal: goal.to_owned(),
        met: None,
    }
}

/// What the sections gather: the figures, in order, and the raw numbers the
/// JSON carries beside them.
#[derive(Default)]
struct Gathered {
    figures: Vec<Figure>,
    raw: serde_json::Map<String, Value>,
}

/// Figure 1: how long the cluster takes to be ready, against etcd alone,
/// and the phases of its start.
fn cluster_ready(ready: &Result<Ready, String>, out: &mut Gathered) {
    let goal = format!("≤ {GOAL_READY_RATIO_MAX}× etcd alone");
    match ready {
        Ok(ready) => {
            println!();
            println!("| start | etcd alone | cluster ready |");
            println!("|---|---|---|");
            for (i, (e, c)) in ready.etcd_s.iter().zip(&ready.cluster_s).enumerate() {
                println!("| {} | {} | {} |", i + 1, secs(*e), secs(*c));
            }
            let (etcd, cluster) = (median(&ready.etcd_s), median(&ready.cluster_s));
            let ratio = cluster / etcd;
            out.figures.push(Figure {
                figure: "cluster ready (etcd, 3 brokers, 12 link proxies, topic led)".into(),
                measured: format!("{} median ({ratio:.1}×)", secs(cluster)),
                baseline: format!("etcd alone {} median", secs(etcd)),
                goal: goal.clone(),
                met: Some(ratio <= GOAL_READY_RATIO_MAX),
            });
            let phases = phase_medians(ready);
            print_phases(ready, &phases);
            out.raw.insert(
                "ready".into(),
                json!({"etcd_alone_s": ready.etcd_s, "cluster_s": ready.cluster_s,
                       "etcd_alone_median_s": etcd, "cluster_median_s": cluster, "ratio": ratio,
                       "phases_median_s": phases.iter().map(|(n, s)| json!({"phase": n, "s": s})).collect::<Vec<_>>(),
                       "phases_s": ready.phases.iter().map(|p| p.iter().map(|(n, s)| json!({"phase": n, "s": s})).collect::<Vec<_>>()).collect::<Vec<_>>()}),
            );
        }
        Err(why) => out.figures.push(failed("cluster ready", &goal, why)),
    }
}

/// Phases by name, in the first start's order, median over starts.
fn phase_medians(ready: &Ready) -> Vec<(String, f64)> {
    let names: Vec<&String> = ready.phases[0].iter().map(|(n, _)| n).collect();
    names
        .iter()
        .map(|name| {
            let values: Vec<f64> = ready
                .phases
                .iter()
                .filter_map(|p| p.iter().find(|(n, _)| n == *name).map(|(_, s)| *s))
                .collect();
            ((*name).clone(), median(&values))
        })
        .collect()
}

fn print_phases(ready: &Ready, phases: &[(String, f64)]) {
    let total: f64 = phases.iter().map(|(_, s)| s).sum();
    println!();
    println!(
        "| cluster start, phase (median of {} starts) | time | share |",
        ready.phases.len()
    );
    println!("|---|---|---|");
    for (name, s) in phases {
        println!(
            "| {name} | {:.1} ms | {:.0} % |",
            s * 1e3,
            s / total * 100.0
        );
    }
    println!("| sum of the medians | {:.1} ms | |", total * 1e3);
}

/// Figure 2: how soon a paused broker is stopped, against an idle process.
fn pause_takes_effect(pause: &Result<Pause, String>, out: &mut Gathered) {
    let goal = format!("p99 ≤ {GOAL_PAUSE_P99_MS_MAX} ms");
    match pause {
        Ok(pause) => {
            println!();
            println!("| SIGSTOP until /proc reads T | samples | p50 | p99 | max |");
            println!("|---|---|---|---|---|");
            let rows = [
                (
                    "broker b2, signal::pause + tight /proc poll",
                    &pause.broker_ms,
                ),
                ("idle `sleep`, the same", &pause.idle_ms),
                (
                    "broker b2, ProcessRuntime::pause_node (20 ms poll)",
                    &pause.pause_node_ms,
                ),
            ];
            for (what, ms) in rows {
                println!(
                    "| {what} | {} | {:.3} ms | {:.3} ms | {:.3} ms |",
                    ms.len(),
                    percentile(ms, 0.5),
                    percentile(ms, 0.99),
                    percentile(ms, 1.0)
                );
            }
            let p99 = percentile(&pause.broker_ms, 0.99);
            out.figures.push(Figure {
                figure: "pause takes effect (SIGSTOP → state T)".into(),
                measured: format!(
                    "p50 {:.3} ms, p99 {p99:.3} ms",
                    percentile(&pause.broker_ms, 0.5)
                ),
                baseline: format!(
                    "idle process p50 {:.3} ms, p99 {:.3} ms",
                    percentile(&pause.idle_ms, 0.5),
                    percentile(&pause.idle_ms, 0.99)
                ),
                goal: goal.clone(),
                met: Some(p99 <= GOAL_PAUSE_P99_MS_MAX),
            });
            out.raw.insert(
                "pause_ms".into(),
                json!({"broker": pause.broker_ms, "idle": pause.idle_ms, "pause_node": pause.pause_node_ms}),
            );
        }
        Err(why) => out.figures.push(failed("pause takes effect", &goal, why)),
    }
}

/// kcat's runs: figure 3's baseline and figure 4.
fn kcat_runs(m: &Measured, out: &mut Gathered) {
    println!();
    println!("| kcat -P (librdkafka defaults) | records | delivered | time | records/s | MiB/s |");
    println!("|---|---|---|---|---|---|");
    let mut kcat_raw = serde_json::Map::new();
    for (what, key, run) in [
        (
            "16 B records, acks=all, RF 3",
            "small_acks_all_rf3",
            &m.kcat_small,
        ),
        (
            "1 KiB records, acks=all, RF 3",
            "kib_acks_all_rf3",
            &m.kcat_rf3,
        ),
        ("1 KiB records, acks=1, RF 1", "kib_acks_1_rf1", &m.kcat_rf1),
    ] {
        match run {
            Ok(k) => {
                println!(
                    "| {what} | {} | {} | {} | {:.0} | {:.1} |",
                    k.records,
                    k.delivered,
                    secs(k.seconds),
                    k.per_s(),
                    k.mib_per_s()
                );
                kcat_raw.insert(key.into(), k.json());
            }
            Err(why) => {
                println!("| {what} | — | — | {why} | — | — |");
                kcat_raw.insert(key.into(), json!({"error": why}));
            }
        }
    }
    out.raw.insert("kcat".into(), Value::Object(kcat_raw));
}

/// Figure 3: the background workload's acks=all sends, against kcat's rate.
fn background_workload(m: &Measured, out: &mut Gathered) {
    println!();
    println!(
        "| epochal run, background producers (interval 1 ms) | sends ok | fail | info | load window | ok sends/s | exit | wall |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let goal = format!("≥ {GOAL_SENDS_PER_S_MIN:.0}/s and ≥ {GOAL_SENDS_SHARE_MIN}× kcat");
    let mut background_raw = Vec::new();
    for (producers, run) in &m.background {
        let figure = format!("background acks=all sends/s, {producers} producers");
        match (run, &m.kcat_small) {
            (Ok(b), kcat) => {
                println!(
                    "| {producers} | {} | {} | {} | {} | {:.0} | {} | {} |",
                    b.sends_ok,
                    b.sends_failed,
                    b.sends_info,
                    secs(b.window_s),
                    b.sends_ok_per_s,
                    b.exit_code.map_or("signal".into(), |c| c.to_string()),
                    secs(b.wall_s),
                );
                background_raw.push(serde_json::to_value(b).expect("plain numbers"));
                let (baseline, share) = match kcat {
                    Ok(k) => (
                        format!("kcat {:.0}/s", k.per_s()),
                        b.sends_ok_per_s / k.per_s(),
                    ),
                    Err(_) => ("kcat not measured".to_owned(), f64::NAN),
                };
                // Two figures: the rate the acceptance asks for, and the
                // share of kcat's pipelined, batched rate (one op at a time
                // per client process cannot approach it; reported as is).
                out.figures.push(Figure {
                    figure: figure.clone(),
                    measured: format!("{:.0}/s", b.sends_ok_per_s),
                    baseline: baseline.clone(),
                    goal: format!("≥ {GOAL_SENDS_PER_S_MIN:.0}/s"),
                    met: Some(b.sends_ok_per_s >= GOAL_SENDS_PER_S_MIN),
                });
                out.figures.push(Figure {
                    figure: format!("{figure}: share of kcat"),
                    measured: format!("{share:.3}×"),
                    baseline,
                    goal: format!("≥ {GOAL_SENDS_SHARE_MIN}× kcat"),
                    met: Some(share >= GOAL_SENDS_SHARE_MIN),
                });
            }
            (Err(why), _) => {
                println!("| {producers} | — | — | — | — | {why} | — | — |");
                background_raw.push(json!({"producers": producers, "error": why}));
                out.figures.push(failed(&figure, &goal, why));
            }
        }
    }
    out.raw
        .insert("background".into(), Value::Array(background_raw));
}

/// Figure 4: RF 3 acks=all versus RF 1 acks=1.
fn replication_cost(kcat_rf3: &Result<Kcat, String>, kcat_rf1: &Result<Kcat, String>) -> Figure {
    let goal = format!("≥ {GOAL_RF_RATIO_MIN}×");
    let figure = "1 KiB throughput, acks=all RF 3 / acks=1 RF 1 (kcat)";
    match (kcat_rf3, kcat_rf1) {
        (Ok(rf3), Ok(rf1)) => {
            let ratio = rf3.per_s() / rf1.per_s();
            Figure {
                figure: figure.into(),
                measured: format!("{:.1} MiB/s ({ratio:.2}×)", rf3.mib_per_s()),
                baseline: format!("acks=1 RF 1 {:.1} MiB/s", rf1.mib_per_s()),
                goal,
                met: Some(ratio >= GOAL_RF_RATIO_MIN),
            }
        }
        (Err(why), _) | (_, Err(why)) => failed(figure, &goal, why),
    }
}

fn print_figures(figures: &[Figure]) {
    println!();
    println!("| figure | measured | baseline | goal | |");
    println!("|---|---|---|---|---|");
    for f in figures {
        println!(
            "| {} | {} | {} | {} | {} |",
            f.figure,
            f.measured,
            f.baseline,
            f.goal,
            f.met.map_or("—", mark)
        );
    }
}

/// `--json PATH`: the figures, then the raw numbers.
fn write_json(path: &str, args: &Args, figures: &[Figure], raw: serde_json::Map<String, Value>) {
    let mut json = serde_json::Map::new();
    json.insert("bench".into(), json!("cluster"));
    json.insert(
        "mode".into(),
        json!(if args.quick { "quick" } else { "full" }),
    );
    json.insert(
        "figures".into(),
        figures
            .iter()
            .map(|f| {
                json!({"figure": f.figure, "measured": f.measured, "baseline": f.baseline,
                       "goal": f.goal, "met": f.met})
            })
            .collect(),
    );
    json.extend(raw);
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(dir).expect("the JSON's directory can be made");
    }
    std::fs::write(
        path,
        serde_json::to_string_pretty(&Value::Object(json)).unwrap() + "\n",
    )
    .expect("the JSON can be written");
    println!();
    println!("written: {path}");
}

/// Prints every table and writes the JSON; true if a figure could not be
/// measured.
pub fn report(args: &Args, m: &Measured) -> bool {
    let mut out = Gathered::default();
    cluster_ready(&m.ready, &mut out);
    pause_takes_effect(&m.pause, &mut out);
    kcat_runs(m, &mut out);
    background_workload(m, &mut out);
    out.figures.push(replication_cost(&m.kcat_rf3, &m.kcat_rf1));
    let Gathered { figures, raw } = out;
    print_figures(&figures);
    if let Some(path) = &args.json {
        write_json(path, args, &figures, raw);
    }
    figures.iter().any(|f| f.met.is_none())
}
