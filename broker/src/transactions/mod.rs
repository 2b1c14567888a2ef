//! The transaction coordinator (KIP-98), built bottom-up: the state of a
//! transactional id and the transitions the client requests make
//! (`state.rs`, pure), and its records in the transaction-state topic
//! (`log_record.rs`, Kafka's format). The partition side — markers, the
//! last stable offset, read_committed — is in `storage::txn` and
//! `replica::txn`.

pub mod log_record;
pub mod state;
