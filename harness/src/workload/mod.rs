//! The workload: the harness's own Kafka client, the op-recording client every
//! client operation goes through (client.rs), the idempotent producer it can
//! be (producer.rs) and the background workers that drive it. A
//! client operation's outcome is data (ok, a broker error code, a timeout, a
//! lost connection) because the history's ok/fail/info rests on it.
//! Nothing here may depend on the broker crate: it speaks Kafka's wire protocol
//! through `kafka-protocol` only, so it works against any Kafka-format broker.

pub mod background;
pub mod client;
pub mod kafka_client;
pub mod producer;
pub mod view;

pub use kafka_client::{
    ClientError, Compression, FetchOptions, Fetched, FetchedRecord, KafkaClient, Metadata,
    MetadataBroker, MetadataPartition, MetadataTopic, OffsetSpec, ProduceOptions, ProduceRecord,
    Produced, ProducerIdAndEpoch, ProducerStamp, REPLICA_OFFSETS_DEADLINE, ReplicaOffsets,
};
