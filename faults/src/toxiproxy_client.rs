//! An async client for Toxiproxy's HTTP API, for `epochal-proxy` or a real
//! Toxiproxy alike.
//!
//! One [`ToxiproxyClient`] talks to one server; every call is one HTTP request
//! and returns the server's answer typed, or a [`ClientError`] that keeps the
//! server's status and message. It always sends `stream` and uses the POST forms
//! of the update routes, which every Toxiproxy 2.x accepts. It holds no state
//! of its own: the server's answer is the truth.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::proxy::toxics::{OnHeal, Partition, ToxicKind};
use crate::proxy::wire::{ApiErrorJson, NewProxy, ProxyJson, Stream, ToxicJson, VersionJson};

/// How long one API request may take; Toxiproxy itself times requests out at 25 s.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status; `message` is its `error` field
    /// (or the raw body if it was not Toxiproxy's error JSON).
    #[error("toxiproxy API answered {status}: {message}")]
    Api { status: u16, message: String },
    /// The request did not complete: connection refused, timeout, and the like.
    #[error("toxiproxy API request failed: {0}")]
    Transport(#[from] reqwest::Error),
    /// The server answered success with a body that is not the expected JSON.
    #[error("toxiproxy API answered {status} with unexpected JSON: {source}")]
    Decode {
        status: u16,
        source: serde_json::Error,
    },
}

impl ClientError {
    /// The HTTP status of an API error, for callers that treat 404 or 409 as a
    /// normal outcome.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ToxiproxyClient {
    base: String,
    http: reqwest::Client,
}

impl ToxiproxyClient {
    /// A client for the API at `address` (`host:port`, as printed by
    /// `epochal-proxy`, or a full `http://` URL).
    pub fn new(address: impl AsRef<str>) -> Self {
        let address = address.as_ref().trim_end_matches('/');
        let base = if address.starts_with("http://") || address.starts_with("https://") {
            address.to_owned()
        } else {
            format!("http://{address}")
        };
        let http = reqwest::Client::builder()
            // The API is local; an HTTP_PROXY meant for the internet must not
            // capture it.
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("a plain HTTP client always builds");
        ToxiproxyClient { base, http }
    }

    pub async fn version(&self) -> Result<String, ClientError> {
        let version: VersionJson = self.call(Method::GET, "/version", None::<&()>).await?;
        Ok(version.version)
    }

    pub async fn proxies(&self) -> Result<BTreeMap<String, ProxyJson>, ClientError> {
        self.call(Method::GET, "/proxies", None::<&()>).await
    }

    /// Creates a proxy; the answer's `listen` carries the port a port-0 request got.
    pub async fn create_proxy(&self, proxy: &NewProxy) -> Result<ProxyJson, ClientError> {
        self.call(Method::POST, "/proxies", Some(proxy)).await
    }

    /// Creates or replaces proxies in bulk; unchanged ones keep their toxics.
    pub async fn populate(&self, proxies: &[NewProxy]) -> Result<Vec<ProxyJson>, ClientError> {
        #[derive(serde::Deserialize)]
        struct Populated {
            proxies: Vec<ProxyJson>,
        }
        let populated: Populated = self.call(Method::POST, "/populate", Some(proxies)).await?;
        Ok(populated.proxies)
    }

    pub async fn proxy(&self, name: &str) -> Result<ProxyJson, ClientError> {
        self.call(Method::GET, &proxy_path(name), None::<&()>).await
    }

    /// Enables or disables a proxy. Disabled, it refuses new connections and has
    /// closed every live one.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<ProxyJson, ClientError> {
        let body = serde_json::json!({ "enabled": enabled });
        self.call(Method::POST, &proxy_path(name), Some(&body))
            .await
    }

    /// Points a proxy at a new upstream (restarting it, as Toxiproxy does).
    pub async fn set_upstream(&self, name: &str, upstream: &str) -> Result<ProxyJson, ClientError> {
        let body = serde_json::json!({ "upstream": upstream });
        self.call(Method::POST, &proxy_path(name), Some(&body))
            .await
    }

    pub async fn delete_proxy(&self, name: &str) -> Result<(), ClientError> {
        self.call_empty(Method::DELETE, &proxy_path(name)).await
    }

    pub async fn toxics(&self, proxy: &str) -> Result<Vec<ToxicJson>, ClientError> {
        self.call(
            Method::GET,
            &format!("{}/toxics", proxy_path(proxy)),
            None::<&()>,
        )
        .await
    }

    pub async fn add_toxic(
        &self,
        proxy: &str,
        toxic: &ToxicJson,
    ) -> Result<ToxicJson, ClientError> {
        self.call(
            Method::POST,
            &format!("{}/toxics", proxy_path(proxy)),
            Some(toxic),
        )
        .await
    }

    pub async fn toxic(&self, proxy: &str, toxic: &str) -> Result<ToxicJson, ClientError> {
        self.call(Method::GET, &toxic_path(proxy, toxic), None::<&()>)
            .await
    }

    /// Replaces a toxic's attributes and toxicity with those of `kind` and
    /// `toxicity` (the server merges attributes; we send them all).
    pub async fn update_toxic(
        &self,
        proxy: &str,
        toxic: &str,
        kind: &ToxicKind,
        toxicity: f32,
    ) -> Result<ToxicJson, ClientError> {
        let body = serde_json::json!({ "attributes": kind.attributes(), "toxicity": toxicity });
        self.call(Method::POST, &toxic_path(proxy, toxic), Some(&body))
            .await
    }

    pub async fn remove_toxic(&self, proxy: &str, toxic: &str) -> Result<(), ClientError> {
        self.call_empty(Method::DELETE, &toxic_path(proxy, toxic))
            .await
    }

    /// Enables every proxy and removes every toxic.
    pub async fn reset(&self) -> Result<(), ClientError> {
        self.call_empty(Method::POST, "/reset").await
    }

    /// Cuts one stream of a proxy with epochal's `partition` toxic, named
    /// `partition_<stream>`; bytes are held until [`ToxiproxyClient::heal`].
    /// (A real Toxiproxy refuses this toxic type with 400.)
    pub async fn partition(
        &self,
        proxy: &str,
        stream: Stream,
        on_heal: OnHeal,
    ) -> Result<ToxicJson, ClientError> {
        let kind = ToxicKind::Partition(Partition { on_heal });
        self.add_toxic(proxy, &ToxicJson::new(stream, &kind)).await
    }

    /// Removes the partition [`ToxiproxyClient::partition`] put on `stream`.
    pub async fn heal(&self, proxy: &str, stream: Stream) -> Result<(), ClientError> {
        self.remove_toxic(proxy, &format!("partition_{stream}"))
            .await
    }

    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let (status, bytes) = self.send(method, path, body).await?;
        serde_json::from_slice(&bytes).map_err(|source| ClientError::Decode {
            status: status.as_u16(),
            source,
        })
    }

    async fn call_empty(&self, method: Method, path: &str) -> Result<(), ClientError> {
        self.send(method, path, None::<&()>).await.map(|_| ())
    }

    async fn send<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<(StatusCode, bytes::Bytes), ClientError> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        if status.is_success() {
            return Ok((status, bytes));
        }
        let message = match serde_json::from_slice::<ApiErrorJson>(&bytes) {
            Ok(error) => error.error,
            Err(_) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        };
        Err(ClientError::Api {
            status: status.as_u16(),
            message,
        })
    }
}

fn proxy_path(name: &str) -> String {
    format!("/proxies/{}", encode_segment(name))
}

fn toxic_path(proxy: &str, toxic: &str) -> String {
    format!("{}/toxics/{}", proxy_path(proxy), encode_segment(toxic))
}

/// Percent-encodes what may not stand in a URL path segment, so any proxy or
/// toxic name reaches the server intact.
fn encode_segment(segment: &str) -> String {
    let mut encoded = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}
