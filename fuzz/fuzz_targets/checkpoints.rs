//! Checkpoint files, as the harness's reader and the broker's recovery read
//! them: `leader-epoch-checkpoint`, `replication-offset-checkpoint` and
//! `recovery-point-offset-checkpoint` from any bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let file = Path::new("t-0/leader-epoch-checkpoint");
    let _ = epochal_broker::storage::checkpoint::parse_epoch_checkpoint(file, data);
    let _ = epochal_broker::storage::checkpoint::parse_offset_checkpoint(file, data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = epochal::reader::checkpoint::parse_leader_epochs(file, text);
        let _ = epochal::reader::checkpoint::parse_offsets(file, text);
    }
});
