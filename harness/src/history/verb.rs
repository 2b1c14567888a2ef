//! The fault verbs, listed once. The table below gives each verb's name (the
//! schedule's key and the history's `f`) and what a campaign does with it: a
//! fault it picks (one that takes a node out, cuts links, cuts a disk, or
//! acts on one link's requests of one Kafka API) or an undo it applies
//! (resume, restart, start, heal, release-requests). From it come
//! [`Verb`] (every verb) and [`Kind`] (the verbs a campaign picks), so a new
//! fault is one row here plus its [`Fault`] variant, which [`Verb::of`] maps
//! exhaustively. A test holds the schedule's TOML names to this table.

use serde::{Deserialize, Serialize};

use crate::schedule::Fault;

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
    /// Undoes a fault; never picked as a fault itself.
    Undo,
}

macro_rules! fault_verbs {
    (
        faults { $($kind:ident $kind_name:literal $role:ident,)* }
        undos { $($undo:ident $undo_name:literal,)* }
    ) => {
        /// The fault verbs, as the history's `f` names them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
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

            pub fn name(self) -> &'static str {
                match self {
                    $(Verb::$kind => $kind_name,)*
                    $(Verb::$undo => $undo_name,)*
                }
            }

            pub fn role(self) -> Role {
                match self {
                    $(Verb::$kind => Role::$role,)*
                    $(Verb::$undo => Role::Undo,)*
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

fault_verbs! {
    faults {
        Pause "pause" Process,
        Crash "crash" Process,
        Stop "stop" Process,
        PowerLoss "power-loss" Process,
        TruncateLog "truncate-log" Disk,
        Isolate "isolate" Network,
        MajorityMinority "majority-minority" Network,
        OneWay "one-way" Network,
        Bridge "bridge" Network,
        NodeFromEtcd "node-from-etcd" Network,
        NodeFromClients "node-from-clients" Network,
        HoldRequests "hold-requests" Requests,
        DelayRequests "delay-requests" Requests,
        DropRequests "drop-requests" Requests,
        DuplicateRequests "duplicate-requests" Requests,
    }
    undos {
        Resume "resume",
        Restart "restart",
        Start "start",
        Heal "heal",
        ReleaseRequests "release-requests",
    }
}

impl Verb {
    pub fn of(fault: &Fault) -> Verb {
        match fault {
            Fault::Pause(_) => Verb::Pause,
            Fault::Resume(_) => Verb::Resume,
            Fault::Crash(_) => Verb::Crash,
            Fault::Restart(_) => Verb::Restart,
            Fault::Stop(_) => Verb::Stop,
            Fault::Start(_) => Verb::Start,
            Fault::PowerLoss(_) => Verb::PowerLoss,
            Fault::TruncateLog(_) => Verb::TruncateLog,
            Fault::Isolate(_) => Verb::Isolate,
            Fault::MajorityMinority(_) => Verb::MajorityMinority,
            Fault::OneWay(_) => Verb::OneWay,
            Fault::Bridge(_) => Verb::Bridge,
            Fault::NodeFromEtcd(_) => Verb::NodeFromEtcd,
            Fault::NodeFromClients(_) => Verb::NodeFromClients,
            Fault::HoldRequests(_) => Verb::HoldRequests,
            Fault::DelayRequests(_) => Verb::DelayRequests,
            Fault::DropRequests(_) => Verb::DropRequests,
            Fault::DuplicateRequests(_) => Verb::DuplicateRequests,
            Fault::ReleaseRequests(_) => Verb::ReleaseRequests,
            Fault::Heal | Fault::HealCut(_) => Verb::Heal,
        }
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

impl Kind {
    /// The schedule's verb for it.
    pub fn name(self) -> &'static str {
        self.verb().name()
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
mod tests {
    use super::*;

    #[test]
    fn each_name_parses_back_and_serialises_as_itself() {
        for &verb in Verb::ALL {
            assert_eq!(Verb::from_name(verb.name()), Some(verb));
            assert_eq!(
                serde_json::to_value(verb).unwrap(),
                serde_json::Value::String(verb.name().into())
            );
        }
        for &kind in Kind::ALL {
            assert_eq!(kind.name().parse::<Kind>(), Ok(kind));
            assert_ne!(kind.verb().role(), Role::Undo);
        }
        assert_eq!(
            "resume".parse::<Kind>().unwrap_err().to_string(),
            "\"resume\" is not a fault kind (pause, crash, stop, power-loss, truncate-log, \
             isolate, majority-minority, one-way, bridge, node-from-etcd, node-from-clients, \
             hold-requests, delay-requests, drop-requests, duplicate-requests)"
        );
    }

    /// The schedule's TOML key for each fault is the verb's name here: one
    /// fault of each verb, written by the schedule's serialiser.
    #[test]
    fn the_schedules_names_are_the_tables() {
        let written = |fault: &Fault| -> String {
            match serde_json::to_value(fault).unwrap() {
                serde_json::Value::Object(map) => map.keys().next().unwrap().clone(),
                serde_json::Value::String(word) => word,
                other => panic!("{other}"),
            }
        };
        let faults: Vec<Fault> = [
            "pause = \"b1\"",
            "resume = \"b1\"",
            "crash = \"b1\"",
            "restart = \"b1\"",
            "stop = \"b1\"",
            "start = \"b1\"",
            "power-loss = \"b1\"",
            "truncate-log = { node = \"b1\", partition = \"t-0\", by_records = 2 }",
            "isolate = \"b1\"",
            "majority-minority = \"b1\"",
            "one-way = { from = \"b1\", to = \"b2\" }",
            "bridge = \"b1\"",
            "node-from-etcd = \"b1\"",
            "node-from-clients = \"b1\"",
            "hold-requests = { from = \"clients\", to = \"b1\", api = \"EndTxn\" }",
            "delay-requests = { from = \"b2\", to = \"b1\", api = \"Fetch\", ms = 200 }",
            "drop-requests = { from = \"clients\", to = \"b1\", api = \"Produce\" }",
            "duplicate-requests = { from = \"clients\", to = \"b1\", api = \"Produce\" }",
            "release-requests = { from = \"clients\", to = \"b1\", api = \"EndTxn\" }",
            "heal = \"cut-1\"",
        ]
        .iter()
        .map(|toml_text| toml::from_str(toml_text).unwrap_or_else(|e| panic!("{toml_text}: {e}")))
        .collect();
        let mut verbs: Vec<Verb> = faults.iter().map(Verb::of).collect();
        verbs.sort();
        let mut all = Verb::ALL.to_vec();
        all.sort();
        assert_eq!(verbs, all, "one fault of each verb");
        for fault in &faults {
            assert_eq!(written(fault), Verb::of(fault).name());
        }
    }
}
