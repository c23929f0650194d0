//! Stage driver tx: reclaim buffers the device has sent, rewrite MAC addresses from the
//! neighbour table, place packets on the tx ring and ring the doorbell.

use crate::burst::NIL;
use crate::burst::{Burst, StageClock, MAX_BURST};
use crate::nic::afpacket::AfpTx;
use crate::nic::{BufferArena, TxRing};
use crate::packet::mac_for;
use crate::rtcache::RtCache;
use crate::slab::{fwd_slab_free_bulk, SlabCache};
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

/// Transmit a burst (stage: driver).
#[no_mangle]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn fwd_driver_tx_burst(
    tx: &mut TxRing,
    arena: &BufferArena,
    burst: &Burst,
    nh_out: &[NhOut],
    bufs: &mut SlabCache,
    rt: &mut RtCache,
    ctr: &mut [u64],
    clk: &mut StageClock,
    port: Option<&mut AfpTx>,
) {
    fwd_driver_tx_reclaim(tx, bufs, clk);
    let mut dropped = [0u32; MAX_BURST];
    let mut nd = 0;
    for i in 0..burst.n {
        let b = burst.buf[i];
        if burst.dst[i] != NIL {
            // nocache: the per-packet dst is released once the packet is handed on.
            rt.dst_obj_free(burst.dst[i]);
        }
        if tx.space() == 0 {
            ctr[Ctr::DropTxRingFull as usize] += 1;
            dropped[nd] = b;
            nd += 1;
            continue;
        }
        let o = nh_out.get(burst.nh[i] as usize).copied().unwrap_or(NhOut { dst_mac: None, src_mac: [0; 6], port: 0 });
        // SAFETY: the worker owns every buffer in its burst.
        let frame = unsafe { arena.buf_mut(b) };
        frame[0..6].copy_from_slice(&o.dst_mac.unwrap_or_else(|| mac_for(burst.daddr[i])));
        frame[6..12].copy_from_slice(&o.src_mac);
        tx.place(b, burst.len[i]);
    }
    if nd > 0 {
        clk.nested(Ctr::ClkSlab, || fwd_slab_free_bulk(bufs, &dropped[..nd]));
    }
    match port {
        Some(p) => fwd_driver_afp_tx_doorbell(p, tx, arena, ctr),
        None => fwd_driver_tx_doorbell(tx, ctr),
    }
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

/// Free the buffers of descriptors the device has completed (stage: driver).
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_tx_reclaim(tx: &mut TxRing, bufs: &mut SlabCache, clk: &mut StageClock) {
    let mut tmp = [0u32; MAX_BURST];
    while tx.clean < tx.head {
        let n = ((tx.head - tx.clean) as usize).min(MAX_BURST);
        for (j, t) in tmp[..n].iter_mut().enumerate() {
            *t = tx.slot(tx.clean + j as u64).0;
        }
        tx.clean += n as u64;
        clk.nested(Ctr::ClkSlab, || fwd_slab_free_bulk(bufs, &tmp[..n]));
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
