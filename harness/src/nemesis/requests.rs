//! Request-level faults through the proxies: a `kafka_requests` toxic on the
//! upstream stream of one link's proxy (the requests of the connections its
//! sender dialled), named `requests_<Api>` so one link holds at most one
//! request fault per API. What each action does to the bytes, and why a held
//! request holds its whole connection, is the proxy's (docs/proxy.md).
//!
//! [`RequestFaults`] holds the ones in force: `release-requests` ends one,
//! `heal` (and so the final heal) ends them all, delivering what was held.

use std::collections::BTreeMap;

use epochal_faults::proxy::toxics::{KafkaRequests, RequestAction};
use epochal_faults::proxy::{Stream, ToxicJson, ToxicKind};
use epochal_faults::toxiproxy_client::{ClientError, ToxiproxyClient};

use crate::runtime::Link;
use crate::schedule::Api;

/// Why a request fault was not applied or released.
#[derive(Debug, thiserror::Error)]
pub enum RequestsError {
    #[error("a request fault on {link} for {api} is already in force (release it first)")]
    InForce { link: String, api: Api },
    #[error("no request fault on {link} for {api} is in force (never made, or already released)")]
    NotInForce { link: String, api: Api },
    #[error(transparent)]
    Proxy(#[from] ClientError),
}

/// The request faults in force, by link and API.
#[derive(Debug, Default)]
pub struct RequestFaults {
    in_force: BTreeMap<(Link, i16), Api>,
}

/// The toxic's name on its proxy: one per API.
fn toxic_name(api: Api) -> String {
    format!("requests_{api}")
}

impl RequestFaults {
    pub fn is_empty(&self) -> bool {
        self.in_force.is_empty()
    }

    /// Puts `action` on `link`'s requests of `api`.
    pub async fn apply(
        &mut self,
        proxies: &ToxiproxyClient,
        link: Link,
        api: Api,
        action: RequestAction,
        delay_ms: u64,
    ) -> Result<(), RequestsError> {
        if self.in_force.contains_key(&(link, api.key())) {
            return Err(RequestsError::InForce {
                link: link.proxy_name(),
                api,
            });
        }
        let kind = ToxicKind::KafkaRequests(KafkaRequests {
            api_key: u16::try_from(api.key()).expect("Kafka's API keys are not negative"),
            action,
            delay_ms,
        });
        let toxic = ToxicJson::new(Stream::Upstream, &kind).named(toxic_name(api));
        proxies.add_toxic(&link.proxy_name(), &toxic).await?;
        self.in_force.insert((link, api.key()), api);
        Ok(())
    }

    /// Ends the request fault on `link` for `api`; held requests go on.
    pub async fn release(
        &mut self,
        proxies: &ToxiproxyClient,
        link: Link,
        api: Api,
    ) -> Result<(), RequestsError> {
        if !self.in_force.contains_key(&(link, api.key())) {
            return Err(RequestsError::NotInForce {
                link: link.proxy_name(),
                api,
            });
        }
        remove(proxies, link, api).await?;
        self.in_force.remove(&(link, api.key()));
        Ok(())
    }

    /// Ends every request fault. On an error the ones not yet removed stay
    /// recorded, so releasing again retries them.
    pub async fn release_all(&mut self, proxies: &ToxiproxyClient) -> Result<(), RequestsError> {
        while let Some((&(link, key), &api)) = self.in_force.first_key_value() {
            remove(proxies, link, api).await?;
            self.in_force.remove(&(link, key));
        }
        Ok(())
    }
}

/// Removes the toxic; one already gone from the proxy (404: reset by
/// someone else) counts as removed.
async fn remove(proxies: &ToxiproxyClient, link: Link, api: Api) -> Result<(), RequestsError> {
    match proxies
        .remove_toxic(&link.proxy_name(), &toxic_name(api))
        .await
    {
        Ok(()) => Ok(()),
        Err(e) if e.status() == Some(404) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
