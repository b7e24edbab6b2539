//! The orderer's channel participation API (`osnadmin`): joining a node to the bench channel and removing it.

use anyhow::{bail, Context};

/// One request to the participation API over plain HTTP at `admin` (the channel join's multipart upload of the
/// genesis block, the channel's removal): the status, an error for a status of 300 or more.
pub(crate) async fn http_request(
    admin: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> anyhow::Result<u16> {
    let addr = ferrofabric_comm::parse_addr(admin)?;
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("Content-Type", content_type)
        .body(body.to_vec())?;
    let (method, path) = (method.to_owned(), path.to_owned());
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into();
        let mut response = agent.run(request).with_context(|| format!("{method} {path} at {addr}"))?;
        let status = response.status().as_u16();
        if status >= 300 {
            let text = response.body_mut().read_to_string().unwrap_or_default();
            bail!("{method} {path}: HTTP {status}: {text}");
        }
        Ok(status)
    })
    .await?
}

pub(crate) async fn join_channel(admin: &str, genesis: &[u8]) -> anyhow::Result<()> {
    let boundary = "ferrofabric-bench-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"config-block\"; filename=\"genesis.block\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(genesis);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    http_request(
        admin,
        "POST",
        "/participation/v1/channels",
        &format!("multipart/form-data; boundary={boundary}"),
        &body,
    )
    .await
    .map(|_| ())
}
