//! The report of the proxy bench (`../proxy.rs`, which says what is measured
//! and why): the figures drawn from the samples, printed as a table against
//! the goals of issue 22 and, with `--json PATH`, written out with every sample.

use super::*;

/// The figures reported, drawn from the samples (sorting them).
pub(crate) struct Summary {
    direct_mb_s: f64,
    proxy_mb_s: f64,
    ratio: f64,
    direct_p50: f64,
    direct_p99: f64,
    proxy_p50: f64,
    proxy_p99: f64,
    added_p50: f64,
    cut_p50: f64,
    cut_p99: f64,
    call_p50: f64,
    call_p99: f64,
    transit_p50: f64,
    transit_p99: f64,
}

impl Summary {
    pub(crate) fn of(measured: &mut Measured) -> Summary {
        let Measured {
            throughput,
            rtt,
            cut,
        } = measured;
        let direct_mb_s = Throughput::best(&throughput.direct_mb_s);
        let proxy_mb_s = Throughput::best(&throughput.proxy_mb_s);
        let ratio = proxy_mb_s / direct_mb_s;
        let direct_p50 = percentile(&mut rtt.direct_us, 0.50);
        let direct_p99 = percentile(&mut rtt.direct_us, 0.99);
        let proxy_p50 = percentile(&mut rtt.proxy_us, 0.50);
        let proxy_p99 = percentile(&mut rtt.proxy_us, 0.99);
        let added_p50 = proxy_p50 - direct_p50;
        let cut_p50 = percentile(&mut cut.effect_ms, 0.50);
        let cut_p99 = percentile(&mut cut.effect_ms, 0.99);
        let call_p50 = percentile(&mut cut.call_ms, 0.50);
        let call_p99 = percentile(&mut cut.call_ms, 0.99);
        let transit_p50 = percentile(&mut cut.transit_us, 0.50) / 1e3;
        let transit_p99 = percentile(&mut cut.transit_us, 0.99) / 1e3;
        Summary {
            direct_mb_s,
            proxy_mb_s,
            ratio,
            direct_p50,
            direct_p99,
            proxy_p50,
            proxy_p99,
            added_p50,
            cut_p50,
            cut_p99,
            call_p50,
            call_p99,
            transit_p50,
            transit_p99,
        }
    }
}

pub(crate) fn print_cuts(summary: &Summary, cut: &Cuts) {
    println!();
    println!(
        "cuts: took effect p50 {} / p99 {} after the call returned ({} over the {CUT_TIMEOUT:?} \
         bound); the call took p50 {} / p99 {}; {} messages, none lost",
        ms(summary.cut_p50),
        ms(summary.cut_p99),
        cut.timed_out,
        ms(summary.call_p50),
        ms(summary.call_p99),
        cut.messages,
    );
}

/// One row of the table: figure, measured, baseline, goal, whether it is met.
pub(crate) type Figure = (String, String, String, String, Option<bool>);

/// The three goals of issue 22, each against its baseline.
pub(crate) fn figures(s: &Summary, sizes: &Sizes) -> [Figure; 3] {
    let Summary {
        direct_mb_s,
        proxy_mb_s,
        ratio,
        ..
    } = *s;
    [
        (
            format!(
                "proxy echo throughput ({} MiB), proxy/direct",
                sizes.echo_bytes >> 20
            ),
            format!("{ratio:.2}× ({proxy_mb_s:.0} MB/s)"),
            format!("{direct_mb_s:.0} MB/s direct"),
            format!("≥ {GOAL_THROUGHPUT_RATIO_MIN}×"),
            Some(ratio >= GOAL_THROUGHPUT_RATIO_MIN),
        ),
        (
            "proxy added RTT p50, 1-byte echo".to_owned(),
            format!(
                "+{} (p50 {}, p99 {})",
                us(s.added_p50),
                us(s.proxy_p50),
                us(s.proxy_p99)
            ),
            format!("p50 {}, p99 {} direct", us(s.direct_p50), us(s.direct_p99)),
            format!("≤ +{GOAL_ADDED_RTT_P50_US_MAX} µs"),
            Some(s.added_p50 <= GOAL_ADDED_RTT_P50_US_MAX),
        ),
        (
            format!("partition takes effect p99 ({} cuts)", sizes.cuts),
            format!("{} (p50 {})", ms(s.cut_p99), ms(s.cut_p50)),
            format!(
                "transit p50 {}, p99 {} flowing",
                ms(s.transit_p50),
                ms(s.transit_p99)
            ),
            format!("≤ {GOAL_CUT_P99_MS_MAX} ms"),
            Some(s.cut_p99 <= GOAL_CUT_P99_MS_MAX),
        ),
    ]
}

pub(crate) fn print_figures(figures: &[Figure]) {
    println!();
    println!("| figure | measured | baseline | goal | |");
    println!("|---|---|---|---|---|");
    for (figure, measured, baseline, goal, met) in figures {
        println!(
            "| {figure} | {measured} | {baseline} | {goal} | {} |",
            met.map_or("—", mark)
        );
    }
}

/// `--json PATH`: the figures and every sample behind them.
pub(crate) fn report_json(
    args: &Args,
    sizes: &Sizes,
    bin: &Path,
    version: &str,
    figures: &[Figure],
    measured: &Measured,
    s: &Summary,
) -> Value {
    let Measured {
        throughput,
        rtt,
        cut,
    } = measured;
    json!({
        "bench": "proxy",
        "mode": mode(args),
        "figures": figures.iter().map(|(figure, measured, baseline, goal, met)| json!({
            "figure": figure, "measured": measured, "baseline": baseline, "goal": goal,
            "met": met,
        })).collect::<Vec<_>>(),
        "proxy_bin": bin.display().to_string(),
        "proxy_version": version,
        "throughput": {
            "echo_bytes": sizes.echo_bytes, "reps": args.reps,
            "direct_mb_s": throughput.direct_mb_s, "proxy_mb_s": throughput.proxy_mb_s,
            "direct_best_mb_s": s.direct_mb_s, "proxy_best_mb_s": s.proxy_mb_s,
            "ratio": s.ratio,
        },
        "rtt": {
            "round_trips": rtt.proxy_us.len(), "warmup": ROUND_TRIPS_WARMUP,
            "direct_p50_us": s.direct_p50, "direct_p99_us": s.direct_p99,
            "proxy_p50_us": s.proxy_p50, "proxy_p99_us": s.proxy_p99,
            "added_p50_us": s.added_p50,
        },
        "partition": {
            "cuts": cut.effect_ms.len(), "effect_ms": cut.effect_ms,
            "effect_p50_ms": s.cut_p50, "effect_p99_ms": s.cut_p99,
            "timed_out": cut.timed_out, "timeout_ms": CUT_TIMEOUT.as_millis() as u64,
            "settle_ms": CUT_SETTLE.as_millis() as u64,
            "call_p50_ms": s.call_p50, "call_p99_ms": s.call_p99,
            "transit_p50_ms": s.transit_p50, "transit_p99_ms": s.transit_p99,
            "message_bytes": MESSAGE_BYTES,
            "message_interval_us": MESSAGE_INTERVAL.as_micros() as u64,
            "messages": cut.messages,
        },
    })
}

pub(crate) fn write_json(path: &str, json: &Value) -> Result<(), String> {
    if let Some(dir) = Path::new(path).parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(json).expect("JSON serializes") + "\n";
    std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))
}
