//! The channel participation API as `osnadmin` speaks it (Fabric
//! `orderer/common/channelparticipation/restapi.go`, JSON types from `orderer/common/types`):
//!
//! | request | answer |
//! |---|---|
//! | `GET /participation/v1/channels` | 200 `{"systemChannel":null,"channels":[{"name","url"}]}` (`null` when none) |
//! | `GET /participation/v1/channels/{name}` | 200 `{"name","url","consensusRelation","status","height"}`; 404 |
//! | `POST /participation/v1/channels` (multipart, file field `config-block`) | 201 + `Location`, channel info; 400; 405 if joined |
//! | `DELETE /participation/v1/channels/{name}` | 204; 404 |
//! | `GET /participation/v1/` | 302 to `/participation/v1/channels` |
//!
//! Errors are `{"error":"..."}`; other methods get 405 with an `Allow` header; an `Accept` header that rules out
//! JSON gets 406; a POST that is not `multipart/form-data` gets 400. Bodies end with a newline, as Go's
//! `json.Encoder` writes them.

use std::sync::Arc;

use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use serde::Serialize;

use crate::registrar::{validate_channel_id, ChannelState, JoinError, Registrar, RemoveError};

/// Base path of the API.
pub(crate) const URL_BASE: &str = "/participation/v1/channels";

/// Fabric `types.ChannelInfoShort`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct ChannelInfoShort {
    /// Channel name.
    pub name: String,
    /// Relative URL, `/participation/v1/channels/<name>`.
    pub url: String,
}

/// Fabric `types.ChannelList`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct ChannelList {
    /// Always `null`: system channels are not supported.
    #[serde(rename = "systemChannel")]
    pub system_channel: Option<ChannelInfoShort>,
    /// The application channels, `null` when there are none (as Go encodes a nil slice).
    pub channels: Option<Vec<ChannelInfoShort>>,
}

/// Fabric `types.ChannelInfo`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct ChannelInfo {
    /// Channel name.
    pub name: String,
    /// Relative URL.
    pub url: String,
    /// `consenter`, `follower`, `config-tracker` or `other`.
    #[serde(rename = "consensusRelation")]
    pub consensus_relation: String,
    /// `active`, `onboarding`, `inactive` or `failed`.
    pub status: String,
    /// Ledger height.
    pub height: u64,
}

impl From<ChannelState> for ChannelInfo {
    fn from(s: ChannelState) -> Self {
        ChannelInfo {
            url: format!("{URL_BASE}/{}", s.name),
            name: s.name,
            consensus_relation: s.relation.as_str().to_owned(),
            status: s.status.as_str().to_owned(),
            height: s.height,
        }
    }
}

#[derive(Clone)]
struct Api {
    registrar: Arc<Registrar>,
    enabled: bool,
}

fn json(status: StatusCode, body: &impl Serialize) -> Response {
    let mut text = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    text.push(b'\n');
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    json(status, &serde_json::json!({ "error": message.to_string() }))
}

fn not_allowed(message: impl std::fmt::Display, allow: &'static str) -> Response {
    let mut r = error(StatusCode::METHOD_NOT_ALLOWED, message);
    r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// Fabric `negotiateContentType`: JSON only. Returns the refusal, if any.
fn refuse_accept(headers: &HeaderMap) -> Option<Response> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty())?;
    if accept.split(',').any(|o| o.contains("application/json") || o.contains("application/*") || o.contains("*/*")) {
        None
    } else {
        Some(error(StatusCode::NOT_ACCEPTABLE, "response Content-Type is application/json only"))
    }
}

/// The API-disabled and content-negotiation refusals, if any.
fn preflight(api: &Api, headers: &HeaderMap) -> Option<Response> {
    if !api.enabled {
        return Some(error(StatusCode::SERVICE_UNAVAILABLE, "channel participation API is disabled"));
    }
    refuse_accept(headers)
}

fn no_store(mut r: Response) -> Response {
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn list(State(api): State<Api>, headers: HeaderMap) -> Response {
    if let Some(r) = preflight(&api, &headers) {
        return r;
    }
    let ids = api.registrar.channel_ids();
    let channels = (!ids.is_empty())
        .then(|| ids.into_iter().map(|name| ChannelInfoShort { url: format!("{URL_BASE}/{name}"), name }).collect());
    no_store(json(StatusCode::OK, &ChannelList { system_channel: None, channels }))
}

/// The refusal of a malformed channel ID, if any.
fn refuse_id(id: &str) -> Option<Response> {
    validate_channel_id(id).err().map(|e| error(StatusCode::BAD_REQUEST, format!("invalid channel ID: {e}")))
}

async fn info(State(api): State<Api>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = preflight(&api, &headers).or_else(|| refuse_id(&id)) {
        return r;
    }
    match api.registrar.state(&id) {
        Some(s) => no_store(json(StatusCode::OK, &ChannelInfo::from(s))),
        None => error(StatusCode::NOT_FOUND, "channel does not exist"),
    }
}

async fn remove(State(api): State<Api>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = preflight(&api, &headers).or_else(|| refuse_id(&id)) {
        return r;
    }
    let registrar = api.registrar.clone();
    match tokio::task::spawn_blocking(move || registrar.remove(&id)).await {
        Ok(Ok(())) => StatusCode::NO_CONTENT.into_response(),
        Ok(Err(e @ RemoveError::NotFound)) => error(StatusCode::NOT_FOUND, e),
        Ok(Err(e @ RemoveError::Failed(_))) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot remove: {e}")),
    }
}

async fn join(State(api): State<Api>, request: Request) -> Response {
    if let Some(r) = preflight(&api, request.headers()) {
        return r;
    }
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !content_type.trim_start().to_ascii_lowercase().starts_with("multipart/form-data") {
        let types: Vec<&str> =
            request.headers().get_all(header::CONTENT_TYPE).iter().filter_map(|v| v.to_str().ok()).collect();
        return error(StatusCode::BAD_REQUEST, format!("unsupported Content-Type: {types:?}"));
    }
    let block = match read_config_block(request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let registrar = api.registrar.clone();
    match tokio::task::spawn_blocking(move || registrar.join(block)).await {
        Ok(Ok(state)) => {
            let info = ChannelInfo::from(state);
            let mut r = json(StatusCode::CREATED, &info);
            if let Ok(v) = HeaderValue::from_str(&info.url) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
        Ok(Err(e @ JoinError::AlreadyExists)) => not_allowed(e, "GET, DELETE"),
        Ok(Err(e)) => error(StatusCode::BAD_REQUEST, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot join: {e}")),
    }
}

/// Reads the multipart form: exactly one part, named `config-block`.
async fn read_config_block(request: Request) -> Result<Bytes, Response> {
    let bad = |m: String| error(StatusCode::BAD_REQUEST, m);
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| bad(format!("cannot read form from request body: {}", e.body_text())))?;
    let mut block = None;
    let mut parts = 0;
    loop {
        let field = form.next_field().await.map_err(|e| bad(format!("cannot read form from request body: {e}")))?;
        let Some(field) = field else {
            break;
        };
        parts += 1;
        if field.name() == Some("config-block") && block.is_none() {
            let bytes = field
                .bytes()
                .await
                .map_err(|e| bad(format!("cannot read file part config-block from request body: {e}")))?;
            block = Some(bytes);
        }
    }
    let block = block.ok_or_else(|| bad("form does not contains part key: config-block".into()))?;
    if parts != 1 {
        return Err(bad("form contains too many parts".into()));
    }
    Ok(block)
}

async fn redirect() -> Response {
    (StatusCode::FOUND, [(header::LOCATION, URL_BASE)]).into_response()
}

async fn channels_not_allowed(request: Request) -> Response {
    not_allowed(format!("invalid request method: {}", request.method()), "GET, POST")
}

async fn channel_not_allowed(request: Request) -> Response {
    not_allowed(format!("invalid request method: {}", request.method()), "GET, DELETE")
}

/// The participation API router over `registrar`. `enabled` false answers 503 everywhere (Fabric's
/// `ChannelParticipation.Enabled`); `max_body` limits the join request body in bytes.
pub(crate) fn router(registrar: Arc<Registrar>, enabled: bool, max_body: usize) -> Router {
    let api = Api { registrar, enabled };
    Router::new()
        .route(URL_BASE, get(list).post(join).fallback(channels_not_allowed))
        .route(&format!("{URL_BASE}/{{name}}"), get(info).delete(remove).fallback(channel_not_allowed))
        .route("/participation/v1/", get(redirect))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(api)
}
