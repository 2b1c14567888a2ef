//! Throughput and latency over time: acknowledged sends, ok polls and
//! failed or indefinite ops per second, and the median and worst latency of
//! acknowledged sends, in time buckets, with the faults shaded behind them.

use std::fmt::Write;

use crate::history::Process;
use crate::history::op::Body;

use super::html::{Axis, duration, escape};
use super::timeline::{FaultInterval, Span};

const BUCKETS: usize = 120;
const PLOT_HEIGHT: f64 = 120.0;

/// Per bucket: ok sends, ok polls, fail + info, and send latencies.
#[derive(Default, Clone)]
struct Bucket {
    sends: u32,
    polls: u32,
    failed: u32,
    latencies: Vec<u64>,
}

pub fn section(
    spans: &[Span<'_>],
    faults: &[FaultInterval],
    axis: &Axis,
    history_end: u64,
) -> String {
    let mut buckets = vec![Bucket::default(); BUCKETS];
    let bucket_ns = (axis.end_ns / BUCKETS as u64).max(1);
    for span in spans {
        if !matches!(span.invoke.process, Process::Client(_)) {
            continue;
        }
        let Some(done) = span.completion else {
            continue;
        };
        let b = &mut buckets[((done.time_ns / bucket_ns) as usize).min(BUCKETS - 1)];
        match (span.outcome(), &done.body) {
            ("ok", Body::Send(_)) => {
                b.sends += 1;
                b.latencies.push(span.end_ns(history_end) - span.start_ns());
            }
            ("ok", _) => b.polls += 1,
            _ => b.failed += 1,
        }
    }
    let per_second = 1e9 / bucket_ns as f64;
    let rate = |n: u32| n as f64 * per_second;
    let series: [(&str, &str, Vec<f64>); 3] = [
        (
            "acknowledged sends/s",
            "sends",
            buckets.iter().map(|b| rate(b.sends)).collect(),
        ),
        (
            "ok polls/s",
            "polls",
            buckets.iter().map(|b| rate(b.polls)).collect(),
        ),
        (
            "failed or indefinite/s",
            "failed",
            buckets.iter().map(|b| rate(b.failed)).collect(),
        ),
    ];
    let mut medians = Vec::with_capacity(BUCKETS);
    let mut worst = Vec::with_capacity(BUCKETS);
    for b in &mut buckets {
        b.latencies.sort_unstable();
        medians.push(
            b.latencies
                .get(b.latencies.len() / 2)
                .map_or(0.0, |&ns| ns as f64 / 1e6),
        );
        worst.push(b.latencies.last().map_or(0.0, |&ns| ns as f64 / 1e6));
    }
    let mut out = String::new();
    plot(
        "throughput",
        "/s",
        &series
            .iter()
            .map(|(n, c, v)| (*n, *c, v.as_slice()))
            .collect::<Vec<_>>(),
        faults,
        axis,
        &mut out,
    );
    plot(
        "send latency",
        " ms",
        &[
            ("median ms", "median", medians.as_slice()),
            ("worst ms", "worst", worst.as_slice()),
        ],
        faults,
        axis,
        &mut out,
    );
    let total: u32 = buckets.iter().map(|b| b.sends).sum();
    let _ = write!(
        out,
        "<p>{total} acknowledged sends over {}; buckets of {}.</p>",
        duration(axis.end_ns),
        duration(bucket_ns)
    );
    out
}

fn plot(
    title: &str,
    unit: &str,
    series: &[(&str, &str, &[f64])],
    faults: &[FaultInterval],
    axis: &Axis,
    out: &mut String,
) {
    let max = series
        .iter()
        .flat_map(|(_, _, v)| v.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1.0);
    let top = 20.0;
    let height = top + PLOT_HEIGHT + 10.0;
    let _ = write!(
        out,
        r#"<svg class="plot" data-plot="{t}" width="{w:.0}" height="{height:.0}" viewBox="0 0 {w:.0} {height:.0}"><text class="lane" x="4" y="14">{t}</text><text class="tick" x="4" y="{:.1}">max {:.0}{unit}</text>"#,
        top + 12.0,
        max,
        t = escape(title),
        w = axis.left + axis.width + 10.0,
    );
    for fault in faults {
        let x = axis.x(fault.start_ns);
        let w = (axis.x(fault.end_ns) - x).max(1.0);
        let _ = write!(
            out,
            r#"<rect class="fault fault-{}" x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{PLOT_HEIGHT:.1}"><title>{}</title></rect>"#,
            fault.verb,
            escape(&fault.label)
        );
    }
    let step = axis.width / BUCKETS as f64;
    for (name, class, values) in series {
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                format!(
                    "{:.1},{:.1}",
                    axis.left + step * (i as f64 + 0.5),
                    top + PLOT_HEIGHT * (1.0 - v / max)
                )
            })
            .collect();
        let _ = write!(
            out,
            r#"<polyline class="series {class}" points="{}"><title>{}</title></polyline>"#,
            points.join(" "),
            escape(name)
        );
    }
    let mut x = axis.left;
    for (name, class, _) in series {
        let _ = write!(
            out,
            r#"<text class="legend {class}" x="{x:.1}" y="14">■ {}</text>"#,
            escape(name)
        );
        x += 190.0;
    }
    out.push_str("</svg>");
}
