//! Subscribed consumers the steps drive ([groups]: Jepsen's subscribe mode,
//! scripted). `subscribe` makes a member of a group; while it joins, every
//! other member of that group the steps know heartbeats and joins again when
//! told, as a real consumer's heartbeat thread does, so the round completes
//! with all of them instead of waiting out the rebalance timeout for members
//! that only move when a step moves them. `poll` heartbeats first
//! (what a consumer's heartbeat thread would have learnt since the last
//! step), joins again if that says so, then polls each partition it holds
//! from its position (the group's committed offset the first time) and
//! commits after each poll that moved it. `unsubscribe` leaves the group.
//!
//! Every round, committed read, poll and commit goes to the history (the
//! member's own process), so the group checkers judge them as they judge the
//! background subscribers'. Between steps nothing heartbeats: a member whose
//! steps are further apart than its session (6 s) is expelled and joins as a
//! new member at its next poll, which the history shows.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;

use crate::history::{Body, OpType, Poll, WriteError};
use crate::node::NodeId;
use crate::runtime::Runtime;
use crate::schedule::{MemberPoll, PartitionRef, Schedule, SubscribeStep, Topic};
use crate::workload::client::RecordingClient;
use crate::workload::subscribe::{Membership, Standing};

use super::live::Live;
use super::scripted_member::{MEMBER_WORKERS, ScriptedMember};
use super::{RunError, RunStatus};

/// `subscribe`: the member joins, and with it every member of its group.
pub(super) async fn subscribe<R: Runtime>(
    live: &mut Live<R>,
    schedule: &Schedule,
    number: usize,
    step: &SubscribeStep,
) -> Result<(), RunError> {
    let partitions = schedule
        .cluster
        .topics
        .iter()
        .filter(|t| step.topics.is_empty() || step.topics.contains(&t.name))
        .flat_map(Topic::partition_refs)
        .collect();
    let member = ScriptedMember {
        group: step.group.clone(),
        partitions,
        worker: MEMBER_WORKERS + number as u64,
        member_id: String::new(),
        membership: None,
        positions: BTreeMap::new(),
    };
    live.members.insert(step.member.clone(), member);
    rejoin(live, number, &step.group).await
}

/// The group's members go through a rebalance together, as consumers with
/// heartbeat threads do: each without a membership joins; each with one
/// heartbeats (every [`HEARTBEAT_POLL`]) while any member is unsettled, and
/// joins again when told the group is rebalancing. A round that fails is
/// tried again, [`ROUND_ATTEMPTS`] times in all. Each round is recorded.
async fn rejoin<R: Runtime>(
    live: &mut Live<R>,
    number: usize,
    group: &str,
) -> Result<(), RunError> {
    let names: Vec<String> = live
        .members
        .iter()
        .filter(|(_, m)| m.group == group)
        .map(|(name, _)| name.clone())
        .collect();
    // The coordinator is asked of the leader of a partition the group reads.
    let view = live.view().await?;
    let first = live.members[&names[0]]
        .partitions
        .iter()
        .find_map(|p| view.leader_of(p))
        .unwrap_or(NodeId::new(1));
    let unsettled = AtomicUsize::new(names.len());
    let mut jobs = Vec::new();
    for name in &names {
        let member = &live.members[name];
        let client = match live.scripted.remove(&member.worker) {
            Some(client) => client,
            None => live.clients.client("epochal"),
        };
        jobs.push(Rejoining {
            name: name.clone(),
            client,
            member_id: member.member_id.clone(),
            membership: member.membership.clone(),
            partitions: member.partitions.clone(),
            joined_again: false,
            lines: Vec::new(),
        });
    }
    let done = join_all(
        jobs.into_iter()
            .map(|job| job.run(group, first, &unsettled)),
    )
    .await;
    for job in done {
        let job = job?;
        let member = live.members.get_mut(&job.name).expect("listed above");
        live.scripted.insert(member.worker, job.client);
        if job.joined_again {
            member.positions.clear();
        }
        member.member_id = job.member_id;
        member.membership = job.membership;
        for line in job.lines {
            live.log.line(format!("step {number}: {line}"));
        }
    }
    Ok(())
}

/// How often a member heartbeats while another is unsettled.
const HEARTBEAT_POLL: Duration = Duration::from_millis(200);
/// Rounds a member tries before the step goes on without its membership.
const ROUND_ATTEMPTS: usize = 3;

/// One member going through a rebalance.
struct Rejoining {
    name: String,
    client: RecordingClient,
    member_id: String,
    membership: Option<Membership>,
    partitions: Vec<PartitionRef>,
    /// Whether it completed a round (its positions start over).
    joined_again: bool,
    lines: Vec<String>,
}

impl Rejoining {
    /// Rounds and heartbeats until every member of the group is settled: a
    /// member of the latest round, or out of attempts. `unsettled` starts
    /// at every member: one that holds a membership is settled by its first
    /// heartbeat that says it still is, and unsettled again by one that says
    /// otherwise.
    async fn run(
        mut self,
        group: &str,
        first: NodeId,
        unsettled: &AtomicUsize,
    ) -> Result<Rejoining, WriteError> {
        let mut attempts = 0;
        let mut settled = false;
        let mut first_heartbeat = true;
        loop {
            if self.membership.is_none() {
                if attempts == ROUND_ATTEMPTS {
                    if !settled {
                        unsettled.fetch_sub(1, Ordering::SeqCst);
                    }
                    return Ok(self);
                }
                attempts += 1;
                let round = self
                    .client
                    .rebalance(group, &mut self.member_id, &self.partitions, first)
                    .await;
                let (op, joined) = round?;
                self.lines.push(format!(
                    "{} joins {group} -> {:?} {}",
                    self.name,
                    op.kind,
                    match &joined {
                        Some(m) => format!(
                            "(generation {}, {})",
                            m.generation,
                            partitions_text(&m.partitions)
                        ),
                        None => op.error.clone().unwrap_or_default(),
                    }
                ));
                if let Some(m) = &joined {
                    self.member_id = m.member_id.clone();
                    self.joined_again = true;
                    self.membership = joined;
                    settled = true;
                    unsettled.fetch_sub(1, Ordering::SeqCst);
                }
                continue;
            }
            if settled && unsettled.load(Ordering::SeqCst) == 0 {
                return Ok(self);
            }
            if !first_heartbeat {
                tokio::time::sleep(HEARTBEAT_POLL).await;
            }
            first_heartbeat = false;
            let membership = self.membership.as_ref().expect("checked above");
            match self.client.heartbeat(membership).await {
                Standing::Member => {
                    if !settled {
                        settled = true;
                        unsettled.fetch_sub(1, Ordering::SeqCst);
                    }
                }
                standing => {
                    if standing == Standing::Expelled {
                        self.member_id.clear();
                    }
                    self.membership = None;
                    if settled {
                        settled = false;
                        unsettled.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
    }
}

fn partitions_text(partitions: &[PartitionRef]) -> String {
    if partitions.is_empty() {
        return "no partitions".to_owned();
    }
    partitions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `poll`: heartbeat, join again if told to, then poll and commit each
/// partition the member holds.
/// A member no step subscribed (a schedule the parser did not check, e.g.
/// one cut down by hand) makes the run unknown.
pub(super) async fn poll<R: Runtime>(
    live: &mut Live<R>,
    number: usize,
    step: &MemberPoll,
) -> Result<RunStatus, RunError> {
    let name = &step.member;
    let Some(member) = live.members.get(name) else {
        return Ok(not_subscribed(name));
    };
    let (worker, membership) = (member.worker, member.membership.clone());
    if let Some(membership) = &membership {
        let standing = live.scripted_client(worker).heartbeat(membership).await;
        standing_after(live.members.get_mut(name).expect("validated"), standing);
    }
    if live.members[name].membership.is_none() {
        let group = live.members[name].group.clone();
        rejoin(live, number, &group).await?;
    }
    let Some(membership) = live.members[name].membership.clone() else {
        live.log.line(format!(
            "step {number}: {name} holds no membership to poll with"
        ));
        return Ok(RunStatus::Completed);
    };
    for partition in &membership.partitions {
        let position = live.members[name].positions.get(partition).copied();
        let from = match position {
            Some(from) => from,
            None => {
                // Where the group left it: its committed offset, or the
                // beginning (auto.offset.reset=earliest).
                let op = live
                    .scripted_client(worker)
                    .committed(&membership.group, partition, membership.coordinator)
                    .await?;
                let committed = match (&op.body, op.kind) {
                    (Body::Committed(c), OpType::Ok) => c.offset,
                    _ => {
                        live.log.line(format!(
                            "step {number}: {name} cannot read {}'s committed offset of {partition}: {}",
                            membership.group,
                            op.error.unwrap_or_default()
                        ));
                        continue;
                    }
                };
                u64::try_from(committed.unwrap_or(-1)).unwrap_or(0)
            }
        };
        let node = live.view().await?.leader_of(partition);
        let mut poll = Poll::new(partition.clone(), from, node);
        poll.group = Some(membership.group.clone());
        let op = live.scripted_client(worker).poll_as(poll).await?;
        let read = op
            .read()
            .map(|(_, read)| (read.records.len(), read.next_offset()));
        let next = read.and_then(|(_, next)| next).unwrap_or(from);
        live.members
            .get_mut(name)
            .expect("validated")
            .positions
            .insert(partition.clone(), next);
        let mut line = format!(
            "step {number}: {name} polls {partition} at {from} -> {:?} ({} records)",
            op.kind,
            read.map_or(0, |(n, _)| n)
        );
        if next > from {
            let offset = i64::try_from(next).unwrap_or(i64::MAX);
            let (op, standing) = live
                .scripted_client(worker)
                .commit_as_member(&membership, partition, offset)
                .await?;
            line.push_str(&format!(", commits {offset} -> {:?}", op.kind));
            let member = live.members.get_mut(name).expect("validated");
            if standing_after(member, standing) {
                live.log.line(line);
                break;
            }
        }
        live.log.line(line);
    }
    Ok(RunStatus::Completed)
}

fn not_subscribed(name: &str) -> RunStatus {
    RunStatus::Unknown(format!(
        "member {name} was not subscribed by an earlier step"
    ))
}

/// Applies what a heartbeat or a commit said; whether the membership ended.
fn standing_after(member: &mut ScriptedMember, standing: Standing) -> bool {
    match standing {
        Standing::Member => return false,
        Standing::Rejoin | Standing::Lost => {}
        Standing::Expelled => member.member_id.clear(),
    }
    member.membership = None;
    true
}

/// `unsubscribe`: the member leaves its group (LeaveGroup; not recorded).
pub(super) async fn unsubscribe<R: Runtime>(
    live: &mut Live<R>,
    number: usize,
    name: &str,
) -> RunStatus {
    let Some(member) = live.members.remove(name) else {
        return not_subscribed(name);
    };
    if let Some(membership) = &member.membership {
        live.scripted_client(member.worker).leave(membership).await;
    }
    live.log
        .line(format!("step {number}: {name} leaves {}", member.group));
    RunStatus::Completed
}
