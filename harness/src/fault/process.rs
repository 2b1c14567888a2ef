//! The process faults: a node's broker paused until resumed, killed
//! (`crash`) or stopped gracefully (`stop`) until started again, each
//! through the runtime; and their undos. `restart` and `start` are the same
//! act under two names (a crash is restarted, a stop started, and either
//! undoes either).

use super::spec::{Dated, Draw, Ends, Fires, Mix, Needs, Role, Shade, Signal, Spec, Undo};
use crate::schedule::Fault;

/// A process fault on the node a campaign drew, undone as `undo` says.
const fn process(
    name: &'static str,
    is: fn(&Fault) -> bool,
    signal: Signal,
    undo: Undo,
    make: fn(crate::schedule::Target) -> Fault,
    shade: Shade,
) -> Spec {
    Spec {
        name,
        role: Role::Process,
        is,
        fires: Fires::Signal(signal),
        dated: Dated::Not,
        undo,
        ends: Ends::Nothing,
        draw: Draw::NodeUp(make),
        needs: Needs::Nothing,
        mix: Mix::Default,
        excuse: None,
        shade,
    }
}

/// SIGSTOP: the broker holds its connections and answers nothing.
pub const PAUSE: Spec = process(
    "pause",
    |f| matches!(f, Fault::Pause(_)),
    Signal::Pause,
    Undo::Resume,
    Fault::Pause,
    Shade::Paused,
);

/// SIGKILL: the broker dies with whatever it had not written.
pub const CRASH: Spec = process(
    "crash",
    |f| matches!(f, Fault::Crash(_)),
    Signal::Kill,
    Undo::Start,
    Fault::Crash,
    Shade::Down,
);

/// SIGTERM, then the broker's own shutdown.
pub const STOP: Spec = process(
    "stop",
    |f| matches!(f, Fault::Stop(_)),
    Signal::Stop,
    Undo::Start,
    Fault::Stop,
    Shade::Down,
);

pub const RESUME: Spec = Spec::undo(
    "resume",
    |f| matches!(f, Fault::Resume(_)),
    Fires::Signal(Signal::Resume),
    Ends::OnItsNodes(Undo::Resume),
);

/// A dead node started on its old data directory; etcd's revision and the
/// start time are recorded, from when on it may hold again what a disk
/// fault took from it.
pub const RESTART: Spec = Spec {
    dated: Dated::Started,
    ..Spec::undo(
        "restart",
        |f| matches!(f, Fault::Restart(_)),
        Fires::Start,
        Ends::OnItsNodes(Undo::Start),
    )
};

/// As [`RESTART`].
pub const START: Spec = Spec {
    dated: Dated::Started,
    ..Spec::undo(
        "start",
        |f| matches!(f, Fault::Start(_)),
        Fires::Start,
        Ends::OnItsNodes(Undo::Start),
    )
};
