//! The harness's segment reader (what `epochal inspect` and every checker
//! read replicas with): any bytes as a `.log` file give batches and findings,
//! never a panic. Walked in memory first, then read as `epochal inspect`
//! reads a data directory — the bytes written as `t-0/00000000000000000000.log`
//! beside a leader-epoch-checkpoint and the offset checkpoints, so the offset
//! checks across batches and against the checkpoints run too — and the state
//! read is dumped (`epochal inspect`'s default) and compacted and serialized
//! (`--compact`; what the checkers and snapshots compare). `--json` (the
//! whole state through serde's derived code) is left out: it cost two thirds
//! of the executions. The same bytes are also parsed, in memory, as a
//! producer-state snapshot (`<offset>.snapshot`): a snapshot and findings,
//! never a panic or an allocation sized by a damaged entry count.
#![no_main]
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// `fuzz/target/reader_segment-data/<pid>`, with the files every input shares;
/// directories of processes that are gone are removed.
fn data_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let parent = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/reader_segment-data");
        if let Ok(entries) = std::fs::read_dir(&parent) {
            for entry in entries.flatten() {
                if !Path::new("/proc").join(entry.file_name()).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = parent.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("t-0")).expect("create the fuzz data dir");
        let write = |file: &str, text: &str| {
            std::fs::write(dir.join(file), text).expect("write a checkpoint");
        };
        write("t-0/leader-epoch-checkpoint", "0\n2\n0 0\n1 3\n");
        write("replication-offset-checkpoint", "0\n1\nt 0 2\n");
        write("recovery-point-offset-checkpoint", "0\n1\nt 0 4\n");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let walk =
        epochal::reader::segment::walk_segment(Path::new("t-0/00000000000000000000.log"), data);
    let _ = format!("{walk:?}");
    // In memory only: a second file per input would cost executions, and the
    // directory scan that finds snapshot files is the one segments go through.
    let snapshot = epochal::reader::parse_snapshot(
        Path::new("t-0/00000000000000000004.snapshot"),
        4,
        data,
    );
    let _ = format!("{snapshot:?}");

    let dir = data_dir();
    std::fs::write(dir.join("t-0/00000000000000000000.log"), data).expect("write the segment");
    let state = epochal::reader::read_data_dir(dir).expect("the data dir reads");
    epochal::reader::dump::write_dump(&state, &mut std::io::sink()).expect("a dump to nowhere");
    let compact = state.compact();
    for replica in &compact.replicas {
        let _ = replica.offsets_by_value();
    }
    serde_json::to_string(&compact).expect("the compact state serializes");
});
