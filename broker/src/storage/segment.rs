//! One log segment: the file `<20-digit base offset>.log` and an in-memory index
//! of the batches in it.
//!
//! A segment holds whole batches back to back, the first starting at the base
//! offset in the file name. The index (every batch's offsets, byte position and
//! size) is rebuilt by recovery when the segment is opened and kept in step by
//! appends and truncation; Kafka's sparse `.index` files are not written. The
//! segment does not validate what it is given: the partition log does that before
//! appending and recovery does it on open.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::StorageError;

/// Where one batch sits in its segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPosition {
    pub base_offset: i64,
    pub last_offset: i64,
    /// Byte position of the batch in the segment file.
    pub position: u64,
    pub size_bytes: u32,
    pub leader_epoch: i32,
    /// The batch header's max timestamp: with the offsets, the time index
    /// ListOffsets searches by timestamp (Kafka keeps a sparse `.timeindex`
    /// file per segment; this broker keeps every batch's, in memory).
    pub max_timestamp: i64,
}

#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    path: PathBuf,
    file: File,
    size_bytes: u64,
    batches: Vec<BatchPosition>,
}

impl Segment {
    /// Kafka's segment file name: the base offset zero-padded to 20 digits.
    pub fn file_name(base_offset: i64) -> String {
        format!("{base_offset:020}.log")
    }

    /// The base offset named by a segment file name, if it is one.
    pub fn parse_file_name(name: &str) -> Option<i64> {
        let digits = name.strip_suffix(".log")?;
        if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// Creates a new empty segment file in `dir`; fails if one exists.
    pub fn create(dir: &Path, base_offset: i64) -> Result<Segment, StorageError> {
        let path = dir.join(Self::file_name(base_offset));
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(StorageError::io("create segment", &path))?;
        super::checkpoint::sync_dir(dir)?;
        Ok(Segment {
            base_offset,
            path,
            file,
            size_bytes: 0,
            batches: Vec::new(),
        })
    }

    /// Opens an existing segment file with an empty index; recovery fills it in
    /// with [`Segment::set_index`].
    pub fn open(path: &Path, base_offset: i64) -> Result<Segment, StorageError> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(StorageError::io("open segment", path))?;
        let size_bytes = file
            .metadata()
            .map_err(StorageError::io("stat segment", path))?
            .len();
        Ok(Segment {
            base_offset,
            path: path.to_path_buf(),
            file,
            size_bytes,
            batches: Vec::new(),
        })
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn batches(&self) -> &[BatchPosition] {
        &self.batches
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The offset after this segment's last batch (its base offset when empty).
    pub fn end_offset(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.base_offset, |b| b.last_offset + 1)
    }

    /// Installs the index recovery built; `valid_bytes` is where the last
    /// validated batch ends, and the file must already have been cut there.
    pub(crate) fn set_index(&mut self, batches: Vec<BatchPosition>, valid_bytes: u64) {
        self.batches = batches;
        self.size_bytes = valid_bytes;
    }

    /// Reads `len` bytes at `position`.
    pub fn read_at(&self, position: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, position)
            .map_err(StorageError::io("read segment", &self.path))?;
        Ok(buf)
    }

    /// Reads up to `buf.len()` bytes at `position`, returning how many were read
    /// (fewer only at the end of the file).
    pub(crate) fn read_some_at(
        &self,
        buf: &mut [u8],
        position: u64,
    ) -> Result<usize, StorageError> {
        let mut filled = 0;
        while filled < buf.len() {
            let n = self
                .file
                .read_at(&mut buf[filled..], position + filled as u64)
                .map_err(StorageError::io("read segment", &self.path))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        Ok(filled)
    }

    /// Appends already-validated batches (`bytes`) whose index entries are
    /// `batches`, with positions relative to the start of `bytes`.
    pub fn append(
        &mut self,
        bytes: &[u8],
        batches: impl IntoIterator<Item = BatchPosition>,
    ) -> Result<(), StorageError> {
        self.file
            .write_all(bytes)
            .map_err(StorageError::io("append to segment", &self.path))?;
        let start = self.size_bytes;
        self.batches.extend(batches.into_iter().map(|mut b| {
            b.position += start;
            b
        }));
        self.size_bytes += bytes.len() as u64;
        Ok(())
    }

    /// Index of the first batch whose last offset is ≥ `offset`: the batch that
    /// contains `offset`, or the next one.
    pub fn batch_index_for(&self, offset: i64) -> usize {
        self.batches.partition_point(|b| b.last_offset < offset)
    }

    /// Removes every batch whose last offset is ≥ `offset`, so a point inside a
    /// batch removes the whole batch, as Kafka's `LogSegment.truncateTo` does.
    /// Returns the number of bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64, StorageError> {
        let keep = self.batch_index_for(offset);
        self.truncate_batches(keep)
    }

    /// Keeps the first `keep` batches and cuts the file after them.
    pub(crate) fn truncate_batches(&mut self, keep: usize) -> Result<u64, StorageError> {
        let new_size = self
            .batches
            .get(keep)
            .map_or(self.size_bytes, |b| b.position);
        let removed = self.size_bytes - new_size;
        if removed > 0 {
            self.file
                .set_len(new_size)
                .map_err(StorageError::io("truncate segment", &self.path))?;
        }
        self.batches.truncate(keep);
        self.size_bytes = new_size;
        Ok(removed)
    }

    /// Cuts the file to `len` bytes regardless of the index (recovery's tool for a
    /// torn or corrupt tail).
    pub(crate) fn truncate_file(&mut self, len: u64) -> Result<(), StorageError> {
        self.file
            .set_len(len)
            .map_err(StorageError::io("truncate segment", &self.path))?;
        self.size_bytes = len;
        Ok(())
    }

    /// fsyncs the file's data.
    pub fn flush(&self) -> Result<(), StorageError> {
        self.file
            .sync_data()
            .map_err(StorageError::io("fsync segment", &self.path))
    }

    /// Closes and removes the file.
    pub fn delete(self) -> Result<(), StorageError> {
        let Segment { path, file, .. } = self;
        drop(file);
        fs::remove_file(&path).map_err(StorageError::io("delete segment", &path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_twenty_digits() {
        assert_eq!(Segment::file_name(0), "00000000000000000000.log");
        assert_eq!(Segment::file_name(1234), "00000000000000001234.log");
        assert_eq!(
            Segment::parse_file_name("00000000000000001234.log"),
            Some(1234)
        );
        assert_eq!(Segment::parse_file_name("1234.log"), None);
        assert_eq!(Segment::parse_file_name("00000000000000001234.index"), None);
        assert_eq!(Segment::parse_file_name("0000000000000000123x.log"), None);
    }
}
