//! Toxiproxy's HTTP API over the [`Collection`]: the same routes, JSON fields,
//! status codes and `{"error": ..., "status": ...}` bodies, so Toxiproxy's own
//! clients drive `epochal-proxy` and our client drives a real Toxiproxy.
//!
//! Request bodies are parsed here, in Toxiproxy's order of checks, so each
//! malformed request gets the error Toxiproxy would give it. Where we differ:
//! a proxy created without `listen` listens on 127.0.0.1 with a free port
//! (Toxiproxy would take every interface), and numeric attributes must be
//! non-negative integers.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::collection::{ApiError, Collection, ProxySpec, ToxicSpec};
use super::toxics::{ToxicKind, ToxicParseError};
use super::wire::{ApiErrorJson, Stream, VersionJson};

/// The version `GET /version` reports.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "-epochal-proxy");

/// How the API answers each failure: Toxiproxy's status code, and its
/// `{"error": ..., "status": ...}` body.
impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequestBody(_)
            | ApiError::MissingField(_)
            | ApiError::InvalidStream
            | ApiError::InvalidToxicType => StatusCode::BAD_REQUEST,
            ApiError::ProxyNotFound | ApiError::ToxicNotFound => StatusCode::NOT_FOUND,
            ApiError::ProxyAlreadyExists | ApiError::ToxicAlreadyExists => StatusCode::CONFLICT,
            ApiError::Listen(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn json(&self) -> ApiErrorJson {
        ApiErrorJson {
            error: self.to_string(),
            status: self.status().as_u16(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json(self.status(), &self.json())
    }
}

fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    let body = serde_json::to_string(value).expect("API responses are plain data");
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| ApiError::BadRequestBody(error.to_string()))
}

pub(crate) fn router(collection: Arc<Collection>) -> Router {
    Router::new()
        .route("/reset", post(reset))
        .route("/proxies", get(list_proxies).post(create_proxy))
        .route("/populate", post(populate))
        .route(
            "/proxies/{proxy}",
            get(show_proxy)
                .post(update_proxy)
                .patch(update_proxy)
                .delete(delete_proxy),
        )
        .route(
            "/proxies/{proxy}/toxics",
            get(list_toxics).post(create_toxic),
        )
        .route(
            "/proxies/{proxy}/toxics/{toxic}",
            get(show_toxic)
                .post(update_toxic)
                .patch(update_toxic)
                .delete(delete_toxic),
        )
        .route("/version", get(version))
        .with_state(collection)
}

type Shared = State<Arc<Collection>>;

/// A proxy in a create or populate request. Every field may be missing so the
/// handler can name the missing one, as Toxiproxy does.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ProxyRequest {
    name: Option<String>,
    listen: Option<String>,
    upstream: Option<String>,
    enabled: Option<bool>,
}

impl ProxyRequest {
    fn spec(self, position: Option<usize>) -> Result<ProxySpec, ApiError> {
        let at = |field: &str| match position {
            Some(n) => format!("{field} at proxy {n}"),
            None => field.to_owned(),
        };
        let name = self
            .name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::MissingField(at("name")))?;
        let upstream = self
            .upstream
            .filter(|u| !u.is_empty())
            .ok_or_else(|| ApiError::MissingField(at("upstream")))?;
        Ok(ProxySpec {
            name,
            listen: self
                .listen
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| "127.0.0.1:0".to_owned()),
            upstream,
            enabled: self.enabled.unwrap_or(true),
        })
    }
}

async fn list_proxies(State(collection): Shared) -> Response {
    json(StatusCode::OK, &collection.list().await)
}

async fn create_proxy(State(collection): Shared, body: Bytes) -> Result<Response, ApiError> {
    let spec = parse::<ProxyRequest>(&body)?.spec(None)?;
    let shown = collection.create(spec).await?;
    Ok(json(StatusCode::CREATED, &shown))
}

async fn populate(State(collection): Shared, body: Bytes) -> Result<Response, ApiError> {
    let requests: Vec<ProxyRequest> = parse(&body)?;
    let specs = requests
        .into_iter()
        .enumerate()
        .map(|(index, request)| request.spec(Some(index + 1)))
        .collect::<Result<Vec<_>, _>>()?;
    let (proxies, error) = collection.populate(specs).await;
    // Toxiproxy answers a failed populate with the error fields and the proxies
    // it handled before the failure, in one object.
    let mut body = serde_json::Map::new();
    let status = match &error {
        Some(error) => {
            body.insert("error".into(), error.to_string().into());
            body.insert("status".into(), error.status().as_u16().into());
            error.status()
        }
        None => StatusCode::CREATED,
    };
    body.insert(
        "proxies".into(),
        serde_json::to_value(proxies).expect("proxies are plain data"),
    );
    Ok(json(status, &body))
}

async fn show_proxy(
    State(collection): Shared,
    Path(proxy): Path<String>,
) -> Result<Response, ApiError> {
    Ok(json(StatusCode::OK, &collection.get(&proxy).await?))
}

async fn update_proxy(
    State(collection): Shared,
    Path(proxy): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Toxiproxy looks the proxy up before it reads the body.
    collection.get(&proxy).await?;
    let request: ProxyRequest = parse(&body)?;
    let shown = collection
        .update(&proxy, request.listen, request.upstream, request.enabled)
        .await?;
    Ok(json(StatusCode::OK, &shown))
}

async fn delete_proxy(
    State(collection): Shared,
    Path(proxy): Path<String>,
) -> Result<Response, ApiError> {
    collection.delete(&proxy).await?;
    Ok(no_content())
}

async fn list_toxics(
    State(collection): Shared,
    Path(proxy): Path<String>,
) -> Result<Response, ApiError> {
    Ok(json(StatusCode::OK, &collection.toxics(&proxy).await?))
}

#[derive(Deserialize)]
struct ToxicRequest {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    stream: Option<String>,
    #[serde(default)]
    toxicity: Option<f32>,
    #[serde(default)]
    attributes: Option<serde_json::Value>,
}

async fn create_toxic(
    State(collection): Shared,
    Path(proxy): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    collection.get(&proxy).await?;
    let request: ToxicRequest = parse(&body)?;
    let stream = match request.stream.as_deref() {
        None => Stream::Downstream,
        Some(text) => Stream::parse(text).ok_or(ApiError::InvalidStream)?,
    };
    let type_name = request.kind.unwrap_or_default();
    let name = request
        .name
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| format!("{type_name}_{stream}"));
    let attributes = request.attributes.unwrap_or(serde_json::Value::Null);
    let kind = match ToxicKind::from_attributes(&type_name, &attributes) {
        Ok(kind) => Ok(kind),
        Err(ToxicParseError::UnknownType(_)) => return Err(ApiError::InvalidToxicType),
        Err(error) => Err(ApiError::BadRequestBody(error.to_string())),
    };
    if collection.contains_toxic(&proxy, &name).await? {
        return Err(ApiError::ToxicAlreadyExists);
    }
    // Responses have no API key to match: this toxic reads requests, which
    // flow upstream (the dialler's bytes).
    if let Ok(ToxicKind::KafkaRequests(_)) = &kind
        && stream == Stream::Downstream
    {
        return Err(ApiError::BadRequestBody(
            "kafka_requests acts on requests: its stream must be upstream".to_owned(),
        ));
    }
    let spec = ToxicSpec {
        name,
        stream,
        toxicity: request.toxicity.unwrap_or(1.0),
        kind: kind?,
    };
    // Toxiproxy answers a created toxic with 200, not 201.
    Ok(json(
        StatusCode::OK,
        &collection.add_toxic(&proxy, spec).await?,
    ))
}

async fn show_toxic(
    State(collection): Shared,
    Path((proxy, toxic)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    Ok(json(
        StatusCode::OK,
        &collection.toxic(&proxy, &toxic).await?,
    ))
}

#[derive(Deserialize)]
struct ToxicUpdateRequest {
    #[serde(default)]
    toxicity: Option<f32>,
    #[serde(default)]
    attributes: Option<serde_json::Value>,
}

async fn update_toxic(
    State(collection): Shared,
    Path((proxy, toxic)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    collection.toxic(&proxy, &toxic).await?;
    let request: ToxicUpdateRequest = parse(&body)?;
    let shown = collection
        .update_toxic(&proxy, &toxic, request.attributes, request.toxicity)
        .await?;
    Ok(json(StatusCode::OK, &shown))
}

async fn delete_toxic(
    State(collection): Shared,
    Path((proxy, toxic)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    collection.remove_toxic(&proxy, &toxic).await?;
    Ok(no_content())
}

async fn reset(State(collection): Shared) -> Result<Response, ApiError> {
    collection.reset().await?;
    Ok(no_content())
}

async fn version() -> Response {
    let body = serde_json::to_string(&VersionJson {
        version: VERSION.to_owned(),
    })
    .expect("a version is plain data");
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json;charset=utf-8")],
        body + "\n",
    )
        .into_response()
}
