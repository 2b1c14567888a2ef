//! The final read's unit tests: cutting fetched bytes into whole batches,
//! segment names, the checkpoint and the topic-name rule.

use super::*;

/// A v2 batch header and `body_bytes` of body, as a broker frames one:
/// only the framing fields the cutting reads are set.
fn batch(base_offset: i64, records: i32, body_bytes: usize) -> Vec<u8> {
    let length = (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + body_bytes) as i32;
    let mut bytes = vec![0u8; LOG_OVERHEAD_BYTES + length as usize];
    bytes[0..8].copy_from_slice(&base_offset.to_be_bytes());
    bytes[8..12].copy_from_slice(&length.to_be_bytes());
    bytes[MAGIC_AT] = 2;
    bytes[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
        .copy_from_slice(&(records - 1).to_be_bytes());
    bytes[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&records.to_be_bytes());
    bytes
}

fn offsets(cut: &WholeBatches) -> Vec<(i64, i64)> {
    cut.batches
        .iter()
        .map(|b| (b.base_offset, b.last_offset))
        .collect()
}

#[test]
fn a_buffer_is_cut_into_its_whole_batches_and_a_cut_tail_is_dropped() {
    let (a, b, c) = (batch(0, 3, 10), batch(3, 2, 5), batch(5, 4, 30));
    let mut buffer = [a.clone(), b.clone()].concat();
    let whole = whole_batches(&buffer).unwrap();
    assert_eq!(offsets(&whole), [(0, 2), (3, 4)]);
    assert_eq!(whole.batches[1].bytes, a.len()..a.len() + b.len());
    assert_eq!(whole.batches[1].records, 2);
    assert_eq!(whole.cut_batch_bytes, None);

    // Cut inside the third batch's body, then inside its length field.
    buffer.extend_from_slice(&c[..c.len() - 1]);
    let cut = whole_batches(&buffer).unwrap();
    assert_eq!(offsets(&cut), [(0, 2), (3, 4)]);
    assert_eq!(cut.cut_batch_bytes, Some(c.len()));
    buffer.truncate(a.len() + b.len() + 10);
    let cut = whole_batches(&buffer).unwrap();
    assert_eq!(offsets(&cut), [(0, 2), (3, 4)]);
    assert_eq!(cut.cut_batch_bytes, None);

    assert_eq!(whole_batches(&[]).unwrap().batches, []);
}

#[test]
fn what_is_not_v2_batches_is_refused_with_where_it_is() {
    let good = batch(0, 1, 0);
    let mut old = batch(1, 1, 0);
    old[MAGIC_AT] = 1;
    assert_eq!(
        whole_batches(&[good.clone(), old].concat()),
        Err(BatchFrameError::UnsupportedMagic {
            position: good.len(),
            magic: 1
        })
    );
    let mut short = batch(1, 1, 0);
    short[8..12].copy_from_slice(&5i32.to_be_bytes());
    assert_eq!(
        whole_batches(&[good.clone(), short].concat()),
        Err(BatchFrameError::BadLength {
            position: good.len(),
            batch_length: 5
        })
    );
    assert_eq!(
        whole_batches(&batch(-4, 1, 0)),
        Err(BatchFrameError::NegativeOffset {
            position: 0,
            base_offset: -4
        })
    );
}

#[test]
fn batches_already_written_or_past_the_high_watermark_are_not_needed() {
    let buffer = [batch(0, 5, 0), batch(5, 5, 0), batch(10, 5, 0)].concat();
    let cut = whole_batches(&buffer).unwrap();
    let needed = |next, latest| -> Vec<i64> {
        needed_batches(&cut.batches, next, latest)
            .iter()
            .map(|b| b.base_offset)
            .collect()
    };
    assert_eq!(needed(0, 15), [0, 5, 10]);
    // A fetch at 7 answers the batch holding 7 whole: kept, once.
    assert_eq!(needed(7, 15), [5, 10]);
    // The batch ending at 4 was written by the last fetch.
    assert_eq!(needed(5, 15), [5, 10]);
    // Nothing at or past the listed high watermark.
    assert_eq!(needed(0, 10), [0, 5]);
    assert_eq!(needed(0, 6), [0, 5]);
    assert!(needed(15, 20).is_empty());

    // A batch wholly inside what was written is not written again.
    let repeated = [batch(0, 5, 0), batch(2, 3, 0), batch(5, 5, 0)].concat();
    let cut = whole_batches(&repeated).unwrap();
    let bases: Vec<i64> = needed_batches(&cut.batches, 0, 20)
        .iter()
        .map(|b| b.base_offset)
        .collect();
    assert_eq!(bases, [0, 5]);
}

#[test]
fn advertised_hosts_are_dialled_as_written_and_ipv6_bracketed() {
    assert_eq!(host_port("127.0.0.1", 9092), "127.0.0.1:9092");
    assert_eq!(host_port("::1", 9092), "[::1]:9092");
}
