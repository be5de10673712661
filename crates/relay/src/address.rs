//! Client addresses as the per-address limits count them.
//!
//! An IPv4 address is one client. An IPv6 host is usually given a whole
//! /64 (RFC 6177; SLAAC and privacy addresses pick any of its 2^64
//! addresses), so counting by the full address would let one client be as
//! many clients as it likes: IPv6 clients are grouped by a prefix
//! (`relay.ipv6_prefix`, 64 by default). IPv4 behind carrier-grade NAT is
//! the opposite case: many people share one address, and so one share.

use std::net::{IpAddr, Ipv6Addr};

/// The address the per-address limits key on: `ip` itself for IPv4 (and
/// IPv4-mapped IPv6), its first `v6_prefix` bits for IPv6.
pub fn client_key(ip: IpAddr, v6_prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let bits = u32::from(v6_prefix.clamp(1, 128));
            let mask = u128::MAX << (128 - bits);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ip: &str, prefix: u8) -> String {
        client_key(ip.parse().unwrap(), prefix).to_string()
    }

    #[test]
    fn ipv6_clients_count_by_their_prefix() {
        assert_eq!(key("2001:db8:1:2:aaaa::1", 64), "2001:db8:1:2::");
        assert_eq!(
            key("2001:db8:1:2:aaaa::1", 64),
            key("2001:db8:1:2:ffff:1:2:3", 64),
            "one /64, one client"
        );
        assert_ne!(key("2001:db8:1:2::1", 64), key("2001:db8:1:3::1", 64));
        assert_eq!(key("2001:db8:1:2::1", 48), key("2001:db8:1:3::1", 48));
        assert_eq!(key("2001:db8::1", 128), "2001:db8::1");
    }

    #[test]
    fn ipv4_clients_count_by_their_address() {
        assert_eq!(key("192.0.2.7", 64), "192.0.2.7");
        assert_eq!(key("::ffff:192.0.2.7", 64), "192.0.2.7", "IPv4-mapped");
        assert_ne!(key("192.0.2.7", 1), key("192.0.2.8", 1));
    }
}
