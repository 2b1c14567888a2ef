//! What a fault kind is, as one value: the [`Spec`] each kind's file fills
//! in (process.rs, disk.rs, network.rs, requests.rs) and the registry in
//! mod.rs lists. Every field is data, or a function of the schedule's
//! types, so each layer above asks a kind what it does instead of matching
//! on every kind: the nemesis reads how it fires ([`Fires`]) and what dates
//! it ([`Dated`]); a campaign how it is drawn ([`Draw`]) and what a system
//! must offer for it ([`Needs`], [`Mix`]); the checkers what it excuses
//! ([`Spec::excuse`]); the timeline and the shrink what undoes it ([`Undo`],
//! [`Ends`]), and the timeline how it is shaded ([`Shade`]).

use epochal_faults::proxy::toxics::RequestAction;

use crate::random::SplitMix64;
use crate::schedule::{Fault, PartitionRef, Target};

/// One verb of the schedule and the history, fault or undo, as a value.
#[derive(Debug)]
pub struct Spec {
    /// The schedule's key and the history's `f`.
    pub name: &'static str,
    pub role: Role,
    /// Whether a schedule's fault is of this verb (the schedule's parser
    /// made it; exactly one verb's `is` holds for each fault).
    pub is: fn(&Fault) -> bool,
    /// What the nemesis does to fire it.
    pub fires: Fires,
    /// What the nemesis reads once it took effect, for the checkers.
    pub dated: Dated,
    /// A fault: what undoes it. An undo: [`Undo::Never`].
    pub undo: Undo,
    /// An undo: the faults it ends. A fault: [`Ends::Nothing`].
    pub ends: Ends,
    /// How a campaign draws it and when it fits the cluster.
    pub draw: Draw,
    /// What a system must offer for a campaign to draw it.
    pub needs: Needs,
    /// Whether a campaign that names no kinds draws it.
    pub mix: Mix,
    /// A fault that cuts replicas' logs: the words the excuses give it when
    /// it took an acknowledged write from every member of an ISR
    /// (GUARANTEES.md, "Excuses"). `None`: it excuses no loss.
    pub excuse: Option<&'static str>,
    /// How the report's timeline shades its interval.
    pub shade: Shade,
}

/// What a campaign does with a verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Takes a node out (paused or dead) until it is resumed or restarted.
    Process,
    /// Cuts a node's data on disk (the node must be down).
    Disk,
    /// Cuts links through the proxies until healed.
    Network,
    /// Acts on one link's requests of one Kafka API until released (or
    /// healed: `heal` ends request faults too).
    Requests,
    /// Takes the system's database out (paused or dead) until it is
    /// resumed or restarted; no broker is named.
    Database,
    /// Undoes a fault; never picked as a fault itself.
    Undo,
}

/// How the report's timeline shades a fault's interval (report/timeline.rs
/// gives each its colour).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shade {
    /// As every fault.
    Plain,
    /// A node dead.
    Down,
    /// A node paused.
    Paused,
    /// A log cut, in an instant.
    CutLog,
}

/// What undoes a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    /// `resume` of the same node.
    Resume,
    /// `restart` or `start` of the same node.
    Start,
    /// `heal`, or `{ heal = id }` for a cut that named itself `id`.
    Heal,
    /// `release-requests` of the same link and API, or `heal`.
    Release,
    /// `resume-database`.
    ResumeDatabase,
    /// `restart-database`.
    RestartDatabase,
    /// Nothing: it is done once it fired (truncate-log), or it is an undo.
    Never,
}

/// What an undo ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ends {
    /// Nothing: a fault, not an undo.
    Nothing,
    /// The faults undone by this [`Undo`] on the nodes it names.
    OnItsNodes(Undo),
    /// Every cut and request fault in force, or the one cut it names.
    Cuts,
    /// The request fault on the link and API it names.
    Requests,
    /// The database fault undone by this [`Undo`] (there is one database).
    Database(Undo),
}

impl Ends {
    /// Whether an undo that ends this ends a fault undone by `undo`.
    pub fn ends(self, undo: Undo) -> bool {
        match self {
            Ends::Nothing => false,
            Ends::OnItsNodes(own) | Ends::Database(own) => own == undo,
            Ends::Cuts => matches!(undo, Undo::Heal | Undo::Release),
            Ends::Requests => undo == Undo::Release,
        }
    }
}

/// A signal to a running node's process, through the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Pause,
    Resume,
    Kill,
    Stop,
}

/// Which partition the proxies make of the nodes a cut names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Each node from every other node and etcd, either way.
    Isolate,
    /// Each node sees both halves; the halves do not see each other.
    Bridge,
    /// Each node from etcd.
    NodeFromEtcd,
    /// Each node from the workload's clients.
    NodeFromClients,
    /// Each node from the system's database.
    NodeFromDatabase,
    /// The nodes named on one side, everyone else on the other.
    MajorityMinority,
    /// No byte from one node reaches the other.
    OneWay,
}

/// What the nemesis does to fire a verb (nemesis/mod.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fires {
    /// The signal to each node named, refused on one that is not running.
    Signal(Signal),
    /// Each node started on its old data directory, refused on one that
    /// is running.
    Start,
    /// Each node killed if it runs, then every log of it cut back to its
    /// recovery point (nemesis/disk.rs).
    CutEveryLog,
    /// One partition's log cut on each node, refused on one that is running.
    CutOneLog,
    /// Links cut through the proxies.
    Partition(Shape),
    /// The requests of one API on one link acted on by the proxy.
    Requests(RequestAction),
    /// The request fault on one link and API ended.
    Release,
    /// Every cut and request fault ended, or the one cut named.
    Heal,
    /// An act on the system's database through the runtime
    /// (runtime/postgres.rs), refused when the database is not in the
    /// state the act needs.
    Database(DatabaseAct),
}

/// What the nemesis does to the system's database: its whole process tree
/// stopped, continued or killed, or the server started again on its data
/// directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseAct {
    Pause,
    Resume,
    Kill,
    Start,
}

/// What the nemesis reads once a fault took effect, so the checkers can
/// place it (history/fault_op.rs, `Done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dated {
    /// Nothing.
    Not,
    /// etcd's revision (a disk fault: which ISR its cut left).
    Revision,
    /// etcd's revision and when its nodes started (a start: from when on
    /// a node may have fetched back what a disk fault took).
    Started,
}

/// A fault as drawn from a target: `Target::Node` of the node drawn
/// (`Target::Nodes` for a minority of several).
pub type FromTarget = fn(Target) -> Fault;

/// How a campaign draws a fault, when it fits the cluster as the nemesis
/// sees it (campaign/pick.rs), and how it is made from what was drawn.
#[derive(Debug, Clone, Copy)]
pub enum Draw {
    /// Never drawn: an undo, applied when a fault calls for it.
    Never,
    /// A node that is up, named by role, while fewer nodes than the plan
    /// allows are out (and never every node of several).
    NodeUp(FromTarget),
    /// Any node, named by role, while no cut or request fault is in force;
    /// the generator draws what else the fault needs.
    AnyNode(fn(&mut SplitMix64, Target) -> Fault),
    /// A node that is down and one of the partitions, whenever a node is
    /// down.
    NodeDown(fn(&mut SplitMix64, Target, PartitionRef) -> Fault),
    /// A random minority, while nothing is cut and there are three nodes
    /// or more.
    Minority(FromTarget),
    /// A node by role and another named outright, while nothing is cut
    /// and there are two nodes or more.
    TwoNodes(fn(Target, Target) -> Fault),
    /// The system's database, while it runs and is not paused.
    Database(fn() -> Fault),
}

/// What a system must offer for a campaign to draw a kind
/// (campaign/mod.rs, `unsupported`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// Replica files the harness can cut.
    ReplicaFiles,
    /// etcd among its services.
    Etcd,
    /// Links other than its clients': brokers that dial one another, or
    /// services.
    Links,
    /// A database among its services (PostgreSQL).
    Database,
}

/// Whether a campaign that names no kinds draws a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// In every default mix.
    Default,
    /// Only on a system whose brokers never dial one another (there it is
    /// the one network fault).
    WithoutPeers,
    /// Only when a campaign's `--kinds` names it.
    Named,
}

impl Spec {
    /// An undo: never drawn, excuses nothing, undone by nothing.
    pub const fn undo(
        name: &'static str,
        is: fn(&Fault) -> bool,
        fires: Fires,
        ends: Ends,
    ) -> Spec {
        Spec {
            name,
            role: Role::Undo,
            is,
            fires,
            dated: Dated::Not,
            undo: Undo::Never,
            ends,
            draw: Draw::Never,
            needs: Needs::Nothing,
            mix: Mix::Default,
            excuse: None,
            shade: Shade::Plain,
        }
    }
}
