//! The Kafka-protocol server: listener and framing, dispatch by API key and
//! version, one handler per API, the context they all share, and the producer
//! ids InitProducerId hands out.

pub mod context;
pub mod dispatch;
pub mod handlers;
pub mod listener;
pub mod metadata_cache;
pub mod producer_id_manager;
#[cfg(test)]
pub(crate) mod test_support;
