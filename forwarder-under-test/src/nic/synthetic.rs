//! The synthetic NIC: rx rings filled by a traffic generator the way DMA would fill them.
//!
//! Each queue has an [`RxRing`]; the worker (driver) posts empty buffers and takes completed
//! ones; the device side ([`GenQueue`]) writes generated frames into posted buffers and
//! completes the descriptors. The device runs in its own thread when the machine has a core
//! to spare for it ([`GenMode::Thread`]), otherwise inline in each worker before its rx
//! poll ([`GenMode::Inline`]); inline device work is its own stage (`nic`) so it is never
//! mistaken for forwarding cost.
//!
//! With no offered rate the device waits for posted buffers (the forwarder sets the pace and
//! the measured rate is its own); with `--rate` it drops frames that find no posted buffer
//! and counts them as `rx_missed`, like a NIC's RX-DRP.

use super::{BufferArena, RxDevice, RxRing};
use crate::cpu::{demote_line, dma_fence, prefetch_write};
use crate::traffic::FlowGen;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Where the synthetic device runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum GenMode {
    /// A thread when `workers + 1 <= cores`, else inline.
    Auto,
    /// One device thread for all queues.
    Thread,
    /// Inside each worker, before its rx poll.
    Inline,
}

/// How the synthetic device's frame writes reach memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DmaModel {
    /// Write, then cldemote the line to the shared last-level cache: what DMA with Intel
    /// DDIO does (the default).
    Ddio,
    /// Non-temporal stores: DMA to memory without DDIO.
    #[value(name = "nt")]
    NonTemporal,
    /// Plain cached stores: the line stays in the device core's cache.
    Cached,
}

impl std::fmt::Display for GenMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GenMode::Auto => "auto",
            GenMode::Thread => "thread",
            GenMode::Inline => "inline",
        })
    }
}

/// Device counters of one queue, written by the device, read by anyone.
#[derive(Default)]
pub struct DeviceStats {
    /// Frames generated and handed to the driver.
    pub packets: AtomicU64,
    /// Frames dropped for lack of a posted buffer (only with an offered rate).
    pub missed: AtomicU64,
}

/// The device side of one queue.
pub struct GenQueue {
    pub dev: RxDevice,
    pub gen: FlowGen,
    pub arena: Arc<BufferArena>,
    pub stats: Arc<DeviceStats>,
    /// Packets per second for this queue, if paced.
    pub rate: Option<f64>,
    /// How a device thread's writes leave its core (see [`DmaModel`]); an inline device
    /// writes through the cache like any store.
    pub dma: DmaModel,
    start: Option<Instant>,
    sent: u64,
}

impl GenQueue {
    pub fn new(ring: Arc<RxRing>, gen: FlowGen, arena: Arc<BufferArena>, rate: Option<f64>) -> GenQueue {
        GenQueue {
            dev: RxDevice { ring, filled: 0 },
            gen,
            arena,
            stats: Arc::default(),
            rate,
            dma: DmaModel::Ddio,
            start: None,
            sent: 0,
        }
    }

    /// Frames the pacing allows now (budget-capped).
    fn allowed(&mut self, budget: usize) -> usize {
        match self.rate {
            None => budget,
            Some(r) => {
                let t0 = *self.start.get_or_insert_with(Instant::now);
                let due = (t0.elapsed().as_secs_f64() * r) as u64;
                (due.saturating_sub(self.sent) as usize).min(budget)
            }
        }
    }
}

/// Generate up to `budget` frames into posted buffers (stage: nic). Returns frames written.
/// Frames are written with non-temporal stores (as DMA would), fenced, then completed.
#[no_mangle]
#[inline(never)]
pub fn fwd_nic_generate(q: &mut GenQueue, budget: usize) -> usize {
    let n = q.allowed(budget).min(MAX_GEN);
    let mut bufs = [0u32; MAX_GEN];
    let mut lens = [0u16; MAX_GEN];
    let mut k = 0;
    while k < n {
        match q.dev.posted(k) {
            Some(b) => {
                bufs[k] = b;
                k += 1;
            }
            None => break,
        }
    }
    // Ask for ownership of every line first, so the read-for-ownership misses overlap.
    if q.dma != DmaModel::NonTemporal {
        for &b in &bufs[..k] {
            prefetch_write(q.arena.ptr(b));
        }
    }
    for i in 0..k {
        let p = q.arena.ptr(bufs[i]);
        lens[i] = match q.dma {
            // SAFETY: p is a posted buffer (64-byte aligned, owned by the device until completed).
            DmaModel::NonTemporal => unsafe { q.gen.next_frame_dma(p) },
            DmaModel::Ddio | DmaModel::Cached => {
                // SAFETY: a posted buffer belongs to the device until it completes it.
                let n = q.gen.next_frame(unsafe { q.arena.buf_mut(bufs[i]) });
                if q.dma == DmaModel::Ddio {
                    demote_line(p);
                }
                n
            }
        };
    }
    if k > 0 {
        dma_fence();
        for i in 0..k {
            q.dev.complete(bufs[i], lens[i]);
        }
        if q.dma == DmaModel::Ddio {
            // Descriptor write-back lands in the LLC too: demote each line touched.
            let mut j = 0;
            while j < k {
                demote_line(q.dev.desc_ptr(0).wrapping_sub(8 * (k - j)));
                j += 8;
            }
            demote_line(q.dev.desc_ptr(0).wrapping_sub(8));
        }
        q.stats.packets.fetch_add(k as u64, Ordering::Relaxed);
    }
    let missed = if q.rate.is_some() { n - k } else { 0 };
    if missed > 0 {
        q.stats.missed.fetch_add(missed as u64, Ordering::Relaxed);
    }
    q.sent += (k + missed) as u64;
    k
}

/// Most frames one call generates.
const MAX_GEN: usize = 64;

/// The device thread: serve every queue until `stop`.
pub fn run_device_thread(mut queues: Vec<GenQueue>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let mut any = 0;
        for q in queues.iter_mut() {
            any += fwd_nic_generate(q, 64);
        }
        if any == 0 {
            std::hint::spin_loop();
        }
    }
}
