//! Toxiproxy's JSON, as the server writes it and the client reads it.
//!
//! These are the shapes of Toxiproxy's HTTP API (field names, defaults and the
//! `{"error": ..., "status": ...}` error body), shared by `epochal-proxy` and
//! [`crate::toxiproxy_client`] so the two cannot drift apart. They carry data only:
//! what a toxic *does* lives in [`super::toxics`].

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::toxics::{ToxicKind, ToxicParseError};

/// Which way the bytes flow through a proxy: `upstream` is client to server (the
/// requests), `downstream` server to client (the responses), as Toxiproxy names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    Upstream,
    Downstream,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }

    /// Toxiproxy accepts the direction in any letter case.
    pub fn parse(text: &str) -> Option<Stream> {
        match text.to_ascii_lowercase().as_str() {
            "upstream" => Some(Stream::Upstream),
            "downstream" => Some(Stream::Downstream),
            _ => None,
        }
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Stream {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Stream {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Stream::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "stream {text:?} is neither upstream nor downstream"
            ))
        })
    }
}

/// A proxy as `GET /proxies/{name}` shows it. `listen` is the bound address once
/// the proxy has started, so a proxy created on port 0 reports the port it got.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProxyJson {
    pub name: String,
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
    #[serde(default)]
    pub toxics: Vec<ToxicJson>,
}

/// What `POST /proxies` and `POST /populate` take. Toxiproxy defaults `enabled` to
/// true; `listen` with port 0 picks a free port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewProxy {
    pub name: String,
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
}

impl NewProxy {
    /// An enabled proxy listening on `listen` (use port 0 to let the server pick).
    pub fn new(
        name: impl Into<String>,
        listen: impl Into<String>,
        upstream: impl Into<String>,
    ) -> Self {
        NewProxy {
            name: name.into(),
            listen: listen.into(),
            upstream: upstream.into(),
            enabled: true,
        }
    }
}

/// A toxic as the API shows and accepts it. `attributes` stay raw JSON here; read
/// them typed with [`ToxicJson::toxic_kind`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToxicJson {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub stream: Stream,
    pub toxicity: f32,
    #[serde(default)]
    pub attributes: serde_json::Value,
}

impl ToxicJson {
    /// A toxic on `stream` applied to every connection, named as Toxiproxy names it
    /// by default: `<type>_<stream>`.
    pub fn new(stream: Stream, kind: &ToxicKind) -> Self {
        ToxicJson {
            name: format!("{}_{}", kind.type_name(), stream),
            kind: kind.type_name().to_owned(),
            stream,
            toxicity: 1.0,
            attributes: kind.attributes(),
        }
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The probability, decided once per connection, that the toxic applies to it.
    pub fn with_toxicity(mut self, toxicity: f32) -> Self {
        self.toxicity = toxicity;
        self
    }

    /// The typed toxic, or why `type`/`attributes` do not make one.
    pub fn toxic_kind(&self) -> Result<ToxicKind, ToxicParseError> {
        ToxicKind::from_attributes(&self.kind, &self.attributes)
    }
}

/// Toxiproxy's error body: `{"error": "proxy not found", "status": 404}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiErrorJson {
    pub error: String,
    pub status: u16,
}

/// `GET /version`: `{"version": "..."}` (Toxiproxy ≥ 2.5 answers JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionJson {
    pub version: String,
}
