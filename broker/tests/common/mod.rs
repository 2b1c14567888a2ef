//! Test support for the cluster tests: a real etcd, the real broker binary and
//! a small blocking Kafka client on kafka-protocol's messages. Every process is
//! killed and reaped by a Drop guard, so a failing assertion leaves nothing behind.

#![allow(dead_code)]

pub mod broker_process;
pub mod cluster;
pub mod etcd;
pub mod forwarder;
pub mod kafka_client;

use std::time::{Duration, Instant};

/// Poll `cond` until it returns Some or `timeout` passes; panics naming `what`.
pub fn await_some<T>(what: &str, timeout: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = cond() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`await_some`], printing `context()` (e.g. a broker's log) on timeout.
pub fn await_some_or<T>(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> Option<T>,
    context: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = cond() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!(
                "timed out after {timeout:?} waiting for {what}\n{}",
                context()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
