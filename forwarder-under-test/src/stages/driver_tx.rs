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
    for i in 0..burst.n {
        let b = burst.buf[i];
        if burst.dst[i] != NIL {
            // nocache: the per-packet dst is released once the packet is handed on.
            rt.dst_obj_free(burst.dst[i]);
        }
        if tx.space() == 0 {
            ctr[Ctr::DropTxRingFull as usize] += 1;
            to_free.push(b);
            continue;
        }
        let o = nh_out.get(burst.nh[i] as usize).copied().unwrap_or(NhOut { dst_mac: None, src_mac: [0; 6], port: 0 });
        // SAFETY: the worker owns every buffer in its burst.
        let frame = unsafe { arena.buf_mut(b) };
        frame[0..6].copy_from_slice(&o.dst_mac.unwrap_or_else(|| mac_for(burst.daddr[i])));
        frame[6..12].copy_from_slice(&o.src_mac);
        tx.place(b, burst.len[i]);
    }
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
