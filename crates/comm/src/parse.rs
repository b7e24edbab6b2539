//! Values of configuration files and flags: listen addresses and Go durations.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::CommError;

/// Parses a listen address `host:port`: an IPv4 address, a bracketed IPv6 address (`[::1]:7050`) or `localhost`
/// (read as 127.0.0.1), surrounding whitespace ignored. Other host names are not resolved: a listener binds an
/// address, and resolving would make the bound interface depend on the resolver. Port 0 lets the system pick.
///
/// Errors: anything else (no port, a bad port, a host name).
pub fn parse_addr(s: &str) -> Result<SocketAddr, CommError> {
    let s = s.trim();
    let fixed = s.strip_prefix("localhost:").map(|p| format!("127.0.0.1:{p}"));
    fixed.as_deref().unwrap_or(s).parse().map_err(|source| CommError::BadAddress { input: s.to_owned(), source })
}

/// Parses a non-negative Go duration (`1m30s`, `2.5s`, `250ms`, a bare `0`) with
/// [`ferrofabric_channelconfig::parse_go_duration_std`], the one Go-duration parser of the workspace.
///
/// Errors: an empty string, a missing or unknown unit, a bad number, a negative duration.
pub fn parse_duration(s: &str) -> Result<Duration, CommError> {
    Ok(ferrofabric_channelconfig::parse_go_duration_std(s)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("localhost:7050").unwrap(), "127.0.0.1:7050".parse().unwrap());
        assert_eq!(parse_addr(" 0.0.0.0:0 ").unwrap(), "0.0.0.0:0".parse().unwrap());
        assert_eq!(parse_addr("[::1]:7051").unwrap(), "[::1]:7051".parse().unwrap());
        assert!(parse_addr("nohost").is_err());
        assert!(parse_addr("localhost:x").is_err());
        assert!(parse_addr("orderer.example.com:7050").is_err());
        assert!(parse_addr("127.0.0.1").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("").is_err());
    }
}
