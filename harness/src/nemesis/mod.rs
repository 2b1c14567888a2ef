//! The nemesis: faults fired at a running cluster. Targets resolve when a fault
//! fires; partitions go through the proxies (`partition`), disk faults cut a
//! stopped node's files (`disk`), process faults go through the runtime.

pub mod disk;
pub mod partition;
