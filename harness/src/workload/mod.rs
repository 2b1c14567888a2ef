//! The workload: the op-recording client every client operation goes through
//! (client.rs), the idempotent producer it can be (producer.rs) and the
//! background workers that drive it, all on the harness's own Kafka client
//! (kafka_client/); subscribed consumers' group calls are subscribe.rs, a
//! transactional producer's transactions txn.rs, a subscribed consumer's
//! (read-process-write) txn_subscribe.rs. A client operation's outcome is data (ok, a broker error
//! code, a timeout, a lost connection) because the history's ok/fail/info
//! rests on it. Nothing here may depend on the broker crate.

pub mod background;
pub mod client;
mod commit;
pub mod lives;
pub mod producer;
mod send;
pub mod send_options;
mod stable;
pub mod subscribe;
pub mod txn;
mod txn_subscribe;
pub mod view;
