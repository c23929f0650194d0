//! Stage ip: validate the Ethernet and IPv4 headers as ip_rcv and ip_forward do, drop with
//! a counted reason, and decrement TTL with an incremental checksum update.

use crate::burst::Burst;
use crate::cpu::prefetch_ptr;
use crate::nic::BufferArena;
use crate::packet::{checksum, checksum20, csum_update16, get_u16, get_u32, off, put_u16, ETH_HLEN, ETH_P_IP, IP_HLEN};
use fwd_abi::Ctr;

/// What the ip stage learned of a valid packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    pub saddr: u32,
    pub daddr: u32,
    pub tos: u8,
}

/// Check one frame, in ip_rcv's order; on success decrement TTL and patch the checksum.
/// On failure returns the drop counter and leaves the frame as it was.
#[inline]
pub fn ip_validate_and_forward(frame: &mut [u8]) -> Result<IpHeader, Ctr> {
    if frame.len() < ETH_HLEN + IP_HLEN {
        return Err(Ctr::DropRunt);
    }
    if get_u16(frame, off::ETHERTYPE) != ETH_P_IP {
        return Err(Ctr::DropNotIpv4);
    }
    let vihl = frame[off::VER_IHL];
    if vihl >> 4 != 4 {
        return Err(Ctr::DropBadVersion);
    }
    let ihl = usize::from(vihl & 0x0f) * 4;
    if ihl < IP_HLEN || ETH_HLEN + ihl > frame.len() {
        return Err(Ctr::DropBadIhl);
    }
    let sum = match <&[u8; IP_HLEN]>::try_from(&frame[ETH_HLEN..ETH_HLEN + ihl]) {
        Ok(h) => checksum20(h),
        Err(_) => checksum(&frame[ETH_HLEN..ETH_HLEN + ihl]),
    };
    if sum != 0 {
        return Err(Ctr::DropBadChecksum);
    }
    let tot = usize::from(get_u16(frame, off::TOT_LEN));
    if tot < ihl || tot > frame.len() - ETH_HLEN {
        return Err(Ctr::DropBadTotalLength);
    }
    if ihl > IP_HLEN {
        return Err(Ctr::DropIpOptions);
    }
    let ttl = frame[off::TTL];
    if ttl <= 1 {
        return Err(Ctr::DropTtlExceeded);
    }
    let old = get_u16(frame, off::TTL);
    frame[off::TTL] = ttl - 1;
    let new = get_u16(frame, off::TTL);
    let c = csum_update16(get_u16(frame, off::CSUM), old, new);
    put_u16(frame, off::CSUM, c);
    Ok(IpHeader { saddr: get_u32(frame, off::SADDR), daddr: get_u32(frame, off::DADDR), tos: frame[off::TOS] })
}

/// Validate a burst (stage: ip). Survivors are compacted to the front of `burst`; dropped
/// buffers are appended to `dropped` for the worker to free. Headers of packets `i+1..=i+k`
/// are prefetched while packet `i` is checked (prime, steady and drain loops).
#[no_mangle]
#[inline(never)]
pub fn fwd_ip_input_burst(
    arena: &BufferArena,
    burst: &mut Burst,
    prefetch: usize,
    ctr: &mut [u64],
    dropped: &mut Vec<u32>,
) {
    let n = burst.n;
    let k = prefetch.min(n);
    for i in 0..k {
        prefetch_ptr(arena.ptr(burst.buf[i]));
    }
    let mut out = 0;
    for i in 0..n {
        if i + k < n {
            prefetch_ptr(arena.ptr(burst.buf[i + k]));
        }
        let b = burst.buf[i];
        let len = usize::from(burst.len[i]).min(arena.buf_len());
        // SAFETY: the worker owns every buffer in its burst.
        let frame = unsafe { &mut arena.buf_mut(b)[..len] };
        match ip_validate_and_forward(frame) {
            Ok(h) => {
                burst.buf[out] = b;
                burst.len[out] = burst.len[i];
                burst.saddr[out] = h.saddr;
                burst.daddr[out] = h.daddr;
                burst.tos[out] = h.tos;
                out += 1;
            }
            Err(reason) => {
                ctr[reason as usize] += 1;
                dropped.push(b);
            }
        }
    }
    burst.n = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{build_frame, FlowKey};

    fn good() -> Vec<u8> {
        let mut b = vec![0u8; 60];
        let f = FlowKey { saddr: 0xC612_0001, daddr: 0x0808_0808, sport: 1, dport: 2, tos: 0 };
        build_frame(&mut b, &f, 60, 64, [0; 6], [0; 6]);
        b
    }

    #[test]
    fn every_drop_reason() {
        let mut f = good();
        assert_eq!(ip_validate_and_forward(&mut f[..30]), Err(Ctr::DropRunt));
        let mut f = good();
        f[12] = 0x86;
        f[13] = 0xdd;
        assert_eq!(ip_validate_and_forward(&mut f), Err(Ctr::DropNotIpv4));
        let mut f = good();
        f[14] = 0x65;
        assert_eq!(ip_validate_and_forward(&mut f), Err(Ctr::DropBadVersion));
        let mut f = good();
        f[14] = 0x44;
        assert_eq!(ip_validate_and_forward(&mut f), Err(Ctr::DropBadIhl));
        let mut f = good();
        f[30] ^= 1;
        assert_eq!(ip_validate_and_forward(&mut f), Err(Ctr::DropBadChecksum));
        // Total length larger than the frame (checksum fixed up so only the length is wrong).
        let mut f = good();
        put_u16(&mut f, off::TOT_LEN, 100);
        put_u16(&mut f, off::CSUM, 0);
        let c = checksum(&f[14..34]);
        put_u16(&mut f, off::CSUM, c);
        assert_eq!(ip_validate_and_forward(&mut f), Err(Ctr::DropBadTotalLength));
        // IHL 6 (one option word), valid checksum.
        let mut f = good();
        f[14] = 0x46;
        put_u16(&mut f, off::CSUM, 0);
        let c = checksum(&f[14..38]);
        put_u16(&mut f, off::CSUM, c);
        assert_eq!(ip_validate_and_forward(&mut f), Err(Ctr::DropIpOptions));
        for ttl in [0u8, 1] {
            let mut f = vec![0u8; 60];
            let fl = FlowKey { saddr: 1, daddr: 2, sport: 1, dport: 2, tos: 0 };
            build_frame(&mut f, &fl, 60, ttl, [0; 6], [0; 6]);
            assert_eq!(ip_validate_and_forward(&mut f), Err(Ctr::DropTtlExceeded));
        }
    }

    #[test]
    fn forwarding_decrements_ttl_and_keeps_checksum_valid() {
        let mut f = good();
        let h = ip_validate_and_forward(&mut f).unwrap();
        assert_eq!(h, IpHeader { saddr: 0xC612_0001, daddr: 0x0808_0808, tos: 0 });
        assert_eq!(f[off::TTL], 63);
        assert_eq!(checksum(&f[14..34]), 0);
    }
}
