//! The database faults, on a system whose brokers keep their state in a
//! database the runtime runs (nisshi over PostgreSQL: runtime/postgres.rs):
//! one broker cut from it through its `b<i>-postgres` proxy until a `heal`,
//! as every cut; the whole server paused (SIGSTOP to its process tree) until
//! `resume-database`; the whole server crashed (SIGKILL to its tree) until
//! `restart-database` starts it again on the same data directory. The run's
//! final heal resumes or restarts it, before any broker is started
//! (run/quiesce.rs).
//!
//! None excuses a loss: with PostgreSQL's `fsync` and `synchronous_commit`
//! on (their defaults, which the runtime keeps), a commit is on disk before
//! the server answers it, so a crash of the server loses nothing a broker
//! was told was committed. A database's power loss (its unflushed writes
//! gone) is not a fault here: docs/schedules.md, "Database faults", says why.
//!
//! A system without a database cannot take them ([`Needs::Database`]): a
//! campaign there never draws them, and a schedule that names one is refused
//! before its cluster starts (fits.rs).

use super::network;
use super::spec::{
    DatabaseAct, Dated, Draw, Ends, Fires, Mix, Needs, Role, Shade, Shape, Spec, Undo,
};
use crate::schedule::Fault;

/// No byte between the node and the database, either way; its client link
/// (and, on a system with peers, its broker links) still flow.
pub const NODE_FROM_DATABASE: Spec = Spec {
    name: "node-from-database",
    is: |f| matches!(f, Fault::NodeFromDatabase(_)),
    fires: Fires::Partition(Shape::NodeFromDatabase),
    draw: Draw::AnyNode(|_, node| Fault::NodeFromDatabase(node.into())),
    needs: Needs::Database,
    ..network::ISOLATE
};

/// A fault on the database as a whole, undone by `undo`.
const fn on_database(
    name: &'static str,
    is: fn(&Fault) -> bool,
    act: DatabaseAct,
    undo: Undo,
    make: fn() -> Fault,
    shade: Shade,
) -> Spec {
    Spec {
        name,
        role: Role::Database,
        is,
        fires: Fires::Database(act),
        dated: Dated::Not,
        undo,
        ends: Ends::Nothing,
        draw: Draw::Database(make),
        needs: Needs::Database,
        mix: Mix::Default,
        excuse: None,
        shade,
    }
}

/// SIGSTOP to the postmaster, then to each of its children: every
/// connection stays open and nothing answers, as a database host that
/// stalls (a VM paused, a disk that hangs).
pub const PAUSE_DATABASE: Spec = on_database(
    "pause-database",
    |f| matches!(f, Fault::PauseDatabase),
    DatabaseAct::Pause,
    Undo::ResumeDatabase,
    || Fault::PauseDatabase,
    Shade::Paused,
);

/// SIGKILL to every process of the server: connections reset, and what it
/// had not committed is gone; what it committed is on disk (fsync on).
pub const CRASH_DATABASE: Spec = on_database(
    "crash-database",
    |f| matches!(f, Fault::CrashDatabase),
    DatabaseAct::Kill,
    Undo::RestartDatabase,
    || Fault::CrashDatabase,
    Shade::Down,
);

pub const RESUME_DATABASE: Spec = Spec::undo(
    "resume-database",
    |f| matches!(f, Fault::ResumeDatabase),
    Fires::Database(DatabaseAct::Resume),
    Ends::Database(Undo::ResumeDatabase),
);

/// The server started on its old data directory and port (it replays its
/// write-ahead log), awaited until it answers a connection.
pub const RESTART_DATABASE: Spec = Spec::undo(
    "restart-database",
    |f| matches!(f, Fault::RestartDatabase),
    Fires::Database(DatabaseAct::Start),
    Ends::Database(Undo::RestartDatabase),
);
