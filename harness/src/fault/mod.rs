//! The fault kinds: each verb of the schedule and the history — the faults a
//! nemesis fires and the undos that end them — as one value, a [`Spec`]
//! saying how it is recognised in a schedule, how the nemesis fires it and
//! dates it, what undoes it, how a campaign draws it and on which systems,
//! and what loss it excuses. Jepsen packages each fault as one value the
//! same way (its generator, its final generator, its nemesis); the layers
//! above ask a verb's spec ([`Verb::spec`]) rather than matching on every
//! fault.
//!
//! The kinds live by family: process.rs (pause, crash, stop and their
//! undos), disk.rs (power-loss, truncate-log), network.rs (the cuts and
//! `heal`), requests.rs (the request faults and `release-requests`),
//! database.rs (a broker cut from its database, the database paused or
//! crashed, and their undos). The
//! registry below lists them once: from it come [`Verb`] (every verb, as the
//! history's `f` names it) and [`Kind`] (the faults a campaign draws, in the
//! order its plans weigh them: a seed's plan depends on that order, so a new
//! kind goes at the end of its group). A new kind is its spec in its
//! family's file, a line here, and its variant of the schedule's
//! [`Fault`](crate::schedule::Fault) (schedule/model.rs, which parses it);
//! what its spec names must already be known to the nemesis (a new
//! [`Fires`] is new nemesis code).

mod database;
mod disk;
mod fits;
mod network;
mod process;
mod requests;
pub mod spec;

pub use fits::check_system;
pub use spec::{
    DatabaseAct, Dated, Draw, Ends, Fires, Mix, Needs, Role, Shade, Shape, Signal, Spec, Undo,
};

use crate::schedule::Fault;

macro_rules! registry {
    (
        faults { $($kind:ident => $kind_spec:path,)* }
        undos { $($undo:ident => $undo_spec:path,)* }
    ) => {
        /// The fault verbs, as the history's `f` names them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Verb {
            $($kind,)*
            $($undo,)*
        }

        /// The faults a campaign picks from, in the order its plans weigh
        /// them (a seed's plan depends on it). Each has its undo: a paused
        /// node is resumed, a dead one restarted, a cut healed.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Kind {
            $($kind,)*
        }

        impl Verb {
            pub const ALL: &[Verb] = &[$(Verb::$kind,)* $(Verb::$undo,)*];

            /// What the verb is and does.
            pub fn spec(self) -> &'static Spec {
                match self {
                    $(Verb::$kind => &$kind_spec,)*
                    $(Verb::$undo => &$undo_spec,)*
                }
            }

            /// The campaign kind of a verb that is a fault; none for an undo.
            pub fn kind(self) -> Option<Kind> {
                match self {
                    $(Verb::$kind => Some(Kind::$kind),)*
                    $(Verb::$undo => None,)*
                }
            }
        }

        impl Kind {
            pub const ALL: &[Kind] = &[$(Kind::$kind,)*];

            pub fn verb(self) -> Verb {
                match self {
                    $(Kind::$kind => Verb::$kind,)*
                }
            }
        }
    };
}

registry! {
    faults {
        Pause => process::PAUSE,
        Crash => process::CRASH,
        Stop => process::STOP,
        PowerLoss => disk::POWER_LOSS,
        TruncateLog => disk::TRUNCATE_LOG,
        Isolate => network::ISOLATE,
        MajorityMinority => network::MAJORITY_MINORITY,
        OneWay => network::ONE_WAY,
        Bridge => network::BRIDGE,
        NodeFromEtcd => network::NODE_FROM_ETCD,
        NodeFromClients => network::NODE_FROM_CLIENTS,
        HoldRequests => requests::HOLD_REQUESTS,
        DelayRequests => requests::DELAY_REQUESTS,
        DropRequests => requests::DROP_REQUESTS,
        DuplicateRequests => requests::DUPLICATE_REQUESTS,
        NodeFromDatabase => database::NODE_FROM_DATABASE,
        PauseDatabase => database::PAUSE_DATABASE,
        CrashDatabase => database::CRASH_DATABASE,
    }
    undos {
        Resume => process::RESUME,
        Restart => process::RESTART,
        Start => process::START,
        Heal => network::HEAL,
        ReleaseRequests => requests::RELEASE_REQUESTS,
        ResumeDatabase => database::RESUME_DATABASE,
        RestartDatabase => database::RESTART_DATABASE,
    }
}

impl Verb {
    /// The verb of a schedule's fault.
    pub fn of(fault: &Fault) -> Verb {
        Verb::ALL
            .iter()
            .copied()
            .find(|v| (v.spec().is)(fault))
            .unwrap_or_else(|| unreachable!("no verb's spec recognises {fault:?}"))
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn role(self) -> Role {
        self.spec().role
    }

    pub fn from_name(name: &str) -> Option<Verb> {
        Verb::ALL.iter().copied().find(|v| v.name() == name)
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A verb is written as its name.
impl serde::Serialize for Verb {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Verb {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = Verb;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a fault verb")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Verb, E> {
                Verb::from_name(name).ok_or_else(|| {
                    let names: Vec<&str> = Verb::ALL.iter().map(|v| v.name()).collect();
                    E::custom(format!(
                        "unknown fault verb {name:?}, expected one of {}",
                        names.join(", ")
                    ))
                })
            }
        }
        deserializer.deserialize_str(Name)
    }
}

impl Kind {
    /// The schedule's verb for it.
    pub fn name(self) -> &'static str {
        self.verb().name()
    }

    /// What the kind is and does.
    pub fn spec(self) -> &'static Spec {
        self.verb().spec()
    }

    /// Takes a node out (paused or dead) until it is resumed or restarted.
    pub fn is_process(self) -> bool {
        self.verb().role() == Role::Process
    }

    /// Cuts links through the proxies until healed.
    pub fn is_network(self) -> bool {
        self.verb().role() == Role::Network
    }

    /// Acts on one link's requests of one API until released or healed.
    pub fn is_requests(self) -> bool {
        self.verb().role() == Role::Requests
    }

    /// Needs a database among the system's services (database.rs): a
    /// campaign's plan draws these kinds' weights after every other, so a
    /// seed draws as it did before they existed.
    pub fn on_database(self) -> bool {
        self.spec().needs == Needs::Database
    }
}

/// A name that is no [`Kind`]'s; it lists every kind's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a fault kind ({})", Kind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "))]
pub struct KindError {
    pub name: String,
}

impl std::str::FromStr for Kind {
    type Err = KindError;
    fn from_str(s: &str) -> Result<Kind, KindError> {
        Verb::from_name(s)
            .and_then(Verb::kind)
            .ok_or_else(|| KindError { name: s.to_owned() })
    }
}

#[cfg(test)]
mod tests;
