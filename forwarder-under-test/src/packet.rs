//! Ethernet + IPv4 frame layout: offsets, header construction for the traffic generator,
//! the Internet checksum, and the RFC 1624 incremental update used when TTL is decremented.

/// Ethernet header length.
pub const ETH_HLEN: usize = 14;
/// Minimum IPv4 header length.
pub const IP_HLEN: usize = 20;
/// UDP header length.
pub const UDP_HLEN: usize = 8;
/// EtherType of IPv4.
pub const ETH_P_IP: u16 = 0x0800;
/// Smallest frame the generator builds (without FCS), as on the wire: 64 bytes with FCS.
pub const MIN_FRAME: usize = 60;
/// Largest frame (1518 with FCS).
pub const MAX_FRAME: usize = 1514;

/// Offsets into the IPv4 header (from the start of the frame).
pub mod off {
    use super::ETH_HLEN;
    pub const ETHERTYPE: usize = 12;
    pub const VER_IHL: usize = ETH_HLEN;
    pub const TOS: usize = ETH_HLEN + 1;
    pub const TOT_LEN: usize = ETH_HLEN + 2;
    pub const TTL: usize = ETH_HLEN + 8;
    pub const PROTO: usize = ETH_HLEN + 9;
    pub const CSUM: usize = ETH_HLEN + 10;
    pub const SADDR: usize = ETH_HLEN + 12;
    pub const DADDR: usize = ETH_HLEN + 16;
    pub const L4: usize = ETH_HLEN + 20;
}

#[inline(always)]
pub fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
#[inline(always)]
pub fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline(always)]
pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
#[inline(always)]
pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// One's-complement sum of 16-bit big-endian words, folded and complemented.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// [`checksum`] of a 20-byte IPv4 header (no options), as five 32-bit words.
#[inline(always)]
pub fn checksum20(h: &[u8; 20]) -> u16 {
    let mut sum: u64 = 0;
    for i in 0..5 {
        sum += u64::from(u32::from_be_bytes([h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]]));
    }
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

/// RFC 1624 eqn. 3: new checksum after a 16-bit field changed from `old` to `new`.
#[inline(always)]
pub fn csum_update16(csum: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!csum) + u32::from(!old) + u32::from(new);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

/// A flow's addressing: what a generator needs to build its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub saddr: u32,
    pub daddr: u32,
    pub sport: u16,
    pub dport: u16,
    pub tos: u8,
}

/// Write an Ethernet/IPv4/UDP frame of `size` bytes (60..=1514) for `flow` into `buf`.
/// Only the headers are written; the payload keeps whatever bytes `buf` held.
pub fn build_frame(buf: &mut [u8], flow: &FlowKey, size: usize, ttl: u8, src_mac: [u8; 6], dst_mac: [u8; 6]) {
    debug_assert!((MIN_FRAME..=MAX_FRAME).contains(&size) && buf.len() >= off::L4 + UDP_HLEN);
    buf[0..6].copy_from_slice(&dst_mac);
    buf[6..12].copy_from_slice(&src_mac);
    put_u16(buf, off::ETHERTYPE, ETH_P_IP);
    let tot = (size - ETH_HLEN) as u16;
    buf[off::VER_IHL] = 0x45;
    buf[off::TOS] = flow.tos;
    put_u16(buf, off::TOT_LEN, tot);
    put_u16(buf, ETH_HLEN + 4, 0); // id
    put_u16(buf, ETH_HLEN + 6, 0x4000); // DF
    buf[off::TTL] = ttl;
    buf[off::PROTO] = 17;
    put_u16(buf, off::CSUM, 0);
    put_u32(buf, off::SADDR, flow.saddr);
    put_u32(buf, off::DADDR, flow.daddr);
    let c = checksum(&buf[ETH_HLEN..ETH_HLEN + IP_HLEN]);
    put_u16(buf, off::CSUM, c);
    put_u16(buf, off::L4, flow.sport);
    put_u16(buf, off::L4 + 2, flow.dport);
    put_u16(buf, off::L4 + 4, tot - IP_HLEN as u16);
    put_u16(buf, off::L4 + 6, 0); // no UDP checksum
}

/// Locally administered MAC derived from an IPv4 address (the synthetic neighbour table).
#[inline]
pub fn mac_for(addr: u32) -> [u8; 6] {
    let b = addr.to_be_bytes();
    [0x02, 0x00, b[0], b[1], b[2], b[3]]
}

/// MAC of the forwarder's own output port `p`.
#[inline]
pub fn port_mac(p: u16) -> [u8; 6] {
    let b = p.to_be_bytes();
    [0x02, 0xfd, 0x00, 0x00, b[0], b[1]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_known_header() {
        // RFC 1071 style example: header from a real capture.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn checksum20_matches_checksum() {
        let mut x: u32 = 12345;
        for _ in 0..10_000 {
            let mut h = [0u8; 20];
            for b in h.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            assert_eq!(checksum20(&h), checksum(&h));
        }
        assert_eq!(checksum20(&[0xff; 20]), checksum(&[0xff; 20]));
    }

    #[test]
    fn incremental_update_matches_full_recompute() {
        let mut buf = [0u8; 64];
        let f = FlowKey { saddr: 0xC612_0001, daddr: 0x0808_0808, sport: 1, dport: 2, tos: 0 };
        for ttl in 2..=255u8 {
            build_frame(&mut buf, &f, 64, ttl, [0; 6], [0; 6]);
            let old = get_u16(&buf, off::TTL);
            buf[off::TTL] -= 1;
            let new = get_u16(&buf, off::TTL);
            let inc = csum_update16(get_u16(&buf, off::CSUM), old, new);
            put_u16(&mut buf, off::CSUM, 0);
            let full = checksum(&buf[ETH_HLEN..ETH_HLEN + IP_HLEN]);
            assert_eq!(inc, full, "ttl {ttl}");
        }
    }
}
