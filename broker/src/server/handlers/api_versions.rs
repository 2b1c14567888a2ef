//! ApiVersions: advertises exactly the APIs and versions dispatch implements
//! (dispatch passes its table in, so a handler never names dispatch).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

/// The answer advertising `supported`: each API with its lowest and highest
/// version (dispatch's `SUPPORTED_APIS`).
pub fn response(supported: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        supported
            .iter()
            .map(|(key, min, max)| {
                ApiVersion::default()
                    .with_api_key(*key as i16)
                    .with_min_version(*min)
                    .with_max_version(*max)
            })
            .collect(),
    )
}
