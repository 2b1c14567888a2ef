//! Which `__consumer_offsets` partition a group belongs to, and so which broker
//! coordinates it: Kafka's `GroupMetadataManager.partitionFor`, i.e.
//! `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`. Clients
//! never compute it (FindCoordinator asks the broker), but every broker of a
//! cluster must agree, and a mixed cluster with Kafka brokers must agree with
//! them, so the hash is Java's to the bit.

/// Java's `String.hashCode`: `h = 31 * h + c` over the UTF-16 code units, in
/// wrapping 32-bit arithmetic. A character outside the BMP counts as its two
/// surrogates, as in Java.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The offsets partition of `group_id` among `partitions` (`offsets.topic.num.partitions`,
/// Kafka's default 50). Kafka's `Utils.abs` maps `i32::MIN`, whose absolute
/// value does not fit, to 0 rather than leaving it negative. A partition count
/// of 0 is treated as 1: every group is then in partition 0.
pub fn partition_for(group_id: &str, partitions: u32) -> u32 {
    let hash = java_string_hash(group_id);
    let abs = if hash == i32::MIN {
        0
    } else {
        hash.unsigned_abs()
    };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values computed independently with Python, folding
    // `(31 * h + unit) & 0xffffffff` over `s.encode('utf-16-le')` units and
    // reading the result as a signed 32-bit integer.
    #[test]
    fn hash_is_javas_string_hash_code() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("test-group"), 627_841_412);
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        // Non-ASCII and a character outside the BMP (two surrogates).
        assert_eq!(java_string_hash("grüppe-😀"), -1_039_948_164);
        // The well-known string whose Java hash code is Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn partition_is_kafkas_abs_hash_modulo_the_partition_count() {
        assert_eq!(partition_for("test-group", 50), 12);
        assert_eq!(partition_for("console-consumer-12345", 50), 6);
        assert_eq!(partition_for("my-group", 50), 12);
        assert_eq!(partition_for("my-group", 7), 1);
        assert_eq!(partition_for("grüppe-😀", 50), 14);
        assert_eq!(partition_for("a", 50), 47);
        // Utils.abs(Integer.MIN_VALUE) is 0, not a negative partition.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("polygenelubricants", 7), 0);
        assert_eq!(partition_for("a", 0), 0);
        assert_eq!(partition_for("a", 1), 0);
    }
}
