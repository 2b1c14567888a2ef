//! epochal-faults: the fault vocabulary and its primitives.
//!
//! Will hold: `fault` (kinds and targets), `signal` (SIGSTOP/SIGCONT/SIGKILL/SIGTERM
//! through nix), the `proxy` behind the `epochal-proxy` binary (Toxiproxy's HTTP API
//! plus a true partition toxic), `toxiproxy_client` (an async client) and `mesh`
//! (one proxy per directed link of a cluster).
