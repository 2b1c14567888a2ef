//! A subscribed consumer's group calls ([groups]): the membership round
//! (`rebalance`: JoinGroup, the range assignment when this member leads,
//! SyncGroup), heartbeats, commits as a member of a generation, and a
//! client's crash. Jepsen's Kafka workload subscribes through the Java
//! client; this is the same protocol spoken by the harness's own client, so
//! every step of it is in the history.
//!
//! Outcomes: a round refused by the coordinator (an error code) is `fail`;
//! one whose answer never came is `info` (the member may have joined), and
//! like every `info` it retires the client's process: the consumer starts
//! over as a new member.

use std::time::Duration;

use kafka_protocol::ResponseError;

use super::client::RecordingClient;
use crate::history::{Body, ClientCrash, Commit, Op, OpType, Rebalance, WriteError};
use crate::kafka_client::{ClientError, MemberTimeouts, encode_assignment};
use crate::node::NodeId;
use crate::schedule::PartitionRef;

/// The timeouts every subscribed consumer joins with: the broker's shortest
/// session (Kafka's group.min.session.timeout.ms default, 6 s) and a
/// rebalance as long, so a crashed member holds its group up for at most
/// that long.
pub const MEMBER_TIMEOUTS: MemberTimeouts = MemberTimeouts {
    session_ms: 6_000,
    rebalance_ms: 6_000,
};

/// How often a member heartbeats: well inside its session, as the Java
/// consumer's default of a third of it.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(1_000);

/// A member of a group, as its last completed round left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub group: String,
    pub member_id: String,
    pub generation: i32,
    pub coordinator: NodeId,
    pub partitions: Vec<PartitionRef>,
}

/// What one completed round gave this member.
struct Round {
    generation: i32,
    member: String,
    assigned: Vec<PartitionRef>,
    leader: String,
    /// When this member led: how many members it was given to assign.
    members: Option<usize>,
}

/// What a heartbeat or a member's commit says of the membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Still a member of its generation.
    Member,
    /// The group is rebalancing, or moved on to a newer generation: join
    /// again with the same member id.
    Rejoin,
    /// The coordinator does not know the member (its session expired):
    /// join again as a new member.
    Expelled,
    /// The coordinator moved or could not be reached: find it again.
    Lost,
}

impl Standing {
    fn of(result: &Result<(), ClientError>) -> Standing {
        match result {
            Ok(()) => Standing::Member,
            Err(e) => Standing::of_error(e),
        }
    }

    fn of_error(error: &ClientError) -> Standing {
        match error {
            ClientError::Broker { code, .. } => {
                let is = |e: ResponseError| e.code() == *code;
                if is(ResponseError::RebalanceInProgress) || is(ResponseError::IllegalGeneration) {
                    Standing::Rejoin
                } else if is(ResponseError::UnknownMemberId) {
                    Standing::Expelled
                } else {
                    Standing::Lost
                }
            }
            _ => Standing::Lost,
        }
    }
}

/// One member's partitions: topic → partition numbers.
pub type Assignment = Vec<(String, Vec<i32>)>;

/// The range assignor (Kafka's `RangeAssignor`): for each topic, its
/// partitions in order split into contiguous runs, one per subscribed
/// member in member-id order, the first `partitions % members` members one
/// longer.
pub fn range_assignment(
    members: &[(String, Vec<String>)],
    partitions: &[PartitionRef],
) -> Vec<(String, Assignment)> {
    let mut out: Vec<(String, Assignment)> = members
        .iter()
        .map(|(member, _)| (member.clone(), Vec::new()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    let mut topics: Vec<&str> = partitions.iter().map(|p| p.topic.as_str()).collect();
    topics.sort_unstable();
    topics.dedup();
    for topic in topics {
        let mut of_topic: Vec<i32> = partitions
            .iter()
            .filter(|p| p.topic == topic)
            .map(PartitionRef::wire_partition)
            .collect();
        of_topic.sort_unstable();
        let subscribed: Vec<usize> = out
            .iter()
            .enumerate()
            .filter(|(_, (member, _))| {
                members
                    .iter()
                    .any(|(m, topics)| m == member && topics.iter().any(|t| t == topic))
            })
            .map(|(i, _)| i)
            .collect();
        if subscribed.is_empty() {
            continue;
        }
        let (each, extra) = (
            of_topic.len() / subscribed.len(),
            of_topic.len() % subscribed.len(),
        );
        let mut next = 0;
        for (rank, &i) in subscribed.iter().enumerate() {
            let take = each + usize::from(rank < extra);
            let run = of_topic[next..next + take].to_vec();
            next += take;
            if !run.is_empty() {
                out[i].1.push((topic.to_owned(), run));
            }
        }
    }
    out
}

impl RecordingClient {
    /// One membership round of `group` (JoinGroup, then the assignment if
    /// this member leads, then SyncGroup), asking `first` for the
    /// coordinator, as `member_id` ("" to join as a new member: the id the
    /// coordinator hands out is left in it, KIP-394); records
    /// the `rebalance` op. `partitions`: every partition of the subscribed
    /// topics, which the leader assigns.
    pub async fn rebalance(
        &mut self,
        group: &str,
        member_id: &mut String,
        partitions: &[PartitionRef],
        first: NodeId,
    ) -> Result<(Op, Option<Membership>), WriteError> {
        let mut topics: Vec<String> = partitions.iter().map(|p| p.topic.clone()).collect();
        topics.sort_unstable();
        topics.dedup();
        let mut round = Rebalance {
            group: group.to_owned(),
            topics: topics.clone(),
            node: None,
            generation: None,
            member: None,
            partitions: None,
            leader: None,
            members: None,
        };
        let process = self.invoke(Body::Rebalance(round.clone()))?;
        // JoinGroup waits for every member to rejoin, up to the rebalance
        // timeout, and a first round for the initial delay too.
        let timeout = self.shared.request_timeout.max(
            Duration::from_millis(MEMBER_TIMEOUTS.rebalance_ms as u64) + Duration::from_secs(4),
        );
        let deadline = tokio::time::Instant::now() + timeout;
        let coordinator = match self.coordinator(group, first, deadline).await {
            Ok(node) => node,
            Err(e) => {
                let op = self.complete(
                    process,
                    OpType::Fail,
                    Body::Rebalance(round),
                    Some(e.to_string()),
                )?;
                return Ok((op, None));
            }
        };
        round.node = Some(coordinator);
        let result = self
            .join_and_sync(group, member_id, &topics, partitions, coordinator, deadline)
            .await;
        match result {
            Ok(Round {
                generation,
                member,
                assigned,
                leader,
                members,
            }) => {
                round.generation = Some(generation);
                round.member = Some(member.clone());
                round.partitions = Some(assigned.clone());
                round.leader = Some(leader);
                round.members = members;
                let op = self.complete(process, OpType::Ok, Body::Rebalance(round), None)?;
                Ok((
                    op,
                    Some(Membership {
                        group: group.to_owned(),
                        member_id: member,
                        generation,
                        coordinator,
                        partitions: assigned,
                    }),
                ))
            }
            Err(e) => {
                self.connections.remove(&coordinator);
                // A coordinator that does not know the id (a new one, or the
                // member's session ended): join as a new member, as the Java
                // consumer resets its id on UNKNOWN_MEMBER_ID.
                if Standing::of_error(&e) == Standing::Expelled {
                    member_id.clear();
                }
                let kind = if matches!(
                    e,
                    ClientError::Broker { .. }
                        | ClientError::Refused { .. }
                        | ClientError::Connect { .. }
                ) {
                    OpType::Fail
                } else {
                    OpType::Info
                };
                let op =
                    self.complete(process, kind, Body::Rebalance(round), Some(e.to_string()))?;
                Ok((op, None))
            }
        }
    }

    /// JoinGroup and SyncGroup on `coordinator`: the generation, this
    /// member's id and its partitions.
    async fn join_and_sync(
        &mut self,
        group: &str,
        member_id: &mut String,
        topics: &[String],
        partitions: &[PartitionRef],
        coordinator: NodeId,
        deadline: tokio::time::Instant,
    ) -> Result<Round, ClientError> {
        let left = || deadline.saturating_duration_since(tokio::time::Instant::now());
        let client = self.connection(coordinator, left()).await?;
        let joined = client
            .join_group(group, member_id, topics, MEMBER_TIMEOUTS, left())
            .await?;
        let led = joined.leader == joined.member_id;
        let members = led.then_some(joined.members.len());
        let assignments = if led {
            let mut encoded = Vec::new();
            for (member, assignment) in range_assignment(&joined.members, partitions) {
                encoded.push((member, encode_assignment(&assignment)?));
            }
            encoded
        } else {
            Vec::new()
        };
        let mine = client
            .sync_group(
                group,
                joined.generation,
                &joined.member_id,
                assignments,
                left(),
            )
            .await?;
        let mut assigned: Vec<PartitionRef> = mine
            .into_iter()
            .flat_map(|(topic, ps)| {
                ps.into_iter()
                    .map(move |p| PartitionRef::new(&topic, u32::try_from(p).unwrap_or(0)))
            })
            .collect();
        assigned.sort();
        Ok(Round {
            generation: joined.generation,
            member: joined.member_id,
            assigned,
            leader: joined.leader,
            members,
        })
    }

    /// A heartbeat of `member` (not recorded: it changes nothing the
    /// checkers judge); what it says of the membership.
    pub async fn heartbeat(&mut self, member: &Membership) -> Standing {
        let timeout = self.shared.request_timeout;
        let result = match self.connection(member.coordinator, timeout).await {
            Ok(client) => {
                client
                    .heartbeat(&member.group, member.generation, &member.member_id, timeout)
                    .await
            }
            Err(e) => Err(e),
        };
        if result.is_err() {
            self.connections.remove(&member.coordinator);
        }
        Standing::of(&result)
    }

    /// Leaves the group at the end of the run (not recorded), so the last
    /// members' partitions need no session timeout to move.
    pub async fn leave(&mut self, member: &Membership) {
        let timeout = self.shared.request_timeout.min(Duration::from_secs(2));
        if let Ok(client) = self.connection(member.coordinator, timeout).await {
            let _ = client
                .leave_group(&member.group, &member.member_id, timeout)
                .await;
        }
    }

    /// Commits `offset` of `partition` as `member` and records the op; what
    /// the answer says of the membership.
    pub async fn commit_as_member(
        &mut self,
        member: &Membership,
        partition: &PartitionRef,
        offset: i64,
    ) -> Result<(Op, Standing), WriteError> {
        let commit = Commit {
            group: member.group.clone(),
            partition: partition.clone(),
            offset,
            node: Some(member.coordinator),
            generation: Some(member.generation),
            member: Some(member.member_id.clone()),
            deleted: false,
        };
        let process = self.invoke(Body::Commit(commit.clone()))?;
        let timeout = self.shared.request_timeout;
        let (sent, result) = self.send_commit(member.coordinator, &commit, timeout).await;
        let standing = Standing::of(&result);
        let op = match result {
            Ok(()) => self.complete(process, OpType::Ok, Body::Commit(commit), None)?,
            Err(e) => {
                self.connections.remove(&member.coordinator);
                let kind = super::commit::commit_outcome(sent, &e);
                self.complete(process, kind, Body::Commit(commit), Some(e.to_string()))?
            }
        };
        Ok((op, standing))
    }

    /// The client crashes: records `client-crash` (invoke and `info`),
    /// drops every connection without a goodbye and retires its process.
    pub fn crash(&mut self, group: Option<&str>) -> Result<Op, WriteError> {
        let body = Body::ClientCrash(ClientCrash {
            group: group.map(str::to_owned),
        });
        let process = self.invoke(body.clone())?;
        self.drop_connections();
        self.complete(process, OpType::Info, body, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_assignment_splits_each_topic_in_member_order() {
        let members = vec![
            ("m-b".to_owned(), vec!["t".to_owned()]),
            ("m-a".to_owned(), vec!["t".to_owned(), "u".to_owned()]),
        ];
        let partitions: Vec<PartitionRef> = (0..3)
            .map(|p| PartitionRef::new("t", p))
            .chain([PartitionRef::new("u", 0)])
            .collect();
        let got = range_assignment(&members, &partitions);
        assert_eq!(
            got,
            vec![
                (
                    "m-a".to_owned(),
                    vec![("t".to_owned(), vec![0, 1]), ("u".to_owned(), vec![0])]
                ),
                ("m-b".to_owned(), vec![("t".to_owned(), vec![2])]),
            ]
        );
        // More members than partitions: the last go without.
        let many: Vec<(String, Vec<String>)> = (0..4)
            .map(|i| (format!("m{i}"), vec!["u".to_owned()]))
            .collect();
        let got = range_assignment(&many, &[PartitionRef::new("u", 0)]);
        assert_eq!(got[0].1, vec![("u".to_owned(), vec![0])]);
        assert!(got[1..].iter().all(|(_, a)| a.is_empty()));
    }
}
