//! The proxy's integration tests, one module per file beside this one, in one
//! test binary: one link and one copy of the shared helpers (`common`)
//! instead of one per file. nextest runs each test in its own process.

mod common;

mod proxy_api;
mod proxy_binary;
mod proxy_clients;
mod proxy_cut_blocked;
mod proxy_data;
mod proxy_requests;
