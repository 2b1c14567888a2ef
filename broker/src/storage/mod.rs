//! The broker's storage, in Kafka's on-disk format.
