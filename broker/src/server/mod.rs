//! The Kafka-protocol server: listener and framing, dispatch by API key and
//! version, and one handler per API.

pub mod dispatch;
pub mod handlers;
pub mod listener;
pub mod metadata_cache;
