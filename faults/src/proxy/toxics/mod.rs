//! The toxics a proxy can put on a stream, with Toxiproxy's names and attributes.
//!
//! A toxic here is configuration only: its typed attributes, parsed from and
//! printed back to Toxiproxy's JSON, plus the small pure calculations each needs
//! (a delay, a slice plan, a pacing interval). The proxy's link engine decides
//! *when* to apply them to bytes, so no toxic owns a socket or a task.

mod bandwidth;
mod kafka_requests;
mod latency;
mod limit_data;
mod partition;
mod reset_peer;
mod slicer;
mod slow_close;
mod timeout;

pub use bandwidth::Bandwidth;
pub use kafka_requests::{KafkaRequests, RequestAction};
pub use latency::Latency;
pub use limit_data::LimitData;
pub use partition::{OnHeal, Partition};
pub use reset_peer::ResetPeer;
pub use slicer::Slicer;
pub use slow_close::SlowClose;
pub use timeout::Timeout;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a toxic's `type` or `attributes` were refused.
#[derive(Debug, thiserror::Error)]
pub enum ToxicParseError {
    /// Toxiproxy answers this with 400 "invalid toxic type".
    #[error("invalid toxic type {0:?}")]
    UnknownType(String),
    /// An attribute of the wrong JSON type (a string for a number, say).
    #[error("attributes of toxic type {toxic_type}: {source}")]
    Attributes {
        toxic_type: &'static str,
        source: serde_json::Error,
    },
}

/// One toxic with its attributes. `partition` and `kafka_requests` are
/// epochal's extensions; the others are Toxiproxy's and behave as its README
/// describes.
#[derive(Clone, Debug, PartialEq)]
pub enum ToxicKind {
    Latency(Latency),
    Bandwidth(Bandwidth),
    Timeout(Timeout),
    ResetPeer(ResetPeer),
    SlowClose(SlowClose),
    LimitData(LimitData),
    Slicer(Slicer),
    Partition(Partition),
    KafkaRequests(KafkaRequests),
}

impl ToxicKind {
    /// Toxiproxy's `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            ToxicKind::Latency(_) => "latency",
            ToxicKind::Bandwidth(_) => "bandwidth",
            ToxicKind::Timeout(_) => "timeout",
            ToxicKind::ResetPeer(_) => "reset_peer",
            ToxicKind::SlowClose(_) => "slow_close",
            ToxicKind::LimitData(_) => "limit_data",
            ToxicKind::Slicer(_) => "slicer",
            ToxicKind::Partition(_) => "partition",
            ToxicKind::KafkaRequests(_) => "kafka_requests",
        }
    }

    /// Parses `attributes` (an object, or null for all defaults) for `type_name`.
    /// Missing attributes take Toxiproxy's zero defaults; unknown ones are ignored,
    /// as Go's JSON decoder does.
    pub fn from_attributes(type_name: &str, attributes: &Value) -> Result<Self, ToxicParseError> {
        let attributes = if attributes.is_null() {
            Value::Object(Default::default())
        } else {
            attributes.clone()
        };
        fn typed<T: DeserializeOwned>(
            toxic_type: &'static str,
            value: Value,
        ) -> Result<T, ToxicParseError> {
            serde_json::from_value(value)
                .map_err(|source| ToxicParseError::Attributes { toxic_type, source })
        }
        Ok(match type_name {
            "latency" => ToxicKind::Latency(typed("latency", attributes)?),
            "bandwidth" => ToxicKind::Bandwidth(typed("bandwidth", attributes)?),
            "timeout" => ToxicKind::Timeout(typed("timeout", attributes)?),
            "reset_peer" => ToxicKind::ResetPeer(typed("reset_peer", attributes)?),
            "slow_close" => ToxicKind::SlowClose(typed("slow_close", attributes)?),
            "limit_data" => ToxicKind::LimitData(typed("limit_data", attributes)?),
            "slicer" => ToxicKind::Slicer(typed("slicer", attributes)?),
            "partition" => ToxicKind::Partition(typed("partition", attributes)?),
            "kafka_requests" => ToxicKind::KafkaRequests(typed("kafka_requests", attributes)?),
            other => return Err(ToxicParseError::UnknownType(other.to_owned())),
        })
    }

    /// The attributes as the API shows them.
    pub fn attributes(&self) -> Value {
        fn value<T: Serialize>(attributes: &T) -> Value {
            serde_json::to_value(attributes).expect("toxic attributes are plain data")
        }
        match self {
            ToxicKind::Latency(a) => value(a),
            ToxicKind::Bandwidth(a) => value(a),
            ToxicKind::Timeout(a) => value(a),
            ToxicKind::ResetPeer(a) => value(a),
            ToxicKind::SlowClose(a) => value(a),
            ToxicKind::LimitData(a) => value(a),
            ToxicKind::Slicer(a) => value(a),
            ToxicKind::Partition(a) => value(a),
            ToxicKind::KafkaRequests(a) => value(a),
        }
    }

    /// This toxic with the attributes in `changes` overriding its own, as an
    /// update (`POST/PATCH /proxies/{p}/toxics/{t}`) merges them in Toxiproxy.
    pub fn with_changes(&self, changes: &Value) -> Result<Self, ToxicParseError> {
        let mut merged = self.attributes();
        if let (Some(merged), Some(changes)) = (merged.as_object_mut(), changes.as_object()) {
            for (key, value) in changes {
                merged.insert(key.clone(), value.clone());
            }
        }
        ToxicKind::from_attributes(self.type_name(), &merged)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use serde_json::json;

    #[test]
    fn attributes_round_trip_with_toxiproxy_names() {
        let kind = ToxicKind::from_attributes(
            "slicer",
            &json!({"average_size": 64, "size_variation": 8, "delay": 10}),
        )
        .unwrap();
        assert_eq!(
            kind.attributes(),
            json!({"average_size": 64, "size_variation": 8, "delay": 10})
        );
    }

    #[test]
    fn missing_attributes_default_to_zero_and_unknown_type_is_refused() {
        let kind = ToxicKind::from_attributes("latency", &Value::Null).unwrap();
        assert_eq!(kind.attributes(), json!({"latency": 0, "jitter": 0}));
        assert!(matches!(
            ToxicKind::from_attributes("nonsense", &json!({})),
            Err(ToxicParseError::UnknownType(_))
        ));
        assert!(matches!(
            ToxicKind::from_attributes("latency", &json!({"latency": "slow"})),
            Err(ToxicParseError::Attributes { .. })
        ));
    }

    #[test]
    fn an_update_merges_attributes() {
        let kind =
            ToxicKind::from_attributes("latency", &json!({"latency": 50, "jitter": 5})).unwrap();
        let updated = kind.with_changes(&json!({"jitter": 0})).unwrap();
        assert_eq!(updated.attributes(), json!({"latency": 50, "jitter": 0}));
    }

    #[test]
    fn partition_defaults_to_resume() {
        let kind = ToxicKind::from_attributes("partition", &json!({})).unwrap();
        assert_eq!(
            kind,
            ToxicKind::Partition(Partition {
                on_heal: OnHeal::Resume
            })
        );
        assert_eq!(kind.attributes(), json!({"on_heal": "resume"}));
    }

    #[test]
    fn kafka_requests_attributes_round_trip_and_default_to_hold() {
        let kind = ToxicKind::from_attributes(
            "kafka_requests",
            &json!({"api_key": 0, "action": "delay", "delay_ms": 200}),
        )
        .unwrap();
        assert_eq!(
            kind.attributes(),
            json!({"api_key": 0, "action": "delay", "delay_ms": 200})
        );
        let ToxicKind::KafkaRequests(held) =
            ToxicKind::from_attributes("kafka_requests", &json!({"api_key": 26})).unwrap()
        else {
            panic!("a kafka_requests toxic");
        };
        assert_eq!(held.action, RequestAction::Hold);
        assert!(held.matches(26) && !held.matches(0) && !held.matches(-26));
        assert!(ToxicKind::from_attributes("kafka_requests", &json!({"action": "lose"})).is_err());
        assert!(ToxicKind::from_attributes("kafka_requests", &json!({"api_key": -1})).is_err());
    }

    // What `ci/fuzz.sh` (proxy_toxic) found: attributes the API accepts, posted
    // as `body` (`POST /proxies/p/toxics`) and parsed as the API parses them,
    // that overflowed a toxic's arithmetic.

    /// The toxic posted as `body`.
    fn posted(body: &[u8]) -> ToxicKind {
        let body: serde_json::Value = serde_json::from_slice(body).unwrap();
        ToxicKind::from_attributes(body["type"].as_str().unwrap(), &body["attributes"]).unwrap()
    }

    /// A rate above u64::MAX / 100 overflowed `rate * 100` — a panic in the
    /// link (overflow checks on) or a wrapped, tiny piece size (off).
    #[test]
    fn fuzz_the_largest_rate_paces_without_overflow() {
        let ToxicKind::Bandwidth(bandwidth) =
            posted(br#"{"type":"bandwidth","attributes":{"rate":18446744073709551615}}"#)
        else {
            panic!("a bandwidth");
        };
        assert_eq!(bandwidth.piece_bytes_max(), usize::MAX);
        assert_eq!(bandwidth.transmit_time(64 * 1024), Duration::ZERO);
        let slow = Bandwidth { rate: 1 };
        assert_eq!(slow.piece_bytes_max(), 100);
        assert_eq!(slow.transmit_time(1000), Duration::from_secs(1));
    }

    /// `latency as i64 + offset` overflowed when a draw of the jitter pushed a
    /// large latency past i64::MAX; and a latency above i64::MAX turned
    /// negative, i.e. no delay.
    #[test]
    fn fuzz_the_largest_latencies_delay_without_overflow() {
        let latency = |body: &[u8]| {
            let ToxicKind::Latency(latency) = posted(body) else {
                panic!("a latency");
            };
            latency
        };
        let half = latency(
            br#"{"type":"latency","attributes":{"latency":9223372036854775807,"jitter":9223372036854775807}}"#,
        );
        for _ in 0..64 {
            let _ = half.sample_delay();
        }
        let max = latency(br#"{"type":"latency","attributes":{"latency":18446744073709551615}}"#);
        assert_eq!(max.sample_delay(), Duration::from_millis(u64::MAX));
        let plain = Latency {
            latency: 100,
            jitter: 10,
        };
        for _ in 0..64 {
            let delay = plain.sample_delay().as_millis();
            assert!((90..=110).contains(&delay), "{delay}");
        }
    }

    /// With `average_size` 0 (absent, as here, where the fuzzer misspelt it)
    /// an empty chunk was cut into one piece of 0 bytes, against "each at
    /// least one byte".
    #[test]
    fn fuzz_an_empty_chunk_is_no_pieces() {
        let body = br#"{"type":"slicer","attributes":{"average_size_size":64,"size_variation":8,"delay":10}}"#;
        let ToxicKind::Slicer(slicer) = posted(body) else {
            panic!("a slicer");
        };
        assert_eq!(slicer.cut(0), Vec::<usize>::new());
        assert_eq!(slicer.cut(5), vec![5]);
    }

    /// `average_size + size_variation` overflowed for sizes the API accepts.
    #[test]
    fn fuzz_the_largest_sizes_cut_without_overflow() {
        let body = br#"{"type":"slicer","attributes":{"average_size":18446744073709551615,"size_variation":18446744073709551615,"delay":18446744073709551615}}"#;
        let ToxicKind::Slicer(slicer) = posted(body) else {
            panic!("a slicer");
        };
        assert_eq!(slicer.cut(64 * 1024), vec![64 * 1024]);
        assert_eq!(slicer.gap(), Duration::from_micros(u64::MAX));
    }
}
