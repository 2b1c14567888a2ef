//! Request-level faults' data (issue 38, item 3): which link's requests, of
//! which Kafka API, a `hold-requests`, `delay-requests`, `drop-requests` or
//! `duplicate-requests` acts on, and which one `release-requests` ends. A
//! link is named by who sends the requests (`from`: the workload's clients,
//! or a broker) and the broker they go to (`to`); only links that carry Kafka
//! requests can be named, never a broker's etcd link. What each does to the
//! bytes is the proxy's `kafka_requests` toxic (docs/proxy.md).

use std::fmt;

use kafka_protocol::messages::ApiKey;
use serde::{Deserialize, Serialize};

use super::target::{Target, TargetError};

/// Who sends the requests: the workload's clients (written `"clients"`, or
/// `"client"`) or a broker (any fault target that resolves to one node).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Sender {
    Clients,
    Broker(Target),
}

crate::text_form::text_form!(Sender);

impl std::str::FromStr for Sender {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Self, TargetError> {
        match s.trim() {
            "clients" | "client" => Ok(Sender::Clients),
            other => other.parse().map(Sender::Broker),
        }
    }
}

impl fmt::Display for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sender::Clients => f.write_str("clients"),
            Sender::Broker(target) => write!(f, "{target}"),
        }
    }
}

/// A Kafka API, written by the name the protocol's message definitions give
/// it (`Produce`, `Fetch`, `EndTxn`, `AddPartitionsToTxn`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Api(pub ApiKey);

impl Api {
    /// The request header's `request_api_key`.
    pub fn key(self) -> i16 {
        self.0 as i16
    }
}

/// A name that is no Kafka API's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{name:?} is not a Kafka API (as the protocol names them: Produce, Fetch, EndTxn, AddPartitionsToTxn, InitProducerId, ...)"
)]
pub struct ApiError {
    pub name: String,
}

impl std::str::FromStr for Api {
    type Err = ApiError;
    fn from_str(s: &str) -> Result<Self, ApiError> {
        ApiKey::iter()
            .find(|key| format!("{key:?}") == s.trim())
            .map(Api)
            .ok_or_else(|| ApiError { name: s.to_owned() })
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

crate::text_form::text_form!(Api);

/// `hold-requests`, `drop-requests`, `duplicate-requests` and
/// `release-requests`: `{ from, to, api }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requests {
    pub from: Sender,
    pub to: Target,
    pub api: Api,
}

/// `delay-requests`: `{ from, to, api, ms }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelayedRequests {
    pub from: Sender,
    pub to: Target,
    pub api: Api,
    /// How long each request waits from when the proxy read it.
    pub ms: u64,
}

impl DelayedRequests {
    /// The link and API, as the other request faults name them.
    pub fn requests(&self) -> Requests {
        Requests {
            from: self.from.clone(),
            to: self.to.clone(),
            api: self.api,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_and_print_as_written() {
        let requests: Requests =
            toml::from_str("from = \"client\"\nto = \"leader of t-0\"\napi = \"EndTxn\"").unwrap();
        assert_eq!(requests.from, Sender::Clients);
        assert_eq!(requests.api.key(), 26);
        let printed = toml::to_string(&requests).unwrap();
        assert!(printed.contains("from = \"clients\""), "{printed}");
        assert!(printed.contains("api = \"EndTxn\""), "{printed}");
        let broker: Sender = "b2".parse().unwrap();
        assert_eq!(broker.to_string(), "b2");
        assert_eq!("Produce".parse::<Api>().unwrap().key(), 0);
        let refused = "EndTransaction".parse::<Api>().unwrap_err().to_string();
        assert!(
            refused.contains("\"EndTransaction\" is not a Kafka API"),
            "{refused}"
        );
        assert!(
            toml::from_str::<Requests>(
                "from = \"clients\"\nto = \"b1\"\napi = \"Produce\"\nms = 5"
            )
            .is_err(),
            "ms belongs to delay-requests"
        );
        assert!(
            toml::from_str::<DelayedRequests>("from = \"clients\"\nto = \"b1\"\napi = \"Produce\"")
                .is_err(),
            "delay-requests needs ms"
        );
    }
}
