//! What a fault names, by the shape of what the schedule writes after its
//! verb: a fault's verb says what it does (src/fault/), its [`Payload`]
//! what it acts on. Code that reads a fault's targets, cut or link asks
//! for its payload and never lists the verbs that share a shape.

use super::model::{Cut, Fault, OneWay, Target, TruncateLog};
use super::requests::{DelayedRequests, Requests};

/// A fault's payload, borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Payload<'a> {
    /// One target: the process and disk faults that take a node out, and
    /// their undos.
    Target(&'a Target),
    /// A partition of the nodes a target names.
    Cut(&'a Cut),
    /// No byte from one node to another.
    OneWay(&'a OneWay),
    TruncateLog(&'a TruncateLog),
    /// One link's requests of one API (the release too).
    Requests(&'a Requests),
    DelayedRequests(&'a DelayedRequests),
    /// `heal` of everything.
    Heal,
    /// `{ heal = id }`.
    HealCut(&'a str),
    /// The system's database: its faults name no node.
    Database,
}

impl Fault {
    pub fn payload(&self) -> Payload<'_> {
        match self {
            Fault::Pause(t)
            | Fault::Resume(t)
            | Fault::Crash(t)
            | Fault::Restart(t)
            | Fault::Stop(t)
            | Fault::Start(t)
            | Fault::PowerLoss(t) => Payload::Target(t),
            Fault::TruncateLog(t) => Payload::TruncateLog(t),
            Fault::Isolate(c)
            | Fault::MajorityMinority(c)
            | Fault::Bridge(c)
            | Fault::NodeFromEtcd(c)
            | Fault::NodeFromClients(c)
            | Fault::NodeFromDatabase(c) => Payload::Cut(c),
            Fault::OneWay(w) => Payload::OneWay(w),
            Fault::HoldRequests(r)
            | Fault::DropRequests(r)
            | Fault::DuplicateRequests(r)
            | Fault::ReleaseRequests(r) => Payload::Requests(r),
            Fault::DelayRequests(d) => Payload::DelayedRequests(d),
            Fault::Heal => Payload::Heal,
            Fault::HealCut(id) => Payload::HealCut(id),
            Fault::PauseDatabase
            | Fault::ResumeDatabase
            | Fault::CrashDatabase
            | Fault::RestartDatabase => Payload::Database,
        }
    }

    /// The single target of a fault that names one (all but one-way,
    /// truncate-log, the request faults and heal).
    pub fn target(&self) -> Option<&Target> {
        match self.payload() {
            Payload::Target(t) => Some(t),
            Payload::Cut(c) => Some(&c.target),
            _ => None,
        }
    }

    /// The link and API of a request fault, or of its release.
    pub fn requests(&self) -> Option<Requests> {
        match self.payload() {
            Payload::Requests(r) => Some(r.clone()),
            Payload::DelayedRequests(d) => Some(d.requests()),
            _ => None,
        }
    }
}
