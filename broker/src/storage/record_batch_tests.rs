//! The record batch v2 header's tests: parsing, patching, validating, and
//! the records walk produced data goes through (record_batch.rs).

use super::*;
use bytes::BytesMut;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One record a value, offsets from 0, each with a header, in leader
/// epoch 7.
fn records(values: &[&str]) -> Vec<Record> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 7,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch only while offset minus
            // sequence stays constant; -1 + i keeps the header's -1.
            sequence: i as i32 - 1,
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: [("h".into(), Some(Bytes::from_static(b"x")))].into(),
        })
        .collect()
}

/// Those records as one batch.
fn encoded(values: &[&str], compression: Compression) -> BytesMut {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records(values),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf
}

fn batch(values: &[&str]) -> Vec<u8> {
    encoded(values, Compression::None).to_vec()
}

/// Every codec the broker reads.
const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// Records stamped far apart share a batch: each record's timestamp delta is
/// a varlong (Kafka's protocol guide, "Record", KIP-98's message format v2),
/// which a client writes in up to 10 bytes — here 6 (a record stamped 1 ms
/// after the epoch beside one stamped now, as librdkafka's tests produce)
/// and 10 (the whole `i64` range in one batch). Read as a 5-byte varint, the
/// check refused such a valid batch as CORRUPT_MESSAGE.
#[test]
fn a_timestamp_delta_wider_than_a_varint_is_taken_in_every_codec() {
    let records = [
        test_writer::TestRecord::keyed(1, "k", "a"),
        test_writer::TestRecord::keyed(1_700_000_000_000, "k", "b"),
        test_writer::TestRecord::keyed(i64::MIN, "k", "c"),
        test_writer::TestRecord::keyed(i64::MAX, "k", "d"),
    ];
    for compression in CODECS {
        let batch = test_writer::write_batch(&records, compression);
        let taken = validate_produced(&batch);
        assert!(taken.is_ok(), "{compression:?}: {taken:?}");
        assert_eq!(test_writer::read_batch(&batch).1, records);
    }
}

/// A record whose header value is null (length -1) and whose key is null,
/// as librdkafka sends them: Kafka's format allows both, and the leader
/// takes the batch in every codec ([clients]; kafka-protocol 0.15.1's
/// decoder refuses it, which is why produced data is walked by own code).
#[test]
fn a_null_header_value_and_a_null_key_are_taken_in_every_codec() {
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut with_null: Vec<Record> = records(&["a", "b"]);
        for record in &mut with_null {
            record.headers = [("h".into(), None)].into();
        }
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &with_null,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        let bytes = buf.freeze();
        assert!(
            decode_records(bytes.clone(), &validate(&bytes).unwrap()).is_err(),
            "{compression:?}: kafka-protocol's decoder still refuses it; if it no longer \
             does, the produce path could use it again"
        );
        let taken = validate_produced(&bytes);
        assert!(taken.is_ok(), "{compression:?}: {taken:?}");
    }
}

#[test]
fn a_record_out_of_offset_order_is_refused() {
    // One record: its length (6, zigzag 12), attributes, timestamp delta 0,
    // offset delta 1 (zigzag 2), null key and value (-1, zigzag 1), no headers.
    let payload = [12, 0, 0, 2, 1, 1, 0];
    assert_eq!(
        check_record_framing(&payload, 1),
        Err(RecordFramingError::OffsetDelta {
            record: 0,
            delta: 1
        })
    );
    let mut in_order = payload;
    in_order[3] = 0;
    assert_eq!(check_record_framing(&in_order, 1), Ok(()));
}

#[test]
fn parses_header_fields_of_an_encoded_batch() {
    let b = batch(&["a", "b", "c"]);
    let h = validate(&b).unwrap();
    assert_eq!(h.size_bytes(), b.len());
    assert_eq!(h.base_offset, 0);
    assert_eq!(h.partition_leader_epoch, 7);
    assert_eq!(h.last_offset_delta, 2);
    assert_eq!(h.record_count, 3);
    assert_eq!(h.magic, 2);
}

#[test]
fn patching_offset_and_epoch_keeps_the_crc_valid() {
    let mut b = batch(&["a", "b"]);
    set_base_offset(&mut b, 1234);
    set_partition_leader_epoch(&mut b, 9);
    let h = validate(&b).unwrap();
    assert_eq!((h.base_offset, h.partition_leader_epoch), (1234, 9));
    let set = decode_records(Bytes::from(b), &h).unwrap();
    assert_eq!(set.records[1].offset, 1235);
    assert_eq!(set.records[1].partition_leader_epoch, 9);
}

#[test]
fn a_flipped_payload_byte_is_a_crc_mismatch() {
    let mut b = batch(&["hello"]);
    let last = b.len() - 2;
    b[last] ^= 0x40;
    assert!(matches!(validate(&b), Err(BatchError::CrcMismatch { .. })));
}

#[test]
fn short_and_garbage_input_give_errors() {
    let b = batch(&["x"]);
    for cut in 0..b.len() {
        assert!(
            matches!(validate(&b[..cut]), Err(BatchError::Incomplete { .. })),
            "cut at {cut}"
        );
    }
    let mut bad_magic = b.clone();
    bad_magic[MAGIC_AT] = 1;
    assert_eq!(
        validate(&bad_magic),
        Err(BatchError::UnsupportedMagic { magic: 1 })
    );
    let mut bad_len = b.clone();
    bad_len[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert_eq!(
        validate(&bad_len),
        Err(BatchError::InvalidLength { batch_length: -5 })
    );
    let garbage: Vec<u8> = (0..500u32).map(|i| (i * 37 % 251) as u8).collect();
    assert!(validate(&garbage).is_err());
    assert!(Batches::new(&garbage).all(|r| r.is_err()));
}

#[test]
fn a_forged_record_count_is_rejected_before_decoding() {
    let mut b = batch(&["x"]);
    // recordCount and lastOffsetDelta consistent but huge; recompute the CRC so
    // only the plausibility guard can catch it.
    b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    let h = validate(&b).unwrap();
    assert!(matches!(
        decode_records(Bytes::from(b), &h),
        Err(BatchError::Undecodable { .. })
    ));
}

#[test]
fn forged_header_and_length_counts_are_rejected_without_allocating() {
    // One record: len, attributes, ts delta, offset delta, key -1, value -1,
    // then a header count of 2^30 with nothing after it.
    let mut record = vec![0u8, 0, 0, 0, 1, 1];
    record.extend([0x80, 0x80, 0x80, 0x80, 0x08]); // zigzag(2^30)
    record[0] = ((record.len() - 1) * 2) as u8;
    assert_eq!(
        check_record_framing(&record, 1),
        Err(RecordFramingError::Headers {
            record: 0,
            headers: 1 << 30
        })
    );
    assert_eq!(
        check_record_framing(&[0xff; 4], 1),
        Err(RecordFramingError::TruncatedVarint)
    );
    assert_eq!(
        check_record_framing(&[], 1),
        Err(RecordFramingError::TruncatedVarint)
    );
    assert_eq!(
        check_record_framing(&[0], 0),
        Err(RecordFramingError::TrailingAfterRecords { bytes: 1 })
    );
    assert!(matches!(
        check_snappy_length(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0]),
        Err(SnappyPayloadError::ForgedLength { .. })
    ));
}

#[test]
fn compressed_batches_decode_through_the_guard() {
    for compression in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let buf = encoded(&["a", "b", "c"], compression);
        let h = validate(&buf).unwrap();
        let set = decode_records(buf.freeze(), &h).unwrap();
        assert_eq!(set.records.len(), 3, "{compression:?}");
        assert_eq!(set.records[2].value.as_deref(), Some(&b"c"[..]));
    }
}

/// Kafka's Java producer frames snappy as snappy-java's stream (xerial):
/// such a batch decodes, over several blocks; a block cut short does not.
#[test]
fn xerial_framed_snappy_batches_decode() {
    let records = records(&["a", "bb", "ccc"]);
    let encode = |cut: usize| {
        let xerial = |raw: &mut BytesMut, out: &mut BytesMut, _: Compression| {
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            // Two blocks, as snappy-java writes one per buffer it fills.
            let half = raw.len() / 2;
            for part in [&raw[..half], &raw[half..]] {
                let block = snap::raw::Encoder::new().compress_vec(part)?;
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block[..block.len() - cut]);
            }
            Ok(())
        };
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode_with_custom_compression(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::Snappy,
            },
            Some(xerial),
        )
        .unwrap();
        buf
    };
    let buf = encode(0);
    let h = validate(&buf).unwrap();
    let set = decode_records(buf.freeze(), &h).unwrap();
    let values: Vec<_> = set.records.iter().map(|r| r.value.clone()).collect();
    assert_eq!(
        values,
        [Some("a"), Some("bb"), Some("ccc")].map(|v| v.map(Bytes::from))
    );
    let cut = encode(1);
    let h = validate(&cut).unwrap();
    assert!(matches!(
        decode_records(cut.freeze(), &h),
        Err(BatchError::Undecodable { .. })
    ));
}

#[test]
fn validate_produced_gives_every_batch_or_the_first_bad_one() {
    let mut buf = batch(&["a"]);
    let second_at = buf.len();
    buf.extend(batch(&["b", "c"]));
    let headers = validate_produced(&Bytes::from(buf.clone())).unwrap();
    let positions: Vec<usize> = headers.iter().map(|(p, _)| *p).collect();
    assert_eq!(positions, [0, second_at]);
    assert_eq!(validate_produced(&Bytes::new()).unwrap(), []);
    let last = buf.len() - 1;
    buf[last] ^= 1;
    let (position, error) = validate_produced(&Bytes::from(buf)).unwrap_err();
    assert_eq!(position, second_at);
    assert!(matches!(error, BatchError::CrcMismatch { .. }), "{error}");
}

#[test]
fn batches_iterates_until_the_first_problem() {
    let mut buf = batch(&["a"]);
    let second_at = buf.len();
    buf.extend(batch(&["b", "c"]));
    buf.extend(&[0u8; 5]);
    let items: Vec<_> = Batches::new(&buf).collect();
    assert_eq!(items.len(), 3);
    assert_eq!(items[1].as_ref().unwrap().position, second_at);
    assert_eq!(
        items[2].as_ref().unwrap_err(),
        &(
            buf.len() - 5,
            BatchError::Incomplete {
                needed: 12,
                available: 5
            }
        )
    );
}
