//! The classic consumer-group protocol's membership state machine: what Kafka's
//! `GroupCoordinator` and `GroupMetadata` do for JoinGroup, SyncGroup,
//! Heartbeat and LeaveGroup (Kafka 2.x–3.x, before KIP-848).
//!
//! A [`GroupCoordinator`] owns every group this broker coordinates: members,
//! generation, leader, chosen protocol, the leader's assignment, and the timers
//! that end rebalances and expire sessions. It never owns committed offsets and
//! never decides whether this broker is the coordinator of a group: the request
//! handlers answer NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS before they
//! call in, map a group to its offsets partition with [`partition_for`], and call
//! [`GroupCoordinator::unload_partition`] when this broker stops coordinating
//! one. It never holds its lock across an await: parked requests wait on
//! channels, each with the deadline by which the state machine must answer.
//!
//! Static membership (KIP-345) is `static_members.rs`. Out of scope: the
//! consumer protocol of KIP-848, `group.max.size` (KIP-389), and persisting
//! groups to `__consumer_offsets` (a group lives in memory only; unloading
//! forgets it, static members included).
//!
//! Files: the state machine, a pure function of requests and the clock, is
//! `state.rs` (states, JoinGroup and the rebalance), `sync.rs` (SyncGroup),
//! `sessions.rs` (heartbeats, leaves, commits, deadlines) and `member.rs`;
//! `coordinator.rs` puts it behind a lock and runs its timers; `api.rs` holds
//! the plain types the handlers exchange with it (a group's state among
//! them); `error.rs` the one table from our errors to Kafka's codes.

mod api;
mod config;
mod coordinator;
mod error;
mod member;
mod partition;
mod sessions;
mod state;
mod static_members;
mod sync;

#[cfg(test)]
mod state_tests;
#[cfg(test)]
mod static_member_tests;
#[cfg(test)]
mod tests;

pub use api::{
    GroupDescription, GroupListing, GroupState, HeartbeatParams, JoinOutcome, JoinParams,
    JoinRefusal, Joined, JoinedMember, LeaveParams, LeavingMember, MemberDescription, MemberLeft,
    Protocol, SyncOutcome, SyncParams, Synced,
};
pub use config::GroupConfig;
pub use coordinator::GroupCoordinator;
pub use error::GroupError;
pub use partition::{java_string_hash, partition_for};
