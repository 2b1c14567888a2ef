//! The application's consumer-group membership as history ops (app.rs has
//! the rest): a member's JoinGroup and the SyncGroup that follows it with
//! the generation and member id the join gave are one `rebalance` op
//! (history/group_op.rs), as the harness's own subscribed consumer writes
//! them. It invokes when the proxy passed the JoinGroup and is `ok` when
//! the SyncGroup was answered without error, with the generation, member
//! id, leader, how many members the leader was given to assign, and the
//! partitions the assignment handed out; `app` names the assignor the
//! group chose. A JoinGroup or SyncGroup answered with an error is `fail`
//! (the member is in no generation by it: Kafka's clients join again), one
//! never answered, or a join no sync followed, `info`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::app_op::{AppOp, node_of, origin};
use crate::history::{Body, OpType, Rebalance};
use crate::reader::app_frames::{Call, Exchange, JoinGroup, Joined};
use crate::topic_partition::PartitionRef;

/// A join answered, waiting for its sync.
struct Joining {
    invoke_ns: u64,
    connection: (String, u64),
    app: Map<String, Value>,
    body: Rebalance,
}

/// Every member's round of membership, as its requests come.
pub(super) struct AppRebalances {
    until_ns: u64,
    /// (group, member id, generation) → its join.
    joined: HashMap<(String, String, i32), Joining>,
    done: Vec<AppOp>,
}

impl AppRebalances {
    pub fn new(until_ns: u64) -> AppRebalances {
        AppRebalances {
            until_ns,
            joined: HashMap::new(),
            done: Vec::new(),
        }
    }

    /// Takes one JoinGroup or SyncGroup exchange; anything else passes.
    pub fn take(&mut self, exchange: &Exchange, (invoke_ns, complete_ns): (u64, Option<u64>)) {
        match &exchange.call {
            Call::JoinGroup(join) => self.join(exchange, join, (invoke_ns, complete_ns)),
            Call::SyncGroup(sync) => {
                let key = (sync.group.clone(), sync.member.clone(), sync.generation);
                let Some(mut round) = self.joined.remove(&key) else {
                    // A sync of a join not recorded: nothing to pair.
                    return;
                };
                let (kind, at, error) = match (&sync.answer, complete_ns) {
                    (Some((0, partitions)), Some(at)) => {
                        round.body.partitions = Some(
                            partitions
                                .iter()
                                .map(|(t, p)| PartitionRef::new(t, *p as u32))
                                .collect(),
                        );
                        (OpType::Ok, at, None)
                    }
                    (Some((code, _)), Some(at)) => {
                        round.app.insert("error_code".into(), json!(code));
                        (
                            OpType::Fail,
                            at,
                            Some(format!("SyncGroup answered error {code}")),
                        )
                    }
                    _ => (
                        OpType::Info,
                        self.until_ns.max(invoke_ns),
                        Some("SyncGroup never answered".to_owned()),
                    ),
                };
                self.push(round, kind, at, error);
            }
            _ => {}
        }
    }

    fn join(
        &mut self,
        exchange: &Exchange,
        join: &JoinGroup,
        (invoke_ns, complete_ns): (u64, Option<u64>),
    ) {
        let body = Rebalance {
            group: join.group.clone(),
            topics: join.topics.clone(),
            node: node_of(&exchange.proxy),
            generation: None,
            member: None,
            partitions: None,
            leader: None,
            members: None,
        };
        let mut round = Joining {
            invoke_ns,
            connection: (exchange.proxy.clone(), exchange.connection),
            app: origin(exchange),
            body,
        };
        match (&join.answer, complete_ns) {
            (
                Some(Joined {
                    error_code: 0,
                    generation,
                    member,
                    leader,
                    protocol,
                    members,
                }),
                Some(_),
            ) => {
                round.app.insert("protocol".into(), json!(protocol));
                round.body.generation = Some(*generation);
                round.body.member = Some(member.clone());
                round.body.leader = Some(leader.clone());
                round.body.members = (leader == member).then_some(*members);
                let key = (join.group.clone(), member.clone(), *generation);
                // A join again before syncing: the earlier round is over.
                if let Some(earlier) = self.joined.insert(key, round) {
                    let why = "joined again before syncing".to_owned();
                    self.push(earlier, OpType::Info, self.until_ns, Some(why));
                }
            }
            (Some(joined), Some(at)) => {
                let code = joined.error_code;
                round.app.insert("error_code".into(), json!(code));
                let why = format!("JoinGroup answered error {code}");
                self.push(round, OpType::Fail, at, Some(why));
            }
            _ => {
                let why = "JoinGroup never answered".to_owned();
                self.push(round, OpType::Info, self.until_ns, Some(why));
            }
        }
    }

    fn push(&mut self, round: Joining, kind: OpType, at: u64, error: Option<String>) {
        let asked = Rebalance {
            generation: None,
            member: None,
            partitions: None,
            leader: None,
            members: None,
            ..round.body.clone()
        };
        let body = if kind == OpType::Ok {
            round.body
        } else {
            asked.clone()
        };
        self.done.push(AppOp {
            invoke_ns: round.invoke_ns,
            complete_ns: at.max(round.invoke_ns),
            connection: round.connection,
            kind,
            body: Body::Rebalance(body),
            asked: Some(Body::Rebalance(asked)),
            error,
            app: Value::Object(round.app),
        });
    }

    /// Every round's op; a join no sync followed ends `info`.
    pub fn finish(mut self) -> Vec<AppOp> {
        let rounds: Vec<Joining> = self.joined.drain().map(|(_, r)| r).collect();
        for round in rounds {
            let why = "no SyncGroup followed".to_owned();
            self.push(round, OpType::Info, self.until_ns, Some(why));
        }
        self.done
    }
}
