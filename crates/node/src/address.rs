//! The `host:port` form of a listener's address, as every component's configuration writes it.

/// `host:port`, with an IPv6 `host` in brackets.
pub(crate) fn addr(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
