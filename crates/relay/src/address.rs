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
        IpAddr::V6(v6) => IpAddr::V6(v6_prefix_of(v6, v6_prefix)),
    }
}

/// The first `bits` bits of `v6` (1-128), the rest zero.
fn v6_prefix_of(v6: Ipv6Addr, bits: u8) -> Ipv6Addr {
    let bits = u32::from(bits.clamp(1, 128));
    Ipv6Addr::from(u128::from(v6) & (u128::MAX << (128 - bits)))
}

/// The IPv6 networks whose connections are counted together besides each
/// client's own (`rate.connections_per_ipv6_56`, `…_48`): a /56 and a /48
/// are each one party's allocation however many /64s they hold.
pub const WIDER_V6_PREFIXES: [u8; 2] = [56, 48];

/// The wider networks an address counts in (see [`WIDER_V6_PREFIXES`]),
/// as `(prefix length, network)`; none for IPv4. Taken from a
/// [`client_key`] they are the same as from the full address, as long as
/// `relay.ipv6_prefix` is no wider than each.
pub fn wider_networks(address: IpAddr) -> Option<[(u8, IpAddr); 2]> {
    match address.to_canonical() {
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => {
            Some(WIDER_V6_PREFIXES.map(|bits| (bits, IpAddr::V6(v6_prefix_of(v6, bits)))))
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
    fn the_64s_of_one_48_share_their_56_and_48() {
        let net = |ip: &str| {
            wider_networks(client_key(ip.parse().unwrap(), 64))
                .unwrap()
                .map(|(bits, n)| format!("{n}/{bits}"))
        };
        assert_eq!(
            net("2001:db8:4b00:7f12:1::9"),
            ["2001:db8:4b00:7f00::/56", "2001:db8:4b00::/48"]
        );
        assert_eq!(
            net("2001:db8:4b00:7f12::1")[0],
            net("2001:db8:4b00:7fff::1")[0]
        );
        assert_ne!(
            net("2001:db8:4b00:7f12::1")[0],
            net("2001:db8:4b00:8012::1")[0]
        );
        assert_eq!(
            net("2001:db8:4b00:7f12::1")[1],
            net("2001:db8:4b00:ffff::1")[1]
        );
        assert_ne!(net("2001:db8:4b00::1")[1], net("2001:db8:4b01::1")[1]);
        assert!(wider_networks("192.0.2.7".parse().unwrap()).is_none());
        assert!(
            wider_networks("::ffff:192.0.2.7".parse().unwrap()).is_none(),
            "IPv4-mapped"
        );
    }

    #[test]
    fn ipv4_clients_count_by_their_address() {
        assert_eq!(key("192.0.2.7", 64), "192.0.2.7");
        assert_eq!(key("::ffff:192.0.2.7", 64), "192.0.2.7", "IPv4-mapped");
        assert_ne!(key("192.0.2.7", 1), key("192.0.2.8", 1));
    }
}
