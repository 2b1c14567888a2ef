//! Targeted fault sequences: moves of the campaign nemesis that fire several
//! faults in one order against one partition's roles, back to back or when
//! a state is seen, rather than one fault per gap. A single random fault per
//! gap reaches the orders the documented bugs need only by luck: a replica
//! bounced inside its session (crash or power loss, restarted at once, so its
//! etcd lease never lapsed) and then the leader gone before it caught up
//! (KIP-380); an idempotent producer's batch replicated but unanswered,
//! the replica that holds it bounced (losing its producer state where it
//! has no snapshot) and elected before the producer's resend arrives
//! (KAFKA-5435); every ISR
//! member out while a replica with an empty log is live (the KIP-101
//! thread's unclean-election appendix); the controller stopped with
//! decisions in flight until another takes over, then back (KAFKA-532).
//! Each shape is one of those orders,
//! with targets by role resolved as each fault fires; nothing here knows a
//! broker setting, so the same shapes run on every setting.
//!
//! Pure functions of the generator and their inputs ([`draw`], [`hit`]);
//! play.rs fires the faults and awaits the states. A sequence first makes
//! the cluster whole ([`make_whole`]), then may leave up to two nodes out
//! whatever the plan's `max_faulted` (the overlap is its point), never
//! every node; the plan's undo picks bring them back.

use super::state::State;
use super::{Kind, Plan};
use crate::fault::Draw;
use crate::node::NodeId;
use crate::random::SplitMix64;
use kafka_protocol::messages::ApiKey;

use crate::schedule::{Api, Condition, Fault, PartitionRef, Requests, Sender, Target};

/// Which of a partition's replicas a hit takes, resolved when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The partition's leader as etcd names it, unless the sequence hit it
    /// already (then the sequence has reached what it was after and ends).
    Leader,
    /// A live ISR member that is not the leader and that the sequence has
    /// not hit (a live replica outside the ISR when there is none).
    Follower,
    /// The controller as etcd names it, if it is up and not hit already.
    Controller,
    /// A live node that is not the controller and that the sequence has
    /// not hit: one the controller then has decisions to send.
    NotController,
}

/// What a slot's node is awaited to do, with a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    InIsr(usize),
    OutOfIsr(usize),
    Leads(usize),
    /// The controller key names another node than the slot's.
    ControllerMoved(usize),
}

/// One move of a sequence. Slots number the nodes hit so far, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// A process fault on the node the role names when it fires; that node
    /// takes the next slot.
    Hit(Kind, Role),
    /// Restart the slot's node (dead by an earlier hit), inside its session
    /// when it comes at once.
    Restart(usize),
    Resume(usize),
    /// A process fault on the slot's node again (it is up: restarted or
    /// never taken out).
    Again(Kind, usize),
    /// A live ISR follower's replica fetches to the leader held at the
    /// proxy (a one-way cut narrowed to the Fetch API on that one link, so
    /// a controller's requests on it still pass): the follower stays in
    /// the ISR until the lag time passes (replica.lag.time.max.ms, 10 s)
    /// and keeps its lease, so acks=all writes stall in the leader's and
    /// the other followers' logs, appended and unanswered. The follower
    /// takes the next slot.
    Stall,
    /// The next move fires once the state is seen; when `ms` pass first the
    /// sequence ends there.
    Until(Watch, u64),
    /// As `Until`, but the sequence goes on when `ms` pass first: a state
    /// some systems pass through and others never reach (a bounced replica
    /// leaving its ISR, with KIP-380's fencing).
    Settle(Watch, u64),
    /// The next move fires after `ms` (time for writes to reach the logs).
    Wait(u64),
}

/// The orders a sequence takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    /// An ISR follower bounced, then the leader taken out before the
    /// bounced replica caught up: it may be elected with what its bounce
    /// left it.
    BounceThenKillLeader,
    /// The leader paused, then a follower bounced while it cannot catch up
    /// from anyone; whoever takes over must not elect the bounced replica
    /// as if nothing happened (bugs/kip-380-restart-at-takeover's order).
    BounceAtTakeover,
    /// Writes stalled (a follower cut from the leader, still in the ISR),
    /// a follower that holds them crash-bounced and back in the ISR, then
    /// the stalled follower and the leader taken out: the bounced replica
    /// is the only live ISR member, leads, and takes the producers'
    /// resends of writes it holds but nobody answered
    /// (bugs/idempotent-retry-after-failover's order, reached with KIP-380's
    /// fencing on too: the bounce leaves the ISR, and the replica rejoins at
    /// once since the stall holds the high watermark).
    FailoverToBounced,
    /// The leader paused, a follower power-lost (its unflushed log cut) and
    /// restarted, the last ISR member paused: the cut replica is the only
    /// live one. Once it leads (an unclean election, or KIP-380's without
    /// fencing) the paused ones resume and follow it.
    EmptyReplicaLeads,
    /// A broker that is not the controller bounced (so the controller has
    /// LeaderAndIsr and UpdateMetadata to send it), the controller paused
    /// as the restart returns, held until another broker takes the
    /// controller key, then resumed: what it had in flight or queued
    /// reaches brokers after the new controller's decisions, and only the
    /// controller epoch tells them apart (KAFKA-532;
    /// power-cases/found-kafka-532-isolated-controller's order).
    StaleController,
}

impl Shape {
    pub const ALL: [Shape; 5] = [
        Shape::BounceThenKillLeader,
        Shape::BounceAtTakeover,
        Shape::FailoverToBounced,
        Shape::EmptyReplicaLeads,
        Shape::StaleController,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Shape::BounceThenKillLeader => "bounce-then-kill-leader",
            Shape::BounceAtTakeover => "bounce-at-takeover",
            Shape::FailoverToBounced => "failover-to-bounced",
            Shape::EmptyReplicaLeads => "empty-replica-leads",
            Shape::StaleController => "stale-controller",
        }
    }
}

/// How long a sequence waits for a leadership change: a paused node's lease
/// (2 s in campaigns) must lapse and the controller elect, on a loaded
/// machine.
pub const TAKEOVER_MS: u64 = 8_000;

/// How long it waits for a restarted replica to catch up and rejoin an ISR.
pub const REJOIN_MS: u64 = 5_000;

/// How long a `Settle` waits for a state that may never come: a bounced
/// controller's successor is elected only once its lease lapses (2 s in
/// campaigns), and only then takes the bounced replica out of its ISRs.
pub const SETTLE_MS: u64 = 4_000;

/// How long a stall lasts before the follower holding its writes is hit:
/// a produce round and a follower's fetch, on a loaded machine.
pub const STALL_WRITES_MS: u64 = 300;

/// A drawn sequence: its shape, the partition whose roles it names, and its
/// moves.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    pub shape: Shape,
    pub partition: PartitionRef,
    pub moves: Vec<Move>,
}

/// Draws a sequence among the shapes the allowed kinds can make (a kind the
/// campaign leaves out, e.g. power loss on a system without replica files,
/// leaves out the shapes that need it). `None` when none can be made.
pub fn draw(random: &mut SplitMix64, plan: &Plan, partitions: &[PartitionRef]) -> Option<Sequence> {
    let allowed = |k: Kind| plan.weights.contains_key(&k);
    let bounces: Vec<Kind> = [Kind::Crash, Kind::PowerLoss]
        .into_iter()
        .filter(|&k| allowed(k))
        .collect();
    let shapes: Vec<Shape> = Shape::ALL
        .into_iter()
        .filter(|s| match s {
            Shape::BounceThenKillLeader => !bounces.is_empty(),
            Shape::BounceAtTakeover => allowed(Kind::Pause) && !bounces.is_empty(),
            Shape::FailoverToBounced => {
                allowed(Kind::Pause)
                    && allowed(Kind::Crash)
                    && (allowed(Kind::OneWay) || allowed(Kind::HoldRequests))
            }
            Shape::EmptyReplicaLeads => allowed(Kind::Pause) && allowed(Kind::PowerLoss),
            Shape::StaleController => allowed(Kind::Pause) && !bounces.is_empty(),
        })
        .collect();
    if shapes.is_empty() || partitions.is_empty() {
        return None;
    }
    let shape = shapes[random.index(shapes.len())];
    let partition = partitions[random.index(partitions.len())].clone();
    let bounce = bounces.get(random.index(bounces.len())).copied();
    let kills: Vec<Kind> = [Kind::Crash, Kind::PowerLoss, Kind::Pause]
        .into_iter()
        .filter(|&k| allowed(k))
        .collect();
    let kill = kills[random.index(kills.len())];
    use Move::*;
    let moves = match shape {
        Shape::BounceThenKillLeader => vec![
            Hit(bounce?, Role::Follower),
            Restart(0),
            Hit(kill, Role::Leader),
        ],
        Shape::BounceAtTakeover => vec![
            Hit(Kind::Pause, Role::Leader),
            Hit(bounce?, Role::Follower),
            Restart(1),
        ],
        Shape::FailoverToBounced => vec![
            Stall,
            Wait(STALL_WRITES_MS),
            Hit(Kind::Crash, Role::Follower),
            Restart(1),
            // With KIP-380's fencing the bounce takes it out of the ISR
            // (until then etcd still lists it); it rejoins at once, since
            // the stall holds the high watermark.
            Settle(Watch::OutOfIsr(1), SETTLE_MS),
            Until(Watch::InIsr(1), REJOIN_MS),
            Again(Kind::Pause, 0),
            Hit(
                if random.chance(1, 2) {
                    Kind::Crash
                } else {
                    Kind::Pause
                },
                Role::Leader,
            ),
            Until(Watch::Leads(1), TAKEOVER_MS),
            // Back, so the ISR reaches min.insync.replicas again and the
            // resends are taken.
            Resume(0),
        ],
        Shape::EmptyReplicaLeads => vec![
            Hit(Kind::Pause, Role::Leader),
            Hit(Kind::PowerLoss, Role::Follower),
            Restart(1),
            Hit(Kind::Pause, Role::Follower),
            Until(Watch::Leads(1), TAKEOVER_MS),
            Resume(0),
            Resume(2),
        ],
        Shape::StaleController => vec![
            Hit(bounce?, Role::NotController),
            Restart(0),
            Hit(Kind::Pause, Role::Controller),
            Until(Watch::ControllerMoved(1), TAKEOVER_MS),
            Resume(1),
        ],
    };
    Some(Sequence {
        shape,
        partition,
        moves,
    })
}

/// What etcd says of the sequence's partition now, and who the controller is.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    pub leader: Option<NodeId>,
    pub isr: Vec<NodeId>,
    pub replicas: Vec<NodeId>,
    pub controller: Option<NodeId>,
}

/// Nodes paused or dead at once a sequence may reach: the plan's limit or
/// two, but never every node.
pub fn limit(plan: &Plan, state: &State) -> usize {
    plan.max_faulted
        .max(2)
        .min(state.nodes.len().saturating_sub(1))
}

/// The fault a hit fires now, on the node its role names among those up,
/// or `None` (the sequence ends): nobody fits the role, the leader is one
/// the sequence hit already, or the fault would take out more than
/// [`limit`] allows.
pub fn hit(
    random: &mut SplitMix64,
    plan: &Plan,
    state: &State,
    kind: Kind,
    role: Role,
    roles: &Roles,
    slots: &[NodeId],
) -> Option<(NodeId, Fault)> {
    let up = state.up();
    let faulted = state.down.len() + state.paused.len();
    if !kind.is_process() || faulted + 1 > limit(plan, state) || up.len() < 2 {
        return None;
    }
    let fresh = |n: &NodeId| up.contains(n) && !slots.contains(n);
    let node = match role {
        Role::Leader => roles.leader.filter(fresh)?,
        Role::Follower => {
            let not_leader = |n: &&NodeId| Some(**n) != roles.leader && fresh(n);
            let mut pool: Vec<NodeId> = roles.isr.iter().filter(not_leader).copied().collect();
            if pool.is_empty() {
                pool = roles.replicas.iter().filter(not_leader).copied().collect();
            }
            *pool.get(random.index(pool.len()))?
        }
        Role::Controller => roles.controller.filter(fresh)?,
        Role::NotController => {
            // Only once a controller is known: the point is a node it has
            // decisions to send.
            let controller = roles.controller?;
            let pool: Vec<NodeId> = up
                .iter()
                .filter(|&&n| n != controller && fresh(&n))
                .copied()
                .collect();
            *pool.get(random.index(pool.len()))?
        }
    };
    Some((node, process_fault(kind, Target::Node(node))?))
}

/// The fault an `Again` move fires on its slot's node, if that node is up
/// and the fault stays within [`limit`].
pub fn again(
    plan: &Plan,
    state: &State,
    kind: Kind,
    slot: usize,
    slots: &[NodeId],
) -> Option<Fault> {
    let node = *slots.get(slot)?;
    let faulted = state.down.len() + state.paused.len();
    if !state.up().contains(&node) || faulted + 1 > limit(plan, state) {
        return None;
    }
    process_fault(kind, Target::Node(node))
}

/// The hold a `Stall` move fires: a live ISR follower's (not the leader,
/// not in a slot) Fetch requests to the live leader.
pub fn stall(
    random: &mut SplitMix64,
    state: &State,
    roles: &Roles,
    slots: &[NodeId],
) -> Option<(NodeId, Fault)> {
    let up = state.up();
    let leader = roles.leader.filter(|l| up.contains(l))?;
    let pool: Vec<NodeId> = roles
        .isr
        .iter()
        .filter(|&&n| n != leader && up.contains(&n) && !slots.contains(&n))
        .copied()
        .collect();
    let node = *pool.get(random.index(pool.len()))?;
    let fault = Fault::HoldRequests(Requests {
        from: Sender::Broker(Target::Node(node)),
        to: Target::Node(leader),
        api: Api(ApiKey::Fetch),
    });
    Some((node, fault))
}

/// The fault of a kind drawn as a node that is up (a process fault) on
/// `target`; `None` for any other kind.
fn process_fault(kind: Kind, target: Target) -> Option<Fault> {
    match kind.spec().draw {
        Draw::NodeUp(make) => Some(make(target)),
        _ => None,
    }
}

/// The undo a `Restart` or `Resume` move fires on its slot's node, if that
/// node is down (or paused) now.
pub fn undo(state: &State, step: Move, slots: &[NodeId]) -> Option<Fault> {
    match step {
        Move::Restart(i) => {
            let n = *slots.get(i)?;
            state
                .down
                .contains(&n)
                .then_some(Fault::Restart(Target::Node(n)))
        }
        Move::Resume(i) => {
            let n = *slots.get(i)?;
            state
                .paused
                .contains(&n)
                .then_some(Fault::Resume(Target::Node(n)))
        }
        _ => None,
    }
}

/// The undoes that make the cluster whole before a sequence's first move:
/// the cut healed first (a broker cannot start cut off from etcd), the
/// database brought back, then every paused node resumed and every dead one
/// restarted. A sequence's
/// shapes are orders of faults on live replicas; starting from whatever
/// the last picks left out would make most of them unreachable, since a
/// campaign's cluster is whole only for moments.
pub fn make_whole(state: &State) -> Vec<Fault> {
    let mut undoes = Vec::new();
    if state.cut {
        undoes.push(Fault::Heal);
    }
    undoes.extend(state.database.and_then(crate::nemesis::database::undo));
    undoes.extend(state.paused.iter().map(|&n| Fault::Resume(Target::Node(n))));
    undoes.extend(state.down.iter().map(|&n| Fault::Restart(Target::Node(n))));
    undoes
}

/// The node a [`make_whole`] undo brings back, if it names one.
pub fn undone_node(undo: &Fault) -> Option<NodeId> {
    match undo {
        Fault::Resume(Target::Node(n)) | Fault::Restart(Target::Node(n)) => Some(*n),
        _ => None,
    }
}

/// The partition a sequence plays on once the cluster is whole: the drawn
/// one unless another has a larger ISR (a replica just restarted is out of
/// its ISRs until it caught up, and a sequence on a partition whose ISR is
/// its leader alone finds no follower to bounce and no clean election to
/// wait for). `isr_sizes` are in the order of `partitions`.
pub fn partition_for(
    drawn: &PartitionRef,
    partitions: &[PartitionRef],
    isr_sizes: &[usize],
) -> PartitionRef {
    let size_of = |p: &PartitionRef| {
        partitions
            .iter()
            .position(|q| q == p)
            .and_then(|i| isr_sizes.get(i).copied())
            .unwrap_or(0)
    };
    let best = partitions.iter().map(size_of).max().unwrap_or(0);
    if size_of(drawn) >= best {
        return drawn.clone();
    }
    // The first with the largest ISR after the drawn one, round the ring,
    // so the choice stays spread over the partitions.
    let start = partitions.iter().position(|q| q == drawn).unwrap_or(0);
    (1..=partitions.len())
        .map(|k| &partitions[(start + k) % partitions.len()])
        .find(|p| size_of(p) == best)
        .unwrap_or(drawn)
        .clone()
}

/// The condition an `Until` awaits, as a schedule writes it.
pub fn condition(watch: Watch, partition: &PartitionRef, slots: &[NodeId]) -> Option<Condition> {
    let slot = match watch {
        Watch::InIsr(i) | Watch::OutOfIsr(i) | Watch::Leads(i) | Watch::ControllerMoved(i) => i,
    };
    let node = *slots.get(slot)?;
    let partition = partition.clone();
    Some(match watch {
        Watch::InIsr(_) => Condition::InIsr {
            node,
            partition,
            member: true,
        },
        Watch::OutOfIsr(_) => Condition::InIsr {
            node,
            partition,
            member: false,
        },
        Watch::Leads(_) => Condition::LeaderIs { partition, node },
        Watch::ControllerMoved(_) => Condition::ControllerIs { node, is: false },
    })
}

#[cfg(test)]
mod tests;
