//! Turning a broker's `host:port` into the addresses a connection tries,
//! afresh on every connect attempt (`client.dns.lookup`).
//!
//! Nothing here keeps an answer: a broker whose name moves to another
//! address (a replaced machine, a Kubernetes pod restarted elsewhere, a
//! failover record) is found at the next reconnect, not after a restart
//! of the producer. The Java client resolves again once it has tried
//! every address of its last answer; Courier resolves on every attempt
//! and tries every address of the answer in that attempt.
//!
//! The lookup itself is behind [`Resolve`], so that an application can
//! put its own discovery in front of the system resolver and a test can
//! answer with addresses of its choosing (as the Java client's
//! `HostResolver` is a seam for its tests). [`SystemResolver`] is the
//! default: `getaddrinfo` through tokio, and `getnameinfo` for the
//! canonical names of `resolve_canonical_bootstrap_servers_only`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::config::AddressFamily;

/// Looks up broker host names. Courier asks on every connect attempt and
/// keeps no answer.
pub trait Resolve: Send + Sync + 'static {
    /// Every address `host` has, with `port`, in the order to try them.
    /// The addresses may carry another port (a discovery service that
    /// knows better); connections use the port given here.
    fn lookup(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<Vec<SocketAddr>>>;

    /// `ip`'s canonical host name (a reverse lookup), for
    /// `client.dns.lookup=resolve_canonical_bootstrap_servers_only`. An
    /// error means "none": the address's text stands in, as in Java.
    fn canonical_name(&self, ip: IpAddr) -> BoxFuture<'static, io::Result<String>>;
}

/// The operating system's resolver: `getaddrinfo` (through tokio's
/// `lookup_host`) and `getnameinfo`, each on tokio's blocking pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<Vec<SocketAddr>>> {
        let host = host.to_string();
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect())
        })
    }

    fn canonical_name(&self, ip: IpAddr) -> BoxFuture<'static, io::Result<String>> {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || reverse_lookup(ip))
                .await
                .map_err(io::Error::other)?
        })
    }
}

/// `getnameinfo` with `NI_NAMEREQD`: the name, or an error when the
/// address has none.
fn reverse_lookup(ip: IpAddr) -> io::Result<String> {
    let sa = sockaddr_of(ip);
    let mut host = [0 as libc::c_char; libc::NI_MAXHOST as usize];
    // SAFETY: `sa` is a valid sockaddr of the length given, and `host` a
    // writable buffer of the length given; getnameinfo writes a
    // NUL-terminated string into it on success.
    let rc = unsafe {
        libc::getnameinfo(
            (&*sa.0 as *const libc::sockaddr_storage).cast(),
            sa.1,
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no name for {ip} (getnameinfo error {rc})"),
        ));
    }
    // SAFETY: on success the buffer holds a NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// `ip` as a `sockaddr_in` or `sockaddr_in6` in a buffer large enough for
/// either, with its length.
fn sockaddr_of(ip: IpAddr) -> (Box<libc::sockaddr_storage>, libc::socklen_t) {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut storage: Box<libc::sockaddr_storage> = Box::new(unsafe { std::mem::zeroed() });
    let len = match ip {
        IpAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and
            // suitably aligned for it.
            unsafe { std::ptr::write((&mut *storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        IpAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: 0,
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut *storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The resolver connections use (shared, cheap to clone).
#[derive(Clone)]
pub(crate) struct Resolver(pub(crate) Arc<dyn Resolve>);

impl Default for Resolver {
    fn default() -> Self {
        Resolver(Arc::new(SystemResolver))
    }
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolver")
    }
}

/// One address to try, with the host name that goes with it: the name
/// TLS checks the broker's certificate against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The name the address came from (the canonical name, for a
    /// bootstrap server under `resolve_canonical_bootstrap_servers_only`).
    pub(crate) host: String,
    /// The address.
    pub(crate) addr: SocketAddr,
}

/// `address` (`host:port`, `[v6]:port`) split into host and port.
pub(crate) fn split_host_port(address: &str) -> io::Result<(&str, u16)> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{address:?} is not host:port"),
        )
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse().map_err(|_| bad())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((host, port))
}

/// Every address to try for `address`, in order, of `family`, each
/// once. `canonical`: first replace the name by the canonical name of each
/// of its addresses, and resolve those (Java's
/// `resolve_canonical_bootstrap_servers_only`, for bootstrap servers).
/// An address literal is used as it is (looked up in reverse when
/// `canonical`).
pub(crate) async fn targets(
    address: &str,
    family: AddressFamily,
    canonical: bool,
    resolver: &dyn Resolve,
) -> io::Result<Vec<Target>> {
    let (host, port) = split_host_port(address)?;
    let literal = host.parse::<IpAddr>().ok();
    let first: Vec<SocketAddr> = match literal {
        Some(ip) => vec![SocketAddr::new(ip, port)],
        None => resolver.lookup(host, port).await?,
    };
    let mut found: Vec<Target> = Vec::new();
    let mut add = |host: &str, addrs: Vec<SocketAddr>| {
        for a in addrs {
            let a = SocketAddr::new(a.ip(), port);
            if family.admits(&a) && !found.iter().any(|t| t.addr == a) {
                found.push(Target {
                    host: host.to_string(),
                    addr: a,
                });
            }
        }
    };
    if !canonical {
        add(host, first);
    } else {
        let mut names: Vec<String> = Vec::new();
        for a in &first {
            let name = resolver
                .canonical_name(a.ip())
                .await
                .unwrap_or_else(|_| a.ip().to_string());
            if !names.contains(&name) {
                names.push(name);
            }
        }
        for name in names {
            let addrs = match name.parse::<IpAddr>() {
                Ok(ip) => vec![SocketAddr::new(ip, port)],
                // A canonical name that no longer resolves is left out,
                // as Java leaves out an unresolved one.
                Err(_) => match resolver.lookup(&name, port).await {
                    Ok(addrs) => addrs,
                    Err(e) => {
                        tracing::warn!(%address, canonical = %name, error = %e, "canonical name does not resolve");
                        continue;
                    }
                },
            };
            add(&name, addrs);
        }
    }
    if found.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{address} resolved to no address of broker.address.family {family:?}"),
        ));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_names_and_bracketed_v6() {
        assert_eq!(split_host_port("broker:9092").unwrap(), ("broker", 9092));
        assert_eq!(split_host_port("[::1]:9092").unwrap(), ("::1", 9092));
        assert!(split_host_port("broker").is_err());
        assert!(split_host_port("broker:x").is_err());
    }

    #[tokio::test]
    async fn the_system_resolver_finds_loopback_and_its_name() {
        let addrs = SystemResolver.lookup("localhost", 1).await.unwrap();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
        let name = SystemResolver
            .canonical_name("127.0.0.1".parse().unwrap())
            .await
            .unwrap();
        assert!(
            !name.is_empty() && name.parse::<IpAddr>().is_err(),
            "{name}"
        );
    }
}
