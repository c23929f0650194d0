//! Stage driver tx: reclaim buffers the device has sent, rewrite MAC addresses from the
//! neighbour table, place packets on the tx ring and ring the doorbell. Buffers to free
//! (reclaimed, or dropped at a full ring) and per-packet dsts are handed to the slab stage
//! that follows, not freed here.

use crate::burst::Burst;
use crate::burst::NIL;
use crate::nic::afpacket::AfpTx;
use crate::nic::afxdp::XskQueue;
use crate::nic::{BufferArena, TxRing};
use crate::packet::mac_for;
use crate::rtcache::RtCache;
use fwd_abi::Ctr;

/// Output side of a next hop, resolved once from the table (the synthetic neighbour table
/// gives every gateway a MAC).
#[derive(Debug, Clone, Copy)]
pub struct NhOut {
    /// Destination MAC, or `None` for a connected route (the packet's daddr is the neighbour).
    pub dst_mac: Option<[u8; 6]>,
    pub src_mac: [u8; 6],
    pub port: u16,
}

/// Transmit a burst (stage: driver). Buffers to free go to `to_free` (reclaimed ones and
/// those a full ring dropped); per-packet dsts are released to the route cache.
#[no_mangle]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn fwd_driver_tx_burst(
    tx: &mut TxRing,
    arena: &BufferArena,
    burst: &Burst,
    nh_out: &[NhOut],
    rt: &mut RtCache,
    ctr: &mut [u64],
    to_free: &mut Vec<u32>,
    port: Port<'_>,
) {
    fwd_driver_tx_reclaim(tx, to_free);
    let n = burst.n;
    // nocache: each packet's dst is released once the packet is handed on.
    for &d in &burst.dst[..n] {
        if d != NIL {
            rt.dst_obj_free(d);
        }
    }
    // What the ring takes, from the front, decided once: placing only ever shrinks the room.
    let fit = n.min(tx.space());
    for i in 0..fit {
        let b = burst.buf[i];
        let o = nh_out.get(burst.nh[i] as usize).copied().unwrap_or(NhOut { dst_mac: None, src_mac: [0; 6], port: 0 });
        // SAFETY: the worker owns every buffer in its burst.
        let frame = unsafe { arena.buf_mut(b) };
        frame[0..6].copy_from_slice(&o.dst_mac.unwrap_or_else(|| mac_for(burst.daddr[i])));
        frame[6..12].copy_from_slice(&o.src_mac);
        tx.place(b, burst.len[i]);
    }
    ctr[Ctr::DropTxRingFull as usize] += (n - fit) as u64;
    to_free.extend_from_slice(&burst.buf[fit..n]);
    match port {
        Port::Afp(p) => fwd_driver_afp_tx_doorbell(p, tx, arena, ctr),
        Port::Xdp(q) => fwd_driver_xdp_tx_doorbell(q, tx, ctr, to_free),
        Port::Synthetic => fwd_driver_tx_doorbell(tx, ctr),
    }
}

/// Where a burst's frames go: the synthetic device, an AF_PACKET tx ring, or an XSK tx ring.
pub enum Port<'a> {
    Synthetic,
    Afp(&'a mut AfpTx),
    Xdp(&'a mut XskQueue),
}

/// afxdp doorbell: put the placed frames' descriptors on the XSK tx ring (the buffers go
/// with them), wake the kernel, and take back what the completion ring returned (stage:
/// driver). `tx_packets` counts completions; a full XSK tx ring drops with
/// `drop_tx_ring_full`.
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_xdp_tx_doorbell(q: &mut XskQueue, tx: &mut TxRing, ctr: &mut [u64], to_free: &mut Vec<u32>) {
    let full = q.send(tx, to_free);
    ctr[Ctr::DropTxRingFull as usize] += full;
    let d = q.reclaim(to_free);
    ctr[Ctr::TxPackets as usize] += d.sent;
    ctr[Ctr::TxBytes as usize] += d.bytes;
}

/// afxdp, when an rx poll came back empty: wake the kernel for the frames waiting for a
/// batch (after a few empty polls in a row), and give the buffers it finished sending back
/// to the slab (through `to_free`) (stage: driver).
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_xdp_tx_complete(q: &mut XskQueue, ctr: &mut [u64], to_free: &mut Vec<u32>) {
    q.idle_kick();
    let d = q.reclaim(to_free);
    ctr[Ctr::TxPackets as usize] += d.sent;
    ctr[Ctr::TxBytes as usize] += d.bytes;
}

/// afpacket doorbell: copy the placed frames into the kernel's tx ring and kick it
/// (stage: driver). `tx_packets` counts frames the kernel has finished with; a full kernel
/// ring drops with `drop_tx_ring_full`, a refused frame counts as `drop_tx_error`.
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_afp_tx_doorbell(port: &mut AfpTx, tx: &mut TxRing, arena: &BufferArena, ctr: &mut [u64]) {
    let (full, done) = port.send(tx, arena);
    count_tx(ctr, full, done);
}

/// afpacket: the rx poll came back empty: send the frames waiting for a batch (stage:
/// driver).
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_afp_tx_flush(port: &mut AfpTx, ctr: &mut [u64]) {
    let done = port.flush();
    count_tx(ctr, 0, done);
}

/// Add what an afpacket send or drain reported to the counters.
pub fn count_tx(ctr: &mut [u64], full: u64, done: crate::nic::afpacket::TxDone) {
    ctr[Ctr::DropTxRingFull as usize] += full;
    ctr[Ctr::TxPackets as usize] += done.sent;
    ctr[Ctr::TxBytes as usize] += done.bytes;
    ctr[Ctr::DropTxError as usize] += done.refused;
}

/// Take back the buffers of descriptors the device has completed, into `to_free` (stage:
/// driver; the slab stage frees them).
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_tx_reclaim(tx: &mut TxRing, to_free: &mut Vec<u32>) {
    while tx.clean < tx.head {
        to_free.push(tx.slot(tx.clean).0);
        tx.clean += 1;
    }
}

/// Ring the doorbell: the synthetic device sends everything placed and completes it at once.
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_tx_doorbell(tx: &mut TxRing, ctr: &mut [u64]) {
    let mut bytes = 0u64;
    for s in tx.head..tx.tail {
        bytes += u64::from(tx.slot(s).1);
    }
    ctr[Ctr::TxPackets as usize] += tx.tail - tx.head;
    ctr[Ctr::TxBytes as usize] += bytes;
    tx.head = tx.tail;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RtParams;

    /// A burst larger than the ring's room: the front of the burst is placed with its MACs
    /// rewritten, the rest is dropped as `drop_tx_ring_full` and its buffers go to `to_free`
    /// in order; every packet's dst is released, placed or not.
    #[test]
    fn a_full_ring_takes_the_front_and_drops_the_rest_counted() {
        let arena = BufferArena::new(64).unwrap();
        let mut tx = TxRing::new(8);
        // 5 of the 8 slots hold frames the device has not completed: room for 3.
        for b in 40..45 {
            tx.place(b, 60);
        }
        let mut rt = RtCache::new(&RtParams::default(), 64, 1);
        let mut burst = Burst { n: 6, ..Default::default() };
        for i in 0..6 {
            burst.buf[i] = i as u32;
            burst.len[i] = 60;
            burst.nh[i] = (i % 2) as u32;
            burst.daddr[i] = 0xC612_0000 + i as u32;
            burst.dst[i] = 10 + i as u32;
        }
        let nh_out = [
            NhOut { dst_mac: Some([1, 1, 1, 1, 1, 1]), src_mac: [2, 2, 2, 2, 2, 2], port: 0 },
            NhOut { dst_mac: None, src_mac: [3, 3, 3, 3, 3, 3], port: 0 },
        ];
        let mut ctr = vec![0u64; fwd_abi::N_COUNTERS];
        let mut to_free = Vec::new();
        fwd_driver_tx_burst(&mut tx, &arena, &burst, &nh_out, &mut rt, &mut ctr, &mut to_free, Port::Synthetic);
        // The doorbell completed everything placed: the 5 earlier frames and 3 of the burst.
        assert_eq!(ctr[Ctr::TxPackets as usize], 8);
        assert_eq!(ctr[Ctr::DropTxRingFull as usize], 3);
        assert_eq!(to_free, vec![3, 4, 5]);
        let placed: Vec<u32> = (tx.clean..tx.head).map(|s| tx.slot(s).0).collect();
        assert_eq!(placed, vec![40, 41, 42, 43, 44, 0, 1, 2]);
        for i in 0..3u32 {
            // SAFETY: the test owns the arena.
            let f = unsafe { &arena.buf_mut(i)[..12] };
            let want_dst = if i % 2 == 0 { [1; 6] } else { mac_for(0xC612_0000 + i) };
            let want_src = if i % 2 == 0 { [2; 6] } else { [3; 6] };
            assert_eq!((&f[..6], &f[6..12]), (&want_dst[..], &want_src[..]), "frame {i}");
        }
        assert_eq!(rt.dst_released, 6, "every packet's dst released");
    }
}
