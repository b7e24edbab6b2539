//! The orderer's operations router (Fabric `core/operations/system.go`): `GET /healthz`, `GET /version`,
//! `GET /metrics` (Prometheus text). It is served by [`ferrofabric_comm::serve_http`], the accept loop
//! the admin listener shares.

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use ferrofabric_comm::{health_response, version_response};

use crate::registrar::Registrar;

/// The operations router: `/healthz` answers `{"status":"OK","time":...}` while no channel is errored, else 503
/// with the failed checks; `/version` the build version; `/metrics` the node's counters.
pub(crate) fn router(registrar: Arc<Registrar>) -> Router {
    let health = registrar.clone();
    let metrics = registrar;
    Router::new()
        .route(
            "/healthz",
            get(move || async move {
                let failed = health
                    .channel_ids()
                    .into_iter()
                    .filter_map(|id| {
                        let reason = health.channel(&id)?.support.errored()?;
                        Some((format!("channel {id}"), reason))
                    })
                    .collect();
                health_response(failed)
            }),
        )
        .route("/version", any(|method: axum::http::Method| async move { version_response(&method) }))
        .route(
            "/metrics",
            get(move || async move {
                ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], metrics.metrics().prometheus()).into_response()
            }),
        )
        .fallback(|| async {
            Response::builder().status(StatusCode::NOT_FOUND).body(axum::body::Body::empty()).unwrap_or_default()
        })
}
