//! epochal-faults: the fault vocabulary and its primitives.
//!
//! Holds the [`proxy`] behind the `epochal-proxy` binary (Toxiproxy's HTTP API plus
//! a true partition toxic) and [`toxiproxy_client`], the async client the harness
//! drives it with (one proxy per directed link). Still to come: `fault` (kinds
//! and targets), `signal` (SIGSTOP/SIGCONT/SIGKILL/SIGTERM through nix) and `mesh`
//! (one proxy per directed link of a cluster).

pub mod proxy;
pub mod toxiproxy_client;
