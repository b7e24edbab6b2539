//! The operations server (Fabric `core/operations/system.go`): `GET /healthz` and `GET /version` in Fabric's
//! format, `GET /metrics` in Prometheus text format, and the HTTP(S) accept loop the orderer's admin listener shares.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::shutdown::Shutdown;

/// Health of a service as `/healthz` reports it: `None` = OK, `Some(reason)` = failed.
pub type Health = watch::Receiver<Option<String>>;

/// `time` as RFC 3339 UTC with second precision (`2025-01-01T00:00:00Z`).
pub(crate) fn rfc3339(time: SystemTime) -> String {
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

/// Fabric's `/healthz` answer for the failed checks `(component, reason)`: 200 `{"status":"OK","time":...}` when
/// there are none, else 503 `{"status":"Service Unavailable","time":...,"failed_checks":[{component, reason}]}`.
pub fn health_response(failed: Vec<(String, String)>) -> Response {
    let now = rfc3339(SystemTime::now());
    if failed.is_empty() {
        return (StatusCode::OK, axum::Json(serde_json::json!({"status": "OK", "time": now}))).into_response();
    }
    let checks: Vec<serde_json::Value> =
        failed.into_iter().map(|(c, r)| serde_json::json!({"component": c, "reason": r})).collect();
    let body = serde_json::json!({"status": "Service Unavailable", "time": now, "failed_checks": checks});
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
}

/// Fabric's `/version` answer (`core/operations/version.go`): 200 `{"CommitSHA":…,"Version":…}` for a GET, 400
/// `{"Error":"invalid request method: M"}` for any other method. Version is this build's crate version.
pub fn version_response(method: &axum::http::Method) -> Response {
    if method == axum::http::Method::GET {
        let body = serde_json::json!({"CommitSHA": "ferrofabric", "Version": env!("CARGO_PKG_VERSION")});
        return (StatusCode::OK, axum::Json(body)).into_response();
    }
    let body = serde_json::json!({"Error": format!("invalid request method: {method}")});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The text exposition of `registry` (`/metrics`).
pub(crate) fn metrics_response(registry: &Registry) -> Response {
    let mut out = Vec::new();
    match TextEncoder::new().encode(&registry.gather(), &mut out) {
        Ok(()) => ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], out).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The operations router of a daemon whose metrics are in a Prometheus `registry` and whose health is one check
/// named `component`: `/metrics`, `/healthz` and `/version`.
pub fn router(registry: Arc<Registry>, health: Health, component: &'static str) -> Router {
    Router::new()
        .route("/metrics", get(move || std::future::ready(metrics_response(&registry))))
        .route(
            "/healthz",
            get(move || {
                let failed = health.borrow().clone();
                let failed = failed.map(|reason| (component.to_owned(), reason)).into_iter().collect();
                std::future::ready(health_response(failed))
            }),
        )
        .route("/version", any(|method: axum::http::Method| std::future::ready(version_response(&method))))
}

/// Serves `router` on `listener` (HTTP/1.1 and HTTP/2, TLS if `tls` is given) until `shutdown` fires. Connection
/// errors (bad TLS handshakes, resets) only end that connection.
pub async fn serve_http(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut shutdown: Shutdown,
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
            _ = shutdown.recv() => return,
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

/// Binds `addr` and serves `router` on it (plain HTTP) until `shutdown` fires; returns the bound address and the
/// server task.
///
/// Errors: the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: Shutdown,
) -> Result<(SocketAddr, JoinHandle<()>), crate::CommError> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((bound, tokio::spawn(serve_http(listener, router, None, shutdown))))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + std::time::Duration::from_secs(1_735_689_600)), "2025-01-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH + std::time::Duration::from_secs(951_827_696)), "2000-02-29T12:34:56Z");
    }

    #[test]
    fn health_reports_failed_checks() {
        assert_eq!(health_response(Vec::new()).status(), StatusCode::OK);
        let r = health_response(vec![("committer".into(), "disk full".into())]);
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test]
    async fn version_answers_a_get_and_refuses_other_methods_as_fabric_does() {
        let body = |r: Response| async {
            let bytes = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
            serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
        };
        let ok = version_response(&axum::http::Method::GET);
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(body(ok).await["Version"], env!("CARGO_PKG_VERSION"));
        let refused = version_response(&axum::http::Method::POST);
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        assert_eq!(body(refused).await, serde_json::json!({"Error": "invalid request method: POST"}));
    }
}
