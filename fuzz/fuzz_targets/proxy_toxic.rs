//! The proxy's HTTP API bodies for toxics: any JSON a client posts is read as
//! a toxic and its attributes typed, or refused, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(toxic) = serde_json::from_slice::<epochal_faults::proxy::ToxicJson>(data) {
        let _ = toxic.toxic_kind();
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        for kind in ["latency", "bandwidth", "slow_close", "timeout", "slicer", "limit_data", "reset_peer", "partition"] {
            let _ = epochal_faults::proxy::ToxicKind::from_attributes(kind, &value);
        }
    }
});
