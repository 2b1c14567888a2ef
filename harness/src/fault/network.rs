//! The network faults: links cut through the proxies (nemesis/partition.rs)
//! until a `heal`, which ends them all, or `{ heal = id }`, which ends the
//! one cut that named itself so. Each names its nodes as a [`Cut`]'s target
//! (one-way: its two ends), resolved when it fires.
//!
//! [`Cut`]: crate::schedule::Cut

use super::spec::{Dated, Draw, Ends, Fires, Mix, Needs, Role, Shade, Shape, Spec, Undo};
use crate::schedule::{Fault, OnHeal, OneWay};

/// A cut of `shape` on the nodes it names.
const fn cut(
    name: &'static str,
    is: fn(&Fault) -> bool,
    shape: Shape,
    draw: Draw,
    needs: Needs,
) -> Spec {
    Spec {
        name,
        role: Role::Network,
        is,
        fires: Fires::Partition(shape),
        dated: Dated::Not,
        undo: Undo::Heal,
        ends: Ends::Nothing,
        draw,
        needs,
        mix: Mix::Default,
        excuse: None,
        shade: Shade::Plain,
    }
}

/// No byte between the node and any other node or etcd, either way.
pub const ISOLATE: Spec = cut(
    "isolate",
    |f| matches!(f, Fault::Isolate(_)),
    Shape::Isolate,
    Draw::AnyNode(|_, node| Fault::Isolate(node.into())),
    Needs::Links,
);

/// A random minority on one side, everyone else on the other.
pub const MAJORITY_MINORITY: Spec = cut(
    "majority-minority",
    |f| matches!(f, Fault::MajorityMinority(_)),
    Shape::MajorityMinority,
    Draw::Minority(|minority| Fault::MajorityMinority(minority.into())),
    Needs::Links,
);

/// No byte from `from` reaches `to`; the other direction still flows.
pub const ONE_WAY: Spec = cut(
    "one-way",
    |f| matches!(f, Fault::OneWay(_)),
    Shape::OneWay,
    Draw::TwoNodes(|from, to| {
        Fault::OneWay(OneWay {
            from,
            to,
            id: None,
            on_heal: OnHeal::Resume,
        })
    }),
    Needs::Links,
);

/// The node sees both halves; the halves do not see each other.
pub const BRIDGE: Spec = cut(
    "bridge",
    |f| matches!(f, Fault::Bridge(_)),
    Shape::Bridge,
    Draw::AnyNode(|_, node| Fault::Bridge(node.into())),
    Needs::Links,
);

/// No byte between the node and etcd.
pub const NODE_FROM_ETCD: Spec = cut(
    "node-from-etcd",
    |f| matches!(f, Fault::NodeFromEtcd(_)),
    Shape::NodeFromEtcd,
    Draw::AnyNode(|_, node| Fault::NodeFromEtcd(node.into())),
    Needs::Etcd,
);

/// No byte between the workload's clients and the node; its other links
/// flow. The one network fault of a system whose brokers never dial one
/// another, so only there in a default mix: the reference broker's campaign
/// figures (docs/campaigns.md) are of the mix without it.
pub const NODE_FROM_CLIENTS: Spec = Spec {
    mix: Mix::WithoutPeers,
    ..cut(
        "node-from-clients",
        |f| matches!(f, Fault::NodeFromClients(_)),
        Shape::NodeFromClients,
        Draw::AnyNode(|_, node| Fault::NodeFromClients(node.into())),
        Needs::Nothing,
    )
};

/// Every cut and request fault ended (`"heal"`), or the one cut named
/// (`{ heal = "cut-1" }`).
pub const HEAL: Spec = Spec::undo(
    "heal",
    |f| matches!(f, Fault::Heal | Fault::HealCut(_)),
    Fires::Heal,
    Ends::Cuts,
);
