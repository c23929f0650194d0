//! Packet I/O: the packet-buffer arena and the rx/tx descriptor rings of a NIC queue.
//!
//! Buffer ownership follows the descriptors, as with a real NIC: a buffer index belongs to
//! exactly one of the slab (free), the rx ring (posted, then written by the device), the
//! worker (in processing) or the tx ring (until completion). Hand-offs go through a
//! descriptor word stored with Release and loaded with Acquire, so a buffer's bytes are
//! visible to whoever receives it.
//!
//! [`synthetic`] is the in-memory NIC whose "DMA engine" is a traffic generator.

pub mod afpacket;
pub mod afxdp;
pub mod synthetic;
pub mod xdp_sys;

use crate::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes per packet buffer (room for a 1514-byte frame, cache-line multiple).
pub const BUF_SIZE: usize = 2048;
/// Distance between buffers: 33 cache lines. An odd number of lines spreads the first
/// line of consecutive buffers over every cache set; with a 2048-byte stride they would
/// all fall in 1/32 of the sets (what DPDK's mempool avoids by spreading objects).
pub const BUF_STRIDE: usize = BUF_SIZE + 64;

/// Fixed-size packet buffers in one anonymous mapping. A buffer's frame starts `headroom`
/// bytes into its stride (0, or the 256 bytes AF_XDP leaves before a received frame).
pub struct BufferArena {
    mem: memmap2::MmapMut,
    count: u32,
    headroom: usize,
}

// SAFETY: buffers are handed between threads only through ring descriptors with
// Release/Acquire ordering, and each buffer has a single owner at a time (module docs).
unsafe impl Sync for BufferArena {}

impl BufferArena {
    pub fn new(count: u32) -> Result<BufferArena> {
        BufferArena::with_headroom(count, 0)
    }

    /// Buffers whose frames start `headroom` bytes into their stride (at most 256).
    pub fn with_headroom(count: u32, headroom: usize) -> Result<BufferArena> {
        if headroom > 256 {
            return Err(Error::Config(format!("buffer headroom {headroom}: expected at most 256 bytes")));
        }
        let mem = memmap2::MmapOptions::new()
            .len(count as usize * BUF_STRIDE)
            .map_anon()
            .map_err(|e| Error::Sys { what: format!("mapping {count} packet buffers"), source: e })?;
        Ok(BufferArena { mem, count, headroom })
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// Distance between buffers (an AF_XDP UMEM's chunk size).
    pub fn stride(&self) -> usize {
        BUF_STRIDE
    }

    /// Start of the mapping (page aligned).
    pub fn base(&self) -> *mut u8 {
        self.mem.as_ptr() as *mut u8
    }

    /// Bytes of the mapping.
    pub fn region_len(&self) -> usize {
        self.mem.len()
    }

    /// Bytes a frame may have: BUF_SIZE, or what the stride leaves after the headroom.
    #[inline(always)]
    pub fn buf_len(&self) -> usize {
        if self.headroom == 0 {
            BUF_SIZE
        } else {
            BUF_STRIDE - self.headroom
        }
    }

    /// Raw pointer to buffer `idx`.
    #[inline(always)]
    pub fn ptr(&self, idx: u32) -> *mut u8 {
        debug_assert!(idx < self.count);
        self.mem.as_ptr().wrapping_add(idx as usize * BUF_STRIDE + self.headroom) as *mut u8
    }

    /// The bytes of buffer `idx`.
    ///
    /// # Safety
    /// The caller must own buffer `idx` (module docs) for the lifetime of the slice.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn buf_mut(&self, idx: u32) -> &mut [u8] {
        assert!(idx < self.count, "buffer index out of range");
        std::slice::from_raw_parts_mut(self.ptr(idx), self.buf_len())
    }
}

/// Descriptor states (low 2 bits of the descriptor word).
#[allow(dead_code)]
const D_EMPTY: u64 = 0;
const D_POSTED: u64 = 1;
const D_DONE: u64 = 2;

#[inline(always)]
fn desc(state: u64, len: u16, buf: u32) -> u64 {
    state | (u64::from(len) << 16) | (u64::from(buf) << 32)
}

/// A receive descriptor ring shared by one driver (the worker) and one device (generator).
/// Descriptors are 8 bytes, eight to a cache line, as NIC descriptor rings pack them; both
/// sides work in batches, so a line changes hands about once per eight packets.
pub struct RxRing {
    descs: Box<[AtomicU64]>,
    mask: usize,
}

impl RxRing {
    pub fn new(size: usize) -> RxRing {
        let size = size.next_power_of_two().max(8);
        RxRing { descs: (0..size).map(|_| AtomicU64::new(D_EMPTY)).collect(), mask: size - 1 }
    }
    pub fn size(&self) -> usize {
        self.mask + 1
    }
}

/// Driver-side state of an rx queue.
pub struct RxDriver {
    pub ring: std::sync::Arc<RxRing>,
    /// Descriptors cleaned (taken) so far.
    pub cleaned: u64,
    /// Descriptors posted so far.
    pub posted: u64,
}

impl RxDriver {
    pub fn new(ring: std::sync::Arc<RxRing>) -> RxDriver {
        RxDriver { ring, cleaned: 0, posted: 0 }
    }

    /// If the descriptor at the clean position is done, take it: (buffer, length).
    #[inline(always)]
    pub fn take(&mut self) -> Option<(u32, u16)> {
        let d = &self.ring.descs[self.cleaned as usize & self.ring.mask];
        let w = d.load(Ordering::Acquire);
        if w & 3 != D_DONE {
            return None;
        }
        // The slot stays DONE until refill posts a fresh buffer into it; the device only
        // ever waits for POSTED, so no intermediate write is needed.
        self.cleaned += 1;
        Some(((w >> 32) as u32, (w >> 16) as u16))
    }

    /// The buffer of the descriptor `ahead` positions past the clean position, if the
    /// device has completed it (for prefetching its data).
    #[inline(always)]
    pub fn peek_done(&self, ahead: u64) -> Option<u32> {
        let w = self.ring.descs[(self.cleaned + ahead) as usize & self.ring.mask].load(Ordering::Acquire);
        (w & 3 == D_DONE).then_some((w >> 32) as u32)
    }

    /// Slots cleaned but not yet given a fresh buffer.
    #[inline(always)]
    pub fn refill_needed(&self) -> usize {
        (self.cleaned + self.ring.size() as u64 - self.posted) as usize
    }

    /// Post a fresh buffer at the next refill position.
    #[inline(always)]
    pub fn post(&mut self, buf: u32) {
        let d = &self.ring.descs[self.posted as usize & self.ring.mask];
        d.store(desc(D_POSTED, 0, buf), Ordering::Release);
        self.posted += 1;
    }
}

/// Device-side state of an rx queue (the synthetic NIC's DMA engine).
pub struct RxDevice {
    pub ring: std::sync::Arc<RxRing>,
    pub filled: u64,
}

impl RxDevice {
    /// The buffer posted `ahead` slots past the fill position, if the driver has posted one.
    #[inline(always)]
    pub fn posted(&self, ahead: usize) -> Option<u32> {
        let w = self.ring.descs[(self.filled as usize + ahead) & self.ring.mask].load(Ordering::Acquire);
        (w & 3 == D_POSTED).then_some((w >> 32) as u32)
    }

    /// The buffer posted at absolute slot `seq`, if that slot holds a posted buffer.
    #[inline(always)]
    pub fn posted_seq(&self, seq: u64) -> Option<u32> {
        let w = self.ring.descs[seq as usize & self.ring.mask].load(Ordering::Acquire);
        (w & 3 == D_POSTED).then_some((w >> 32) as u32)
    }

    /// Address of the descriptor `ahead` slots past the fill position.
    #[inline(always)]
    pub fn desc_ptr(&self, ahead: usize) -> *const u8 {
        (&self.ring.descs[(self.filled as usize + ahead) & self.ring.mask]) as *const AtomicU64 as *const u8
    }

    /// Hand the buffer at the fill position to the driver with `len` bytes written.
    #[inline(always)]
    pub fn complete(&mut self, buf: u32, len: u16) {
        self.ring.descs[self.filled as usize & self.ring.mask].store(desc(D_DONE, len, buf), Ordering::Release);
        self.filled += 1;
    }
}

/// A transmit ring. The synthetic device completes descriptors when the doorbell rings;
/// the driver reclaims completed buffers on its next pass.
pub struct TxRing {
    bufs: Box<[(u32, u16)]>,
    mask: usize,
    /// Descriptors placed by the driver.
    pub tail: u64,
    /// Descriptors completed by the device.
    pub head: u64,
    /// Descriptors reclaimed (buffers freed) by the driver.
    pub clean: u64,
}

impl TxRing {
    pub fn new(size: usize) -> TxRing {
        let size = size.next_power_of_two().max(8);
        TxRing { bufs: vec![(0, 0); size].into_boxed_slice(), mask: size - 1, tail: 0, head: 0, clean: 0 }
    }
    pub fn size(&self) -> usize {
        self.mask + 1
    }
    /// Free descriptor slots.
    #[inline(always)]
    pub fn space(&self) -> usize {
        self.size() - (self.tail - self.clean) as usize
    }
    #[inline(always)]
    pub fn place(&mut self, buf: u32, len: u16) {
        self.bufs[self.tail as usize & self.mask] = (buf, len);
        self.tail += 1;
    }
    #[inline(always)]
    pub fn slot(&self, seq: u64) -> (u32, u16) {
        self.bufs[seq as usize & self.mask]
    }
}
