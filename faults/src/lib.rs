//! epochal-faults: the fault vocabulary and its primitives.
//!
//! Holds the [`proxy`] behind the `epochal-proxy` binary (Toxiproxy's HTTP API plus
//! a true partition toxic) and [`toxiproxy_client`], the async client the harness
//! drives it with (one proxy per directed link), and [`signal`]: pause, resume, kill
//! and terminate a pid and read its state from `/proc`. Still to come: `fault`
//! (kinds and targets).

pub mod proxy;
pub mod signal;
pub mod toxiproxy_client;
