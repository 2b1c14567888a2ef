//! The harness's segment reader (what `epochal inspect` and every checker
//! read replicas with): any bytes as a `.log` file give batches and findings,
//! never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let walk = epochal::reader::segment::walk_segment(
        std::path::Path::new("t-0/00000000000000000000.log"),
        data,
    );
    let _ = format!("{walk:?}");
});
