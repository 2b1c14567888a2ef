//! The Kafka-protocol server: listener and framing, dispatch by API key and
//! version, one handler per API, and the context they all share.

pub mod context;
pub mod dispatch;
pub mod handlers;
pub mod listener;
pub mod metadata_cache;
