//! Record-batch validation on produce and on a follower's append: any bytes as
//! the records of a Produce partition (or of a fetch response) are validated
//! batch by batch as the leader validates them before appending — framing,
//! magic, CRC, offsets, every record decoded, compressed ones through the
//! decompressor guards — and refused with the position of the first bad batch,
//! never a panic, an abort or an unbounded allocation. A batch that passes is
//! then stamped as the leader stamps it (base offset, partition leader epoch),
//! which must leave it valid: both fields lie outside the CRC.
#![no_main]
use bytes::Bytes;
use epochal_broker::storage::record_batch;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let records = Bytes::copy_from_slice(data);
    let _ = record_batch::parse_header(data);
    // The follower's check: framing, magic, offsets and CRC of each batch.
    for item in record_batch::Batches::new(data) {
        if item.is_err() {
            break;
        }
    }
    let Ok(headers) = record_batch::validate_produced(&records) else {
        return;
    };
    let mut stamped = data.to_vec();
    let mut next_offset = 1_000_i64;
    for (position, header) in &headers {
        let batch = &mut stamped[*position..*position + header.size_bytes()];
        record_batch::set_base_offset(batch, next_offset);
        record_batch::set_partition_leader_epoch(batch, 7);
        let again = record_batch::validate(batch).expect("a stamped batch stays valid");
        assert_eq!(again.base_offset, next_offset);
        assert_eq!(again.partition_leader_epoch, 7);
        next_offset = again.next_offset();
    }
});
