//! The operations listener (Fabric `core/operations/system.go`): `GET /healthz`, `GET /version`,
//! `GET /metrics` (Prometheus text), plus the HTTP(S) accept loop shared with the admin listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::registrar::Registrar;

/// `time` as RFC 3339 UTC with second precision (`2025-01-01T00:00:00Z`).
fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The operations router: `/healthz` answers `{"status":"OK","time":...}` while no channel is errored, else 503
/// with the failed checks; `/version` the build version; `/metrics` the node's counters.
pub fn router(registrar: Arc<Registrar>) -> Router {
    let health = registrar.clone();
    let metrics = registrar;
    Router::new()
        .route(
            "/healthz",
            get(move || async move {
                let now = rfc3339(SystemTime::now());
                let failed: Vec<serde_json::Value> = health
                    .channel_ids()
                    .into_iter()
                    .filter_map(|id| {
                        let reason = health.channel(&id)?.support.errored()?;
                        Some(serde_json::json!({"component": format!("channel {id}"), "reason": reason}))
                    })
                    .collect();
                let (status, body) = if failed.is_empty() {
                    (StatusCode::OK, serde_json::json!({"status": "OK", "time": now}))
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        serde_json::json!({"status": "Service Unavailable", "time": now, "failed_checks": failed}),
                    )
                };
                (status, axum::Json(body)).into_response()
            }),
        )
        .route(
            "/version",
            get(|| async {
                axum::Json(serde_json::json!({"Version": env!("CARGO_PKG_VERSION"), "CommitSHA": "ferrofabric"}))
            }),
        )
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

/// Serves `router` on `listener` (HTTP/1.1 and HTTP/2, TLS if `tls` is given) until `shutdown` turns true.
/// Connection errors (bad TLS handshakes, resets) only end that connection.
pub async fn serve_http(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let (stream, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = async { let _ = shutdown.wait_for(|s| *s).await; } => return,
        };
        let service = TowerToHyperService::new(router.clone());
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let result = match acceptor {
                Some(a) => match a.accept(stream).await {
                    Ok(tls) => builder.serve_connection(TokioIo::new(tls), service).await,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                },
                None => builder.serve_connection(TokioIo::new(stream), service).await,
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + std::time::Duration::from_secs(1_735_689_600)), "2025-01-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + std::time::Duration::from_secs(951_827_696)), "2000-02-29T12:34:56Z");
    }
}
