//! The request-level fences of a control request (LeaderAndIsr,
//! UpdateMetadata), checked before any partition is looked at, in Kafka's
//! order: the broker epoch (KIP-380, decided by the dispatcher, since it may
//! wait for the session to switch leases), then the controller epoch
//! (KAFKA-532). A request either fence stops is refused whole: every partition
//! answers the refusal's code and state-change.log records its reason. This
//! module decides and words the refusal; each handler logs and answers it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kafka_protocol::ResponseError;

use crate::config::BrokerConfig;
use crate::replica::fetcher::FetcherManager;
use crate::replica::manager::ReplicaManager;
use crate::state_change_log::StateChangeLog;

/// What every control request (LeaderAndIsr, StopReplica, UpdateMetadata)
/// touches besides what it applies: the lock that orders them, the replicas
/// whose controller and session epochs fence them (and which they change),
/// the broker's fencing settings and peers, the follower fetchers they
/// start and stop, and the state-change log they are recorded in.
pub struct Control<'a> {
    pub config: &'a BrokerConfig,
    pub replicas: &'a Arc<ReplicaManager>,
    pub fetchers: &'a FetcherManager,
    pub state_changes: &'a StateChangeLog,
    /// The broker's control lock: held by a control request across its
    /// fences, its apply and its state-change.log lines ([`Control::lock`]).
    pub control_lock: &'a Mutex<()>,
}

impl Control<'_> {
    /// Takes the control lock for one control request's fences, apply and
    /// log lines (a poisoned lock is taken as it is: what it guards is the
    /// order of requests, not data).
    pub fn lock(&self) -> MutexGuard<'_, ()> {
        self.control_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a control request is refused whole.
pub enum Refusal {
    /// Addressed to another registration of this broker than its session's
    /// (KIP-380); the dispatcher's reason.
    StaleBrokerEpoch { reason: String },
    /// From an older controller than the newest this broker has seen
    /// (KAFKA-532).
    StaleControllerEpoch {
        code: ResponseError,
        requested: i32,
        newest: i32,
    },
}

impl Refusal {
    /// The error every partition of the request answers.
    pub fn code(&self) -> ResponseError {
        match self {
            Refusal::StaleBrokerEpoch { .. } => ResponseError::StaleBrokerEpoch,
            Refusal::StaleControllerEpoch { code, .. } => *code,
        }
    }

    /// The reason state-change.log records for each partition.
    pub fn reason(&self) -> String {
        match self {
            Refusal::StaleBrokerEpoch { reason } => reason.clone(),
            Refusal::StaleControllerEpoch {
                requested, newest, ..
            } => format!(
                "STALE_CONTROLLER_EPOCH: controller epoch {requested} is older than {newest}"
            ),
        }
    }
}

/// Both fences in order. `stale_broker_epoch` is the dispatcher's verdict on
/// the broker epoch `requested`; only a request that passes it, and whose
/// registration the session has not moved past since (below), has its
/// controller epoch observed, which raises the newest one this broker holds
/// when it is newer. Called with [`Control::lock`] held, and the request
/// applied before it is released.
pub fn refusal(
    control: &Control<'_>,
    controller_epoch: i32,
    requested: i64,
    stale_broker_epoch: Option<String>,
) -> Option<Refusal> {
    if let Some(reason) = stale_broker_epoch.or_else(|| moved_past(control, requested)) {
        return Some(Refusal::StaleBrokerEpoch { reason });
    }
    control
        .replicas
        .observe_controller_epoch(controller_epoch, control.config.controller_epoch_fencing)
        .err()
        .map(|code| Refusal::StaleControllerEpoch {
            code,
            requested: controller_epoch,
            newest: control.replicas.controller_epoch(),
        })
}

/// KIP-380's rule again, now: the dispatcher's check ran before awaits (the
/// registration, the topic configs), during which the session may have
/// registered again; a request addressed to a registration older than the
/// session's is refused, whatever the check said then. (A campaign found a
/// stale controller's LeaderAndIsr, checked against the old registration
/// just before the session moved, applied under the new lease:
/// suites/found/fencing-race-kafka-5600-seed-1.)
fn moved_past(control: &Control<'_>, requested: i64) -> Option<String> {
    let ours = control.replicas.session_broker_epoch()?;
    (control.config.broker_epoch_fencing && requested >= 0 && requested < ours).then(|| {
        format!(
            "STALE_BROKER_EPOCH: addressed to broker epoch {requested}, this broker's is {ours} \
             (the session registered again after the request was checked)"
        )
    })
}
