//! The disk faults: what a node's files lose, cut by the nemesis
//! (nemesis/disk.rs) while its broker is down. Each cut is recorded per
//! replica with etcd's revision, and a loss of acknowledged writes they took
//! from every ISR member is excused (checker/excuses.rs).

use super::process;
use super::spec::{Dated, Draw, Fires, Needs, Role, Shade, Spec, Undo};
use crate::random::SplitMix64;
use crate::schedule::{Fault, PartitionRef, Target, Truncate, TruncateLog};

/// `power-loss`: the broker killed, then every log of the node cut back to
/// its recovery point, as a machine that lost power keeps only what was
/// flushed. It takes the node out as a crash does, until a restart.
pub const POWER_LOSS: Spec = Spec {
    name: "power-loss",
    is: |f| matches!(f, Fault::PowerLoss(_)),
    fires: Fires::CutEveryLog,
    dated: Dated::Revision,
    draw: Draw::NodeUp(Fault::PowerLoss),
    needs: Needs::ReplicaFiles,
    excuse: Some("power loss"),
    ..process::CRASH
};

/// `truncate-log`: one replica's log of a node that is down cut, once; the
/// node stays as it was (down), so nothing undoes it. Dated, excused and
/// needing replica files as a power loss.
pub const TRUNCATE_LOG: Spec = Spec {
    name: "truncate-log",
    role: Role::Disk,
    is: |f| matches!(f, Fault::TruncateLog(_)),
    fires: Fires::CutOneLog,
    undo: Undo::Never,
    draw: Draw::NodeDown(truncate),
    excuse: Some("truncate-log"),
    shade: Shade::CutLog,
    ..POWER_LOSS
};

/// A campaign's cut of `partition` on `node`: bytes may tear a batch;
/// records cut at a batch boundary; a fraction takes whole segments' worth.
fn truncate(random: &mut SplitMix64, node: Target, partition: PartitionRef) -> Fault {
    Fault::TruncateLog(TruncateLog {
        node,
        partition,
        cut: match random.index(3) {
            0 => Truncate::ByBytes(random.between(1, 400)),
            1 => Truncate::ByRecords(random.between(1, 20)),
            _ => Truncate::Fraction(0.5),
        },
    })
}
