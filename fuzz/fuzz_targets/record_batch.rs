//! Record-batch validation on produce and on a follower's append: the
//! header, the CRC and the records of any bytes, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    use epochal_broker::storage::record_batch;
    if let Ok(header) = record_batch::validate(data) {
        let _ = record_batch::decode_records(bytes::Bytes::copy_from_slice(data), &header);
    }
    let _ = record_batch::parse_header(data);
});
