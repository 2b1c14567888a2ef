//! One member of a group (Kafka's `MemberMetadata`): what it offered, what it
//! was assigned, the request of its that is parked, and when its session ends.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::api::{JoinOutcome, Protocol, SyncOutcome};

pub(super) struct Member {
    pub(super) id: String,
    /// A static member's group instance id (KIP-345): the id outlives the
    /// member id, which a rejoin of the same instance replaces.
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout: Duration,
    /// KIP-62: how long a rebalance waits for this member to rejoin.
    pub(super) rebalance_timeout: Duration,
    /// In the member's order of preference, names unique.
    pub(super) protocols: Vec<Protocol>,
    /// The leader's assignment for it in the current generation.
    pub(super) assignment: Bytes,
    /// Its JoinGroup, parked until the rebalance completes.
    pub(super) join_waiter: Option<oneshot::Sender<JoinOutcome>>,
    /// Its SyncGroup, parked until the leader's arrives.
    pub(super) sync_waiter: Option<oneshot::Sender<SyncOutcome>>,
    /// Joined in the current rebalance with no id it had before. Such a member
    /// cannot heartbeat yet, so a parked join does not keep it alive: it is
    /// dropped after the new-member timeout (KAFKA-7610, KAFKA-9752).
    pub(super) is_new: bool,
    /// When the member is dropped unless a heartbeat, join or sync renews it.
    /// None while nothing is expected of it (Kafka's satisfied heartbeat
    /// expectation, not rescheduled until its parked request is answered).
    pub(super) session_deadline: Option<Instant>,
}

impl Member {
    pub(super) fn awaiting_join(&self) -> bool {
        self.join_waiter.is_some()
    }

    /// Kafka's `hasSatisfiedHeartbeat` for a member whose deadline passed: a
    /// member parked in a join or sync is waiting on the coordinator, not
    /// failing — unless it is new.
    pub(super) fn excused_from_heartbeat(&self) -> bool {
        !self.is_new && (self.join_waiter.is_some() || self.sync_waiter.is_some())
    }

    pub(super) fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol)
    }

    /// Its metadata for `protocol`, empty if it does not offer it.
    pub(super) fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    /// Its vote in protocol selection: its most preferred of the protocols
    /// every member supports.
    pub(super) fn vote<'a>(&self, candidates: &[&'a str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .find_map(|p| candidates.iter().find(|c| **c == p.name).copied())
    }

    pub(super) fn renew_session(&mut self, now: Instant) {
        self.session_deadline = Some(now + self.session_timeout);
    }
}

/// A member's protocols with later duplicates of a name dropped. Kafka's
/// request collection may carry a name twice, and Kafka would then count the
/// member twice when it looks for a protocol every member supports; the first
/// occurrence is the member's preference, so only it is kept.
pub(super) fn dedup_protocols(protocols: Vec<Protocol>) -> Vec<Protocol> {
    let mut kept: Vec<Protocol> = Vec::with_capacity(protocols.len());
    for protocol in protocols {
        if !kept.iter().any(|k| k.name == protocol.name) {
            kept.push(protocol);
        }
    }
    kept
}

/// Random per process, so that ids do not repeat across broker restarts.
static ID_SEED: LazyLock<RandomState> = LazyLock::new(RandomState::new);
/// Makes every id unique within the process whatever the clock does.
static ID_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new member id, `{client_id}-{uuid-like suffix}` as Kafka's
/// `generateMemberId` makes with `UUID.randomUUID`. The suffix has the shape of
/// a version-4 UUID: 64 bits of a seeded hash of the wall clock and a counter,
/// then 48 bits of the counter itself, so two ids of one process never collide.
pub(super) fn generate_member_id(client_id: &str) -> String {
    let count = ID_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut hasher = ID_SEED.build_hasher();
    hasher.write_u128(nanos);
    hasher.write_u64(count);
    let random = hasher.finish();
    format!(
        "{client_id}-{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        random >> 32,
        (random >> 16) & 0xffff,
        random & 0x0fff,
        0x8000 | ((count >> 48) & 0x3fff),
        count & 0xffff_ffff_ffff,
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn protocol(name: &str, metadata: &'static [u8]) -> Protocol {
        Protocol {
            name: name.to_owned(),
            metadata: Bytes::from_static(metadata),
        }
    }

    #[test]
    fn member_ids_are_client_id_and_a_unique_uuid_shaped_suffix() {
        let ids: HashSet<String> = (0..1000).map(|_| generate_member_id("app")).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            let suffix = id.strip_prefix("app-").expect(id);
            let groups: Vec<usize> = suffix.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
            assert!(suffix.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        }
        assert!(generate_member_id("").starts_with('-'));
    }

    #[test]
    fn duplicate_protocol_names_keep_the_first() {
        let kept = dedup_protocols(vec![
            protocol("range", b"1"),
            protocol("sticky", b"2"),
            protocol("range", b"3"),
        ]);
        assert_eq!(
            kept,
            vec![protocol("range", b"1"), protocol("sticky", b"2")]
        );
    }
}
