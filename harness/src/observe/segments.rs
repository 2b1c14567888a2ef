//! Kafka segments the harness writes itself, from a log it read some other
//! way than from a replica's files: the final read over the protocol
//! (final_read.rs) and a system's database (database.rs). What both share:
//! which topics are the workload's, a segment's file name, the high
//! watermarks' checkpoint, and a directory that must start empty. The
//! harness's reader (`reader/`) reads what they write like any data
//! directory.

use std::io;
use std::path::{Path, PathBuf};

use crate::reader::checkpoint::{CHECKPOINT_VERSION, OffsetEntry, REPLICATION_OFFSET_CHECKPOINT};

/// A Kafka topic whose name starts so is the cluster's own (offsets,
/// transactions), not the workload's.
pub const INTERNAL_TOPIC_PREFIX: &str = "__";

/// Kafka's `Topic.MAX_NAME_LENGTH`.
const TOPIC_NAME_LENGTH_MAX: usize = 249;

/// Kafka's rule for a topic name (`Topic.validate`): 1 to 249 of
/// `[a-zA-Z0-9._-]`, and neither `.` nor `..`. Such a name is also a safe
/// directory name.
pub fn legal_topic_name(name: &str) -> bool {
    (1..=TOPIC_NAME_LENGTH_MAX).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A segment's file name, as Kafka names one: its base offset, 20 digits.
pub fn segment_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.log")
}

/// A `replication-offset-checkpoint` holding `entries`, in Kafka's text form.
pub fn offset_checkpoint_text(entries: &[OffsetEntry]) -> String {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for entry in entries {
        text.push_str(&format!(
            "{} {} {}\n",
            entry.topic, entry.partition, entry.offset
        ));
    }
    text
}

/// Writes `dir`'s `replication-offset-checkpoint`.
pub fn write_high_watermarks(dir: &Path, entries: &[OffsetEntry]) -> Result<(), DirError> {
    let path = dir.join(REPLICATION_OFFSET_CHECKPOINT);
    std::fs::write(&path, offset_checkpoint_text(entries)).map_err(|source| DirError::Io {
        what: "writing",
        path,
        source,
    })
}

/// Why a directory of written segments could not be made ready or written.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// The directory must be new (or empty): a segment left by an earlier
    /// read would be read back as part of this one.
    #[error("{}: the directory is not empty", path.display())]
    NotEmpty { path: PathBuf },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Creates `dir` if absent; refuses one that holds anything.
pub fn prepare_dir(dir: &Path) -> Result<(), DirError> {
    let io = |what| {
        move |source| DirError::Io {
            what,
            path: dir.to_owned(),
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("creating"))?;
    if std::fs::read_dir(dir)
        .map_err(io("listing"))?
        .next()
        .is_some()
    {
        return Err(DirError::NotEmpty {
            path: dir.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_named_as_kafka_names_them() {
        assert_eq!(segment_file_name(0), "00000000000000000000.log");
        assert_eq!(segment_file_name(1234), "00000000000000001234.log");
        assert_eq!(
            segment_file_name(i64::MAX),
            "09223372036854775807.log".to_string()
        );
    }

    #[test]
    fn the_high_watermarks_are_a_checkpoint_the_reader_parses() {
        let entries = vec![
            OffsetEntry {
                topic: "t".into(),
                partition: 0,
                offset: 7,
            },
            OffsetEntry {
                topic: "a-b".into(),
                partition: 3,
                offset: 0,
            },
        ];
        let text = offset_checkpoint_text(&entries);
        assert_eq!(text, "0\n2\nt 0 7\na-b 3 0\n");
        let parsed = crate::reader::checkpoint::parse_offsets(Path::new("x"), &text).unwrap();
        assert_eq!(parsed, entries);
        assert_eq!(offset_checkpoint_text(&[]), "0\n0\n");
    }

    #[test]
    fn the_directory_must_be_new_or_empty() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("final-read");
        prepare_dir(&dir).unwrap();
        prepare_dir(&dir).unwrap();
        std::fs::write(dir.join("00000000000000000000.log"), b"").unwrap();
        let refused = prepare_dir(&dir).unwrap_err();
        assert!(
            matches!(&refused, DirError::NotEmpty { path } if *path == dir),
            "{refused}"
        );
    }

    #[test]
    fn only_topic_names_kafka_allows_become_directories() {
        for good in ["t", "a-b", "a.b_c", &"x".repeat(249)] {
            assert!(legal_topic_name(good), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "../t", "a b", &"x".repeat(250)] {
            assert!(!legal_topic_name(bad), "{bad}");
        }
    }
}
