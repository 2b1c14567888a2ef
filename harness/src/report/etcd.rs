//! etcd's decisions on the history's clock: the controller and its epoch, and
//! each partition's leader, leader epoch and ISR, as lanes under the ops.
//!
//! etcd's revisions carry no time. The brokers' state-change logs do (wall
//! clock, ms): each decision etcd recorded is placed when a broker first
//! applied exactly that state (leader, leader epoch, ISR) — when it took
//! effect in the cluster — and decisions no broker applied (a leaderless
//! state, a controller change) are placed by interpolating between those
//! anchors by revision. `clock.json` ties the wall clock to the history's
//! clock; runs recorded before it existed use a restart's `started_time_ms`.
//! The page says which placement each lane used.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::checker::RunData;
use crate::history::op::Body;
use crate::observe::timeline::{PartitionStateChange, Timeline};

use super::html::{Axis, escape, fit};
use super::timeline::LANE_HEIGHT;

/// Revision → history time (ns), from anchors that are increasing in both.
#[derive(Debug, Clone, Default)]
pub struct RevisionClock {
    anchors: Vec<(i64, u64)>,
}

impl RevisionClock {
    /// Anchors from the brokers' state-change logs, or none when the run
    /// has no wall-clock tie to the history (`wall_zero_ms`).
    pub fn new(run: &RunData, timeline: &Timeline, wall_zero_ms: Option<u64>) -> RevisionClock {
        let Some(zero) = wall_zero_ms else {
            return RevisionClock::default();
        };
        // When each exact state was first applied, on any broker.
        let mut first_applied: BTreeMap<(&str, i32, i32, i32, Vec<i32>), u64> = BTreeMap::new();
        for change in run.state_changes.values().flatten().filter(|c| c.applied()) {
            let mut isr = change.isr.clone();
            isr.sort_unstable();
            let key = (
                change.topic.as_str(),
                change.partition,
                change.leader,
                change.leader_epoch,
                isr,
            );
            let at = change.time_ms.saturating_sub(zero) * 1_000_000;
            first_applied
                .entry(key)
                .and_modify(|t| *t = (*t).min(at))
                .or_insert(at);
        }
        let mut anchors: Vec<(i64, u64)> = Vec::new();
        for state in &timeline.partition_states {
            let mut isr = state.isr.clone();
            isr.sort_unstable();
            let key = (
                state.topic.as_str(),
                state.partition as i32,
                state.leader,
                state.leader_epoch,
                isr,
            );
            if let Some(&at) = first_applied.get(&key) {
                // Keep only anchors that move forward in time with revision:
                // a state re-sent later (a restarted broker applying it
                // again) is not when it was decided.
                if anchors.last().is_none_or(|&(_, last)| at >= last) {
                    anchors.push((state.revision, at));
                }
            }
        }
        RevisionClock { anchors }
    }

    pub fn is_known(&self) -> bool {
        !self.anchors.is_empty()
    }

    /// The history time of a revision: exact at an anchor, linear between
    /// two, clamped to the first and last outside them.
    pub fn time(&self, revision: i64) -> Option<u64> {
        let first = *self.anchors.first()?;
        let last = *self.anchors.last()?;
        if revision <= first.0 {
            return Some(first.1);
        }
        if revision >= last.0 {
            return Some(last.1);
        }
        let after = self.anchors.partition_point(|&(r, _)| r < revision);
        let (r1, t1) = self.anchors[after - 1];
        let (r2, t2) = self.anchors[after];
        let fraction = (revision - r1) as f64 / (r2 - r1).max(1) as f64;
        Some(t1 + ((t2 - t1) as f64 * fraction) as u64)
    }
}

/// The wall clock's zero for the history: `clock.json`, else a restart's
/// start time less the history time of its completion.
pub fn wall_zero_ms(run: &RunData, clock: Option<u64>) -> Option<u64> {
    clock.or_else(|| {
        run.history.iter().find_map(|op| {
            let Body::Fault(fault) = &op.body else {
                return None;
            };
            let started = fault.done.as_ref()?.started_time_ms?;
            Some(started.saturating_sub(op.time_ns / 1_000_000))
        })
    })
}

/// One segment of a lane: from a time on, this label holds.
struct Segment {
    start_ns: u64,
    label: String,
    class: &'static str,
    revision: i64,
}

/// The etcd lanes (controller, then each partition) as an SVG fragment
/// drawn from y = 0, and its height.
pub fn lanes(
    timeline: &Timeline,
    clock: &RevisionClock,
    axis: &Axis,
    end_ns: u64,
) -> (f64, String) {
    let mut out = String::new();
    if !clock.is_known() {
        let _ = write!(
            out,
            r#"<text class="lane" x="4" y="14">etcd: no state-change log ties its revisions to the history's clock; see the table below</text>"#
        );
        return (LANE_HEIGHT + 4.0, out);
    }
    let mut lanes: Vec<(String, Vec<Segment>)> = Vec::new();
    let controllers = timeline
        .controllers
        .iter()
        .filter_map(|c| {
            Some(Segment {
                start_ns: clock.time(c.revision)?,
                label: match (c.broker_id, c.epoch) {
                    (Some(id), Some(epoch)) => format!("b{id} (epoch {epoch})"),
                    (Some(id), None) => format!("b{id}"),
                    (None, _) => "none".into(),
                },
                class: if c.broker_id.is_some() {
                    "etcd"
                } else {
                    "etcd none"
                },
                revision: c.revision,
            })
        })
        .collect();
    lanes.push(("controller".into(), controllers));
    let mut partitions: BTreeMap<(&str, u32), Vec<&PartitionStateChange>> = BTreeMap::new();
    for state in &timeline.partition_states {
        partitions
            .entry((&state.topic, state.partition))
            .or_default()
            .push(state);
    }
    for ((topic, partition), states) in partitions {
        let segments = states
            .iter()
            .filter_map(|s| {
                Some(Segment {
                    start_ns: clock.time(s.revision)?,
                    label: state_label(s),
                    class: if s.leader < 0 { "etcd none" } else { "etcd" },
                    revision: s.revision,
                })
            })
            .collect();
        lanes.push((format!("{topic}-{partition} leader"), segments));
    }
    for (row, (name, segments)) in lanes.iter().enumerate() {
        let y = row as f64 * LANE_HEIGHT;
        let _ = write!(
            out,
            r#"<text class="lane etcd-lane" x="4" y="{:.1}">{}</text>"#,
            y + 13.0,
            escape(name)
        );
        for (i, segment) in segments.iter().enumerate() {
            let until = segments.get(i + 1).map_or(end_ns, |next| next.start_ns);
            let x = axis.x(segment.start_ns);
            let w = (axis.x(until) - x).max(1.0);
            let _ = write!(
                out,
                r#"<g class="{}" data-revision="{}"><rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{:.1}"/><text x="{:.1}" y="{:.1}">{}</text><title>{name}: {} from revision {}</title></g>"#,
                segment.class,
                segment.revision,
                y + 2.0,
                LANE_HEIGHT - 4.0,
                x + 2.0,
                y + 13.0,
                // Labels that do not fit are cut; the title has them whole.
                escape(&fit(&segment.label, w)),
                escape(&segment.label),
                segment.revision,
            );
        }
    }
    (lanes.len() as f64 * LANE_HEIGHT + 4.0, out)
}

/// `b2@3 isr [2,3]`, or `no leader @4 isr [1]`.
pub fn state_label(state: &PartitionStateChange) -> String {
    let isr = state
        .isr
        .iter()
        .map(|b| format!("b{b}"))
        .collect::<Vec<_>>()
        .join(",");
    if state.leader < 0 {
        format!("no leader @{} isr [{isr}]", state.leader_epoch)
    } else {
        format!("b{}@{} isr [{isr}]", state.leader, state.leader_epoch)
    }
}

/// Every decision etcd recorded, in revision order, with its placed time.
pub fn table(timeline: &Timeline, clock: &RevisionClock) -> String {
    let mut rows: Vec<(i64, String, String, String)> = Vec::new();
    for c in &timeline.controllers {
        let what = match c.broker_id {
            Some(id) => format!(
                "b{id} becomes controller{}",
                c.epoch.map(|e| format!(", epoch {e}")).unwrap_or_default()
            ),
            None => "the controller key is deleted".into(),
        };
        rows.push((c.revision, "controller".into(), what, String::new()));
    }
    for s in &timeline.partition_states {
        rows.push((
            s.revision,
            format!("{}-{}", s.topic, s.partition),
            state_label(s),
            format!("controller epoch {}", s.controller_epoch),
        ));
    }
    rows.sort_by_key(|r| r.0);
    let mut out = String::from(
        r#"<table class="etcd-table"><thead><tr><th>revision</th><th>time ≈</th><th>key</th><th>state</th><th></th></tr></thead><tbody>"#,
    );
    for (revision, key, what, more) in rows {
        let time = clock
            .time(revision)
            .map(super::html::duration)
            .unwrap_or_else(|| "—".into());
        let _ = write!(
            out,
            "<tr><td>{revision}</td><td>{time}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&key),
            escape(&what),
            escape(&more)
        );
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_between_anchors_are_interpolated_and_clamped_outside() {
        let clock = RevisionClock {
            anchors: vec![(10, 1_000), (20, 3_000)],
        };
        assert_eq!(clock.time(5), Some(1_000));
        assert_eq!(clock.time(10), Some(1_000));
        assert_eq!(clock.time(15), Some(2_000));
        assert_eq!(clock.time(20), Some(3_000));
        assert_eq!(clock.time(99), Some(3_000));
        assert_eq!(RevisionClock::default().time(1), None);
    }
}
