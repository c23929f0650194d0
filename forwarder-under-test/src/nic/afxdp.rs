//! Real interfaces through AF_XDP: the forwarder's packet-buffer arena is the UMEM, so a
//! frame is received into a buffer the worker posted and sent from that same buffer: the
//! descriptor moves from the rx ring of a socket on the input interface to the tx ring of a
//! socket on the output interface (both sockets share the UMEM; no copy in user space).
//! Every system call and ring access of the driver is here or in [`super::xdp_sys`].
//!
//! Per worker `q`: an rx socket on queue `q` of the input interface (its fill and rx rings)
//! and a tx socket on queue `q` of the output interface (its tx and completion rings).
//! libxdp attaches its default XSK program to the input interface (redirect by rx queue to
//! the bound socket); the tx socket loads none.
//!
//! More workers than the input interface has rx queues, on a one-queue interface: every
//! worker binds an rx socket to queue 0, and fwdscope's own XDP program
//! (bpf/xdp_spread.c, [`super::xdp_sys::SpreadProg`]) puts each frame into one of them by
//! a hash of its flow. The kernel keeps one buffer pool per (interface, queue), so sockets
//! bound to the same queue share its fill and completion rings ([`PoolRings`], under a
//! lock); each keeps its own rx or tx ring. Likewise workers share an output queue when the
//! output interface has fewer tx queues than workers. A buffer a worker puts on the shared
//! fill ring may come back on another worker's rx ring: buffers move between workers'
//! slabs (as they do through the depot), and each worker completes no more rx slots than
//! it handed buffers to the kernel, so the kernel holds what the workers handed it.
//!
//! The port plays the device's part for the worker's own descriptor rings, as the afpacket
//! port does: buffers the worker posts go to the fill ring; rx descriptors complete the
//! worker's rx slots; frames the worker places on its tx ring go to the XSK tx ring and their
//! buffers come back to the slab from the completion ring. Counters: `tx_packets` counts
//! completions; the kernel's XDP_STATISTICS become `drop_xdp_rx_dropped` (no buffer in the
//! fill ring, or a frame larger than a buffer), `drop_xdp_rx_ring_full`, `drop_xdp_tx_invalid`,
//! `xdp_fill_ring_empty` (fill-ring starvation) and `xdp_fill_invalid`; frames that find the
//! XSK tx ring full are `drop_tx_ring_full`.

use super::xdp_sys::{self as sys, Libxdp, Socket, SocketConfig, Umem, UmemConfig, XdpStatistics, XskRing};
use crate::nic::afpacket::ifindex;
use crate::nic::{BufferArena, RxDevice, TxRing};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Headroom the kernel leaves before a received frame in each buffer.
pub const HEADROOM: usize = sys::XDP_PACKET_HEADROOM;
/// `send` wakes the kernel once this many frames wait on the tx ring (in copy mode one
/// sendto sends at most 32: the kernel's TX_BATCH_SIZE); after [`TX_KICK_IDLE`] rx polls in
/// a row came back empty it wakes it for fewer, so at low rates no frame waits for a batch
/// (an empty poll takes about 100 ns).
pub const TX_KICK_BATCH: u32 = 32;
pub const TX_KICK_IDLE: u32 = 4;

/// How the XDP program is attached to the input interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native (driver) mode, falling back to generic when the interface refuses it.
    #[default]
    Auto,
    /// Native mode only (an error when the driver cannot).
    Native,
    /// Generic (skb) mode: works on every interface, slower.
    Generic,
}

/// AF_XDP options (the `--xdp-*` flags; defaults: auto mode, copy or zero-copy as the
/// kernel offers, no busy polling, rx coalescing of 20 us).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct XskOptions {
    pub mode: XdpMode,
    /// Require zero-copy (an error when the driver cannot); otherwise the kernel picks.
    pub zero_copy: bool,
    /// Busy-poll the sockets (SO_PREFER_BUSY_POLL, SO_BUSY_POLL 20 us, budget of a burst).
    pub busy_poll: bool,
    /// Rx coalescing, as a NIC's interrupt moderation: once a frame waits, the worker waits
    /// up to this many microseconds for a burst's worth before it takes them (0: take
    /// what is there at once). Waiting is stage idle.
    #[serde(default = "default_coalesce_us")]
    pub coalesce_us: u32,
}

fn default_coalesce_us() -> u32 {
    20
}

impl Default for XskOptions {
    fn default() -> Self {
        XskOptions { mode: XdpMode::Auto, zero_copy: false, busy_poll: false, coalesce_us: default_coalesce_us() }
    }
}

/// What the kernel gave us: the attach mode and the copy mode, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XskReport {
    /// `native`, `generic` or `offload`: read back from the interface after the attach.
    pub xdp_mode: String,
    /// Why that mode (e.g. the native attach's error when auto mode fell back).
    pub xdp_why: String,
    /// `zero-copy` or `copy`: XDP_OPTIONS of the rx socket.
    pub copy_mode: String,
    pub copy_why: String,
    pub need_wakeup: bool,
    pub busy_poll: String,
    pub queues: usize,
    /// How flows reach the workers' sockets when several share one input queue (empty:
    /// one socket per queue, libxdp's program redirecting by queue).
    #[serde(default)]
    pub spread: String,
}

impl XskReport {
    /// One line for the forwarder's start output.
    pub fn line(&self, in_if: &str) -> String {
        format!(
            "afxdp on {in_if}: {} XDP ({}), {} ({}), {} queue(s){}, need_wakeup {}, busy poll {}",
            self.xdp_mode,
            self.xdp_why,
            self.copy_mode,
            self.copy_why,
            self.queues,
            if self.spread.is_empty() { String::new() } else { format!(" ({})", self.spread) },
            if self.need_wakeup { "on" } else { "off" },
            self.busy_poll
        )
    }
}

/// The UMEM over the whole buffer arena, shared by every socket of the forwarder.
pub struct UmemHandle {
    lib: &'static Libxdp,
    umem: *mut Umem,
    /// The rings handed to xsk_umem__create (libxdp copies them into the first socket's).
    _fill: Box<XskRing>,
    _comp: Box<XskRing>,
    /// Length of the frame each buffer carries on a tx ring, for tx_bytes at completion
    /// (whichever worker takes the completion: workers on one output queue share its ring).
    lens: Box<[AtomicU16]>,
    _arena: Arc<BufferArena>,
}

// SAFETY: libxdp's umem is only used under &mut (socket creation) on one thread at a time.
unsafe impl Send for UmemHandle {}
unsafe impl Sync for UmemHandle {}

impl Drop for UmemHandle {
    fn drop(&mut self) {
        // SAFETY: every socket on it was deleted first (XskQueue::drop holds an Arc).
        unsafe { (self.lib.umem_delete)(self.umem) };
    }
}

fn errno_text(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

/// Register `arena` as a UMEM (unaligned chunks of the arena's stride).
pub fn register_umem(arena: &Arc<BufferArena>, fill_size: u32, comp_size: u32) -> Result<Arc<UmemHandle>> {
    let lib = sys::libxdp()?;
    let cfg = UmemConfig {
        fill_size: fill_size.next_power_of_two(),
        comp_size: comp_size.next_power_of_two(),
        frame_size: arena.stride() as u32,
        frame_headroom: 0,
        flags: sys::XDP_UMEM_UNALIGNED_CHUNK_FLAG,
    };
    let (mut fill, mut comp) = (Box::<XskRing>::default(), Box::<XskRing>::default());
    let mut umem = std::ptr::null_mut();
    let len = arena.region_len() as u64;
    // SAFETY: the arena's mapping outlives the UMEM (held in the handle); the rings are boxed.
    let r = unsafe { (lib.umem_create)(&mut umem, arena.base() as *mut _, len, &mut *fill, &mut *comp, &cfg) };
    if r != 0 {
        let e = -r;
        let hint = match e {
            libc::ENOMEM | libc::ENOBUFS | libc::EPERM => {
                " (the UMEM is locked memory: raise `ulimit -l` or run with CAP_IPC_LOCK; AF_XDP needs CAP_NET_RAW)"
            }
            libc::EAFNOSUPPORT => " (this kernel has no AF_XDP: CONFIG_XDP_SOCKETS)",
            _ => "",
        };
        return Err(Error::Config(format!(
            "afxdp: registering {} MiB of packet buffers as a UMEM: {}{hint}",
            len >> 20,
            errno_text(e)
        )));
    }
    let lens = (0..arena.count()).map(|_| AtomicU16::new(0)).collect();
    Ok(Arc::new(UmemHandle { lib, umem, _fill: fill, _comp: comp, lens, _arena: arena.clone() }))
}

/// The fill and completion rings of one buffer pool: the kernel keeps one pool per
/// (interface, queue) and every socket bound there shares its two rings, so they are taken
/// under a lock (uncontended where a queue has one socket). The rx sockets of a pool use
/// its fill ring, the tx sockets its completion ring.
pub struct PoolRings {
    fill: Mutex<Box<XskRing>>,
    comp: Mutex<Box<XskRing>>,
    /// Frames put on the tx rings of this pool's sockets, and completions taken back.
    queued: AtomicU64,
    completed: AtomicU64,
    /// A tx pool's first socket (libxdp's): the others share its pool by naming it, and
    /// libxdp unmaps the pool's rings when it is deleted, so it lives as long as the pool.
    owner: Mutex<Option<(&'static Libxdp, *mut Socket, i32)>>,
}

impl Drop for PoolRings {
    fn drop(&mut self) {
        let owner = self.owner.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((lib, sock, _)) = owner {
            // SAFETY: a socket libxdp created, deleted once, after every sharer is gone.
            unsafe { (lib.socket_delete)(sock) };
        }
    }
}

// SAFETY: the rings' raw pointers are only used under their mutex.
unsafe impl Send for PoolRings {}
unsafe impl Sync for PoolRings {}

impl PoolRings {
    fn new() -> Arc<PoolRings> {
        Arc::new(PoolRings {
            fill: Mutex::new(Box::default()),
            comp: Mutex::new(Box::default()),
            queued: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            owner: Mutex::new(None),
        })
    }

    fn fill(&self) -> MutexGuard<'_, Box<XskRing>> {
        // A worker that panicked while holding it left the indexes consistent: each is
        // published by one store.
        self.fill.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// (fill ring, completion ring) addresses for libxdp to set up (first socket) or match.
    fn ring_ptrs(&self) -> (*mut XskRing, *mut XskRing) {
        let mut f = self.fill();
        let mut c = self.comp.lock().unwrap_or_else(|e| e.into_inner());
        (&mut **f as *mut XskRing, &mut **c as *mut XskRing)
    }
}

/// What every worker's sockets share: the UMEM, the buffer pools by (interface index,
/// queue), and the flow-spreading program when several workers share an input queue.
pub struct XskSetup {
    umem: Arc<UmemHandle>,
    pools: Vec<((i32, u32), Arc<PoolRings>)>,
    spread: Option<Arc<sys::SpreadProg>>,
}

impl XskSetup {
    pub fn new(umem: Arc<UmemHandle>, spread: Option<sys::SpreadProg>) -> XskSetup {
        XskSetup { umem, pools: Vec::new(), spread: spread.map(Arc::new) }
    }

    /// The pool of (ifindex, queue), and whether this call made it (its first socket).
    fn pool(&mut self, ifindex: i32, queue: u32) -> (Arc<PoolRings>, bool) {
        if let Some((_, p)) = self.pools.iter().find(|(k, _)| *k == (ifindex, queue)) {
            return (p.clone(), false);
        }
        let p = PoolRings::new();
        self.pools.push(((ifindex, queue), p.clone()));
        (p, true)
    }

    /// Fill the spreading program's map: slot k to the rx socket of worker k % workers.
    pub fn spread_over(&self, queues: &[XskQueue]) -> Result<()> {
        let Some(prog) = &self.spread else { return Ok(()) };
        let fds: Vec<i32> = queues.iter().filter_map(|q| q.rxs.first().map(|r| r.fd)).collect();
        if fds.is_empty() {
            return Err(Error::Config("afxdp: no rx socket to spread flows over".into()));
        }
        for slot in 0..sys::SPREAD_SLOTS {
            prog.set_slot(slot, fds[slot as usize % fds.len()]).map_err(|e| Error::Sys {
                what: format!("afxdp: putting a socket in slot {slot} of the spreading program's map"),
                source: e,
            })?;
        }
        Ok(())
    }
}

/// The slot of `fwd_xsks` that bpf/xdp_spread.c picks for `frame` (the same hash, for
/// tests and tools that predict which worker a flow reaches: worker `slot % workers`).
pub fn spread_slot(frame: &[u8]) -> u32 {
    let word = |at: usize| frame.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] {
        return 0;
    }
    let proto = frame[23];
    let mut h = word(26) ^ word(30) ^ u32::from(proto);
    let unfragmented = u16::from_be_bytes([frame[20], frame[21]]) & 0x3fff == 0;
    if (proto == 17 || proto == 6) && frame[14] & 0x0f == 5 && unfragmented && frame.len() >= 38 {
        h ^= word(34);
    }
    h.wrapping_mul(0x9E37_79B1) >> 26
}

/// Buffer index and data offset of an unaligned-mode UMEM address (the chunk's base in the
/// low 48 bits, the data's offset from it in the top 16; a plain address has offset 0).
#[inline(always)]
pub fn locate(addr: u64, stride: u64) -> (u64, u64) {
    let base = addr & sys::XSK_UNALIGNED_BUF_ADDR_MASK;
    let data = base + (addr >> sys::XSK_UNALIGNED_BUF_OFFSET_SHIFT);
    (data / stride, data % stride)
}

/// The kernel's XDP_STATISTICS of socket `fd` (None when it does not answer).
fn xdp_statistics(fd: i32) -> Option<XdpStatistics> {
    let mut st = XdpStatistics::default();
    let mut len = std::mem::size_of::<XdpStatistics>() as u32;
    // SAFETY: the struct and its size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            sys::SOL_XDP,
            sys::XDP_STATISTICS,
            &mut st as *mut XdpStatistics as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some(st)
}

/// Why an interface may refuse native XDP, for an error message.
pub fn native_refusal_hint(errno: i32) -> &'static str {
    match errno {
        libc::ERANGE => " (the MTU of the interface's peer is too large for native XDP on veth: lower it, or use --xdp-mode generic)",
        libc::EOPNOTSUPP => " (the driver has no native XDP: use --xdp-mode generic)",
        libc::ENOSPC => " (a veth needs at least as many rx queues as its peer has tx queues for native XDP)",
        _ => " (use --xdp-mode generic)",
    }
}

/// Receive and transmit queues of `ifname` (ETHTOOL_GCHANNELS: rx or tx plus combined
/// channels; 1 each when the driver does not say).
pub fn queue_counts(ifname: &str) -> (u32, u32) {
    #[repr(C)]
    #[derive(Default)]
    struct Channels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx: u32,
        tx: u32,
        other: u32,
        combined: u32,
    }
    let mut ch = Channels { cmd: 0x3c, ..Default::default() };
    let data = &mut ch as *mut Channels as *mut libc::c_char;
    // SAFETY: SIOCETHTOOL with ETHTOOL_GCHANNELS fills the ethtool_channels `ch` the ifreq
    // points at, which outlives the call.
    let r = unsafe {
        crate::nic::afpacket::if_ioctl(ifname, libc::SIOCETHTOOL, "ETHTOOL_GCHANNELS", |r| r.ifr_ifru.ifru_data = data)
    };
    match r {
        Ok(_) => ((ch.rx + ch.combined).max(1), (ch.tx + ch.combined).max(1)),
        Err(_) => (1, 1),
    }
}

/// One rx socket: bound to one queue of the input interface; the fill ring is its pool's.
struct RxSock {
    sock: *mut Socket,
    fd: i32,
    queue: u32,
    pool: Arc<PoolRings>,
    /// The pool's first socket: it reports the pool's fill-ring starvation (the kernel
    /// gives the pool's figure to every socket of the pool).
    owns_pool: bool,
    rx: Box<XskRing>,
}

/// One worker's sockets (an rx socket on each input queue it serves, a tx socket on its
/// output queue) and the device side of its rx descriptor ring.
pub struct XskQueue {
    lib: &'static Libxdp,
    rxs: Vec<RxSock>,
    /// The tx socket: the output queue's first one belongs to its pool ([`PoolRings`]);
    /// a worker sharing the queue has one of its own here.
    tx_shared: Option<sys::SharedTxSocket>,
    tx_fd: i32,
    tx: Box<XskRing>,
    /// The output queue's pool: its completion ring returns what this worker (and any
    /// other worker on that queue) sent.
    tx_pool: Arc<PoolRings>,
    pub dev: RxDevice,
    /// Rx slots whose posted buffer went to a fill ring (filled <= handed <= posted).
    handed: u64,
    /// Buffers one fill ring may hold at most (the rx ring shared out over the sockets).
    share: u32,
    /// Where the next rx poll starts (round robin over the sockets).
    next_rx: usize,
    stride: u64,
    count: u32,
    busy_poll: bool,
    /// Empty rx polls since the last send (see [`TX_KICK_IDLE`]).
    empty_polls: u32,
    /// The kernel gave zero-copy (the driver's rx may then wait for a wake-up).
    zero_copy: bool,
    umem: Arc<UmemHandle>,
    /// Held so the spreading program stays attached while this worker's sockets exist.
    _spread: Option<Arc<sys::SpreadProg>>,
}

// SAFETY: the rx and tx rings and the sockets are used by the one worker that owns this
// queue; the shared fill and completion rings only under their pool's lock.
unsafe impl Send for XskQueue {}

impl Drop for XskQueue {
    fn drop(&mut self) {
        // SAFETY: sockets created by libxdp, each deleted once (null ones were never made);
        // libxdp detaches its program when the interface's last socket goes.
        unsafe {
            for r in &self.rxs {
                (self.lib.socket_delete)(r.sock);
            }
        }
        let _ = &self.umem;
    }
}

fn sockopt_i32(fd: i32, level: i32, opt: i32, v: i32) -> std::io::Result<()> {
    // SAFETY: an int option of the right size.
    let r = unsafe { libc::setsockopt(fd, level, opt, &v as *const i32 as *const libc::c_void, 4) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What one pass over the completion ring found.
#[derive(Debug, Default, Clone, Copy)]
pub struct XskDone {
    pub sent: u64,
    pub bytes: u64,
}

/// Where one worker's sockets go: the input queues it serves and its output queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuePlan {
    pub rx_queues: Vec<u32>,
    pub tx_queue: u32,
}

/// Whether flows are spread over several workers' sockets on one input queue (by
/// fwdscope's XDP program): more than one worker on a one-queue interface.
pub fn spreads(in_queues: u32, workers: usize) -> bool {
    in_queues == 1 && workers > 1
}

/// Input queue `q` is served by worker `q % workers`; worker `w` sends on output queue
/// `w % out_queues` (workers share an output queue when there are fewer). On a one-queue
/// input interface every worker serves queue 0 ([`spreads`]). Refused when some workers
/// would get a queue and others none (more than one queue, fewer than workers): the
/// spreading program redirects within one queue only.
pub fn plan_queues(in_if: &str, in_queues: u32, out_queues: u32, workers: usize) -> Result<Vec<QueuePlan>> {
    let w = workers as u32;
    let out_queues = out_queues.max(1);
    if spreads(in_queues, workers) {
        return Ok((0..w).map(|k| QueuePlan { rx_queues: vec![0], tx_queue: k % out_queues }).collect());
    }
    if w > in_queues {
        return Err(Error::Config(format!(
            "afxdp: {in_if} has {in_queues} rx queues, fewer than --workers {workers}: a worker would get no packets (add queues: `ethtool -L {in_if} combined {workers}`; run {in_queues} workers or fewer; or give it one queue, and flows are spread over the workers by fwdscope's XDP program)"
        )));
    }
    Ok((0..w)
        .map(|k| QueuePlan { rx_queues: (k..in_queues).step_by(workers).collect(), tx_queue: k % out_queues })
        .collect())
}

/// What creating one worker's sockets needs: libxdp, the UMEM, the interfaces' names, the
/// ring sizes and the bind flags. Errors from libxdp come back as positive errnos, which
/// [`SocketMaker::explain`] turns into the forwarder's messages.
struct SocketMaker<'a> {
    lib: &'static Libxdp,
    umem: *mut Umem,
    in_if: &'a str,
    in_c: CString,
    out_c: CString,
    rx_size: u32,
    tx_size: u32,
    /// fwdscope's spreading program is attached: the rx sockets load no program of their own.
    spread: bool,
    bind_flags: u16,
    zero_copy: bool,
}

impl SocketMaker<'_> {
    /// One socket: rx on the input interface (libxdp attaches its program there) or tx
    /// on the output interface (no program). Returns libxdp's error as a positive errno.
    fn create(
        &self,
        queue: u32,
        rx_side: bool,
        xdp_flags: u32,
        rings: [*mut XskRing; 4],
    ) -> std::result::Result<*mut Socket, i32> {
        let cfg = SocketConfig {
            rx_size: if rx_side { self.rx_size } else { 0 },
            tx_size: if rx_side { 0 } else { self.tx_size },
            libxdp_flags: if rx_side && !self.spread { 0 } else { sys::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD },
            xdp_flags,
            bind_flags: self.bind_flags,
        };
        let name = if rx_side { &self.in_c } else { &self.out_c };
        // A socket closed moments ago (a forwarder that just stopped, or our own failed
        // native attempt) keeps its queue until the kernel's deferred release runs:
        // EBUSY for up to a second is retried before it counts.
        let mut tries = 0;
        loop {
            let mut s = std::ptr::null_mut();
            // SAFETY: the rings are boxed (stable addresses) and live as long as the socket.
            let r = unsafe {
                (self.lib.socket_create_shared)(
                    &mut s,
                    name.as_ptr(),
                    queue,
                    self.umem,
                    rings[0],
                    rings[1],
                    rings[2],
                    rings[3],
                    &cfg,
                )
            };
            match -r {
                0 => return Ok(s),
                libc::EBUSY if tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                e => return Err(e),
            }
        }
    }

    /// The error for errno `e` from creating `what` on `queue`, with a hint at the usual cause.
    fn explain(&self, e: i32, queue: u32, what: &str) -> Error {
        let in_if = self.in_if;
        let hint = match e {
            libc::EPERM | libc::EACCES => " (needs CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF, or root)".to_string(),
            libc::EBUSY => format!(
                " (queue {queue} already has an AF_XDP socket, or the interface another XDP program: another forwarder runs there, or one was killed without detaching; stop it, or if none runs, detach it with `ip link set dev {in_if} xdp off`)"
            ),
            libc::ENOMEM | libc::ENOBUFS => " (raise the locked-memory limit: `ulimit -l`)".to_string(),
            libc::EOPNOTSUPP if self.zero_copy => {
                " (the driver has no zero-copy AF_XDP: drop --xdp-zero-copy)".to_string()
            }
            libc::ENODEV | libc::ENXIO => " (no such interface in this network namespace)".to_string(),
            libc::ERANGE | libc::ENOSPC => native_refusal_hint(e).to_string(),
            _ => String::new(),
        };
        Error::Config(format!("afxdp: {what}: {}{hint}", self.lib.error_text(-e)))
    }
}

/// The attach mode read back from the interface (`native`, `generic`, `offload`, ...) and
/// why it is that one, for [`XskReport`].
fn attach_report(lib: &Libxdp, in_idx: i32, spread: bool, mode: XdpMode, in_if: &str) -> (&'static str, String) {
    let attached = lib.attach_mode(in_idx);
    let xdp_mode = match attached {
        Some((sys::XDP_MODE_NATIVE, _)) => "native",
        Some((sys::XDP_MODE_SKB, _)) => "generic",
        Some((sys::XDP_MODE_HW, _)) => "offload",
        Some(_) => "unknown",
        None => "none",
    };
    let legacy = match attached {
        Some((_, true)) if spread => "; fwdscope's spreading program attached alone (no bpffs here, so no dispatcher: no other XDP program can share the interface)",
        Some((_, true)) => "; libxdp's program attached alone (no bpffs here, so no dispatcher: no other XDP program can share the interface)",
        _ => "",
    };
    let why = match mode {
        XdpMode::Generic => "asked for (--xdp-mode generic)".to_string(),
        _ => format!("the driver of {in_if} runs XDP"),
    };
    let mut why = why;
    why.push_str(legacy);
    (xdp_mode, why)
}

/// Why the kernel gave zero-copy or copy mode, for [`XskReport`].
fn copy_why(zc: bool, xdp_mode: &str, in_if: &str) -> String {
    if zc {
        "the driver maps the UMEM".to_string()
    } else if xdp_mode == "generic" {
        "generic XDP always copies".to_string()
    } else {
        format!("the driver of {in_if} offers no zero-copy AF_XDP; the kernel copies into the UMEM")
    }
}

impl XskQueue {
    /// Open one worker's sockets on `umem` as `plan` says. Returns the queue and what the
    /// kernel gave (attach mode, copy mode).
    pub fn open(
        setup: &mut XskSetup,
        arena: &BufferArena,
        (in_if, out_if): (&str, &str),
        plan: &QueuePlan,
        ring_sizes: (u32, u32),
        opts: &XskOptions,
    ) -> Result<(XskQueue, XskReport)> {
        let umem = setup.umem.clone();
        let lib = umem.lib;
        let in_idx = ifindex(in_if)?;
        let out_idx = ifindex(out_if)?;
        // With the spreading program attached, the rx sockets load no program of their own.
        let spread = setup.spread.clone();
        let mut q = XskQueue {
            lib,
            rxs: Vec::new(),
            tx_shared: None,
            tx_fd: -1,
            tx: Box::default(),
            tx_pool: setup.pool(out_idx, plan.tx_queue).0,
            dev: RxDevice { ring: Arc::new(crate::nic::RxRing::new(8)), filled: 0 },
            handed: 0,
            share: (ring_sizes.0 / plan.rx_queues.len().max(1) as u32).max(64),
            next_rx: 0,
            stride: arena.stride() as u64,
            count: arena.count(),
            busy_poll: opts.busy_poll,
            empty_polls: 0,
            zero_copy: false,
            umem: umem.clone(),
            _spread: spread.clone(),
        };
        let ifname =
            |n: &str| CString::new(n).map_err(|_| Error::Config(format!("interface `{n}`: contains a NUL byte")));
        let maker = SocketMaker {
            lib,
            umem: umem.umem,
            in_if,
            in_c: ifname(in_if)?,
            out_c: ifname(out_if)?,
            rx_size: ring_sizes.0.next_power_of_two(),
            tx_size: ring_sizes.1.next_power_of_two(),
            spread: spread.is_some(),
            bind_flags: sys::XDP_USE_NEED_WAKEUP | if opts.zero_copy { sys::XDP_ZEROCOPY } else { 0 },
            zero_copy: opts.zero_copy,
        };
        let flags = match opts.mode {
            XdpMode::Generic => sys::XDP_FLAGS_SKB_MODE,
            _ => sys::XDP_FLAGS_DRV_MODE,
        };
        q.open_rx_sockets(setup, &maker, in_idx, &plan.rx_queues, flags)?;
        q.open_tx_socket(&maker, out_idx, out_if, plan.tx_queue)?;
        let (xdp_mode, xdp_why) = attach_report(lib, in_idx, spread.is_some(), opts.mode, in_if);
        let zc = q.options()? & sys::XDP_OPTIONS_ZEROCOPY != 0;
        q.zero_copy = zc;
        let copy_why = copy_why(zc, xdp_mode, in_if);
        let busy = if opts.busy_poll { q.enable_busy_poll() } else { "off".to_string() };
        let report = XskReport {
            xdp_mode: xdp_mode.to_string(),
            xdp_why,
            copy_mode: if zc { "zero-copy" } else { "copy" }.into(),
            copy_why,
            need_wakeup: true,
            busy_poll: busy,
            queues: q.rxs.len(),
            spread: String::new(),
        };
        Ok((q, report))
    }

    /// Create an rx socket on each of `queues` of the input interface (`in_idx`), attached
    /// with `flags` (native or generic; the caller resolved auto mode already, by a native
    /// probe without a socket).
    fn open_rx_sockets(
        &mut self,
        setup: &mut XskSetup,
        maker: &SocketMaker<'_>,
        in_idx: i32,
        queues: &[u32],
        flags: u32,
    ) -> Result<()> {
        for &queue in queues {
            let (pool, owns_pool) = setup.pool(in_idx, queue);
            let mut r = RxSock { sock: std::ptr::null_mut(), fd: -1, queue, pool, owns_pool, rx: Box::default() };
            // The pool's rings: set up by libxdp for its first socket, shared by the others.
            let (fill, comp) = r.pool.ring_ptrs();
            let rings: [*mut XskRing; 4] = [&mut *r.rx, std::ptr::null_mut(), fill, comp];
            let at = format!("{} queue {queue}", maker.in_if);
            r.sock = maker.create(queue, true, flags, rings).map_err(|e| {
                let mode = if flags == sys::XDP_FLAGS_DRV_MODE { "native" } else { "generic" };
                maker.explain(e, queue, &format!("{mode} XDP socket on {at}"))
            })?;
            // SAFETY: a socket just created.
            r.fd = unsafe { (self.lib.socket_fd)(r.sock) };
            self.rxs.push(r);
        }
        Ok(())
    }

    /// Create the tx socket on `tx_queue` of the output interface (`out_idx`): sharing the
    /// pool of another worker's socket on that queue, or the queue's first (libxdp's).
    fn open_tx_socket(&mut self, maker: &SocketMaker<'_>, out_idx: i32, out_if: &str, tx_queue: u32) -> Result<()> {
        let tx_at = format!("tx socket on {out_if} queue {tx_queue}");
        let shared_fd = self.tx_pool.owner.lock().unwrap_or_else(|e| e.into_inner()).map(|o| o.2);
        if let Some(shared_fd) = shared_fd {
            // Another worker's socket is on this output queue: share its pool.
            let s = sys::SharedTxSocket::bind(out_idx as u32, tx_queue, maker.tx_size, shared_fd, &mut self.tx)
                .map_err(|(what, e)| {
                    Error::Config(format!("afxdp: {tx_at}, sharing the queue with another worker: {what}: {e}"))
                })?;
            self.tx_fd = s.fd;
            self.tx_shared = Some(s);
        } else {
            let (fill, comp) = self.tx_pool.ring_ptrs();
            let rings: [*mut XskRing; 4] = [std::ptr::null_mut(), &mut *self.tx, fill, comp];
            let sock = maker.create(tx_queue, false, 0, rings).map_err(|e| maker.explain(e, tx_queue, &tx_at))?;
            // SAFETY: a socket just created.
            self.tx_fd = unsafe { (self.lib.socket_fd)(sock) };
            *self.tx_pool.owner.lock().unwrap_or_else(|e| e.into_inner()) = Some((self.lib, sock, self.tx_fd));
        }
        Ok(())
    }

    /// Turn on busy polling on every socket (20 us, budget 64); returns what the report
    /// says of it. A socket that refuses turns it off for the queue.
    fn enable_busy_poll(&mut self) -> String {
        let fds: Vec<i32> = self.rxs.iter().map(|r| r.fd).chain([self.tx_fd]).collect();
        let r = fds.iter().try_for_each(|&fd| {
            sockopt_i32(fd, libc::SOL_SOCKET, libc::SO_PREFER_BUSY_POLL, 1)?;
            sockopt_i32(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, 20)?;
            sockopt_i32(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL_BUDGET, 64)
        });
        self.busy_poll = r.is_ok();
        match r {
            Ok(()) => "on (20 us, budget 64)".into(),
            Err(e) => format!("refused ({e}); off"),
        }
    }

    fn options(&self) -> Result<u32> {
        let fd = self.rxs.first().map_or(self.tx_fd, |r| r.fd);
        let mut v = 0u32;
        let mut len = 4u32;
        // SAFETY: a u32 out-parameter of the size given.
        let r = unsafe {
            libc::getsockopt(fd, sys::SOL_XDP, sys::XDP_OPTIONS, &mut v as *mut u32 as *mut libc::c_void, &mut len)
        };
        if r != 0 {
            return Err(Error::Sys {
                what: "afxdp: getsockopt(XDP_OPTIONS)".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(v)
    }

    /// The kernel's counters: rx fields summed over the rx sockets, tx fields from the tx
    /// socket; a socket the kernel does not answer for counts zero.
    pub fn statistics(&self) -> XdpStatistics {
        let get = |fd: i32| xdp_statistics(fd).unwrap_or_default();
        let mut sum = XdpStatistics::default();
        for r in &self.rxs {
            let x = get(r.fd);
            sum.rx_dropped += x.rx_dropped;
            sum.rx_invalid_descs += x.rx_invalid_descs;
            sum.rx_ring_full += x.rx_ring_full;
            if r.owns_pool {
                sum.rx_fill_ring_empty_descs += x.rx_fill_ring_empty_descs;
            }
        }
        let t = get(self.tx_fd);
        sum.tx_invalid_descs = t.tx_invalid_descs;
        sum.tx_ring_empty_descs = t.tx_ring_empty_descs;
        sum
    }

    /// Hand the buffers the worker posted since the last call to the fill rings (each to the
    /// socket whose fill ring holds fewest, none past its share), then complete up to `max`
    /// of the worker's rx slots from the XSK rx rings. Returns (frames delivered,
    /// descriptors the kernel gave that name no buffer of ours, which were dropped).
    pub fn fill(&mut self, arena: &BufferArena, max: usize) -> (usize, u64) {
        self.hand_posted();
        self.receive(arena, max)
    }

    /// Hand the buffers the worker posted since the last call to the fill rings, at most
    /// 64 at a time: each batch to the socket whose fill ring holds fewest, none past its
    /// share.
    #[inline(always)]
    fn hand_posted(&mut self) {
        loop {
            // Slots filled..filled+size are the device's; those past `handed` and posted
            // have a buffer the kernel has not seen yet.
            let limit = self.dev.filled + self.dev.ring.size() as u64;
            let mut give = 0u32;
            while give < 64
                && self.handed + u64::from(give) < limit
                && self.dev.posted_seq(self.handed + u64::from(give)).is_some()
            {
                give += 1;
            }
            if give == 0 {
                break;
            }
            // One socket: its fill ring holds the whole rx ring (no share to check, no read
            // of the kernel's consumer index; a shared pool's ring holds every worker's).
            // Several: the one holding fewest, up to its share.
            let (k, give) = if self.rxs.len() == 1 {
                (0, give)
            } else {
                let held = |k: usize| self.rxs[k].pool.fill().outstanding();
                let Some(k) = (0..self.rxs.len()).min_by_key(|&k| held(k)) else { break };
                (k, give.min(self.share.saturating_sub(held(k))))
            };
            let mut fill = self.rxs[k].pool.fill();
            let Some(i) = (if give > 0 { fill.reserve(give) } else { None }) else { break };
            for j in 0..give {
                let b = self.dev.posted_seq(self.handed + u64::from(j)).unwrap_or(0);
                *fill.addr(i.wrapping_add(j)) = u64::from(b) * self.stride;
            }
            fill.submit(give);
            drop(fill);
            self.handed += u64::from(give);
        }
    }

    /// Complete up to `max` of the worker's rx slots from the XSK rx rings, starting at the
    /// next socket in turn. Returns (frames delivered, descriptors naming no buffer of ours).
    #[inline(always)]
    fn receive(&mut self, arena: &BufferArena, max: usize) -> (usize, u64) {
        let buf_len = arena.buf_len() as u64;
        let (mut done, mut bad) = (0usize, 0u64);
        let n_socks = self.rxs.len();
        for step in 0..n_socks {
            let k = (self.next_rx + step) % n_socks;
            let r = &mut self.rxs[k];
            // In copy mode the kernel's rx runs in the device's NAPI and never asks for a
            // wake-up (the flag shares a cache line with the kernel's consumer index: not
            // read there).
            if self.busy_poll || (self.zero_copy && r.pool.fill().needs_wakeup()) {
                // SAFETY: a zero-length, non-blocking receive drives the kernel's rx path.
                unsafe {
                    libc::recvfrom(
                        r.fd,
                        std::ptr::null_mut(),
                        0,
                        libc::MSG_DONTWAIT,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
            }
            // Only slots whose buffer went to the kernel can complete.
            let room = (self.handed - self.dev.filled).min((max - done) as u64) as u32;
            if room == 0 {
                break;
            }
            let (i, n) = r.rx.peek(room);
            for j in 0..n {
                let d = *r.rx.desc(i.wrapping_add(j));
                let (idx, off) = locate(d.addr, self.stride);
                if idx >= u64::from(self.count) || off + u64::from(d.len) > self.stride || u64::from(d.len) > buf_len {
                    bad += 1;
                    continue;
                }
                if off != HEADROOM as u64 {
                    // An XDP program moved the frame's start: put it where the stages read it.
                    // SAFETY: both ranges lie inside buffer idx (checked), which the kernel
                    // handed back to us.
                    unsafe {
                        let base = arena.base().add(idx as usize * self.stride as usize);
                        std::ptr::copy(base.add(off as usize), base.add(HEADROOM), d.len as usize);
                    }
                }
                self.dev.complete(idx as u32, d.len as u16);
                done += 1;
            }
            r.rx.release(n);
        }
        self.next_rx = (self.next_rx + 1) % n_socks.max(1);
        (done, bad)
    }

    /// A posted buffer the kernel has not been given yet (`fill` must run).
    #[inline(always)]
    pub fn fill_pending(&self) -> bool {
        self.dev.posted_seq(self.handed).is_some() && self.handed < self.dev.filled + self.dev.ring.size() as u64
    }

    /// Descriptors waiting on the rx rings (none taken).
    #[inline(always)]
    pub fn rx_available(&mut self) -> u32 {
        self.rxs.iter_mut().map(|r| r.rx.ready()).sum()
    }

    /// Put the frames placed on `tx` since the last doorbell on the XSK tx ring and wake the
    /// kernel to send them. Their buffers stay with the kernel until the completion ring
    /// returns them ([`XskQueue::reclaim`]); frames that found the ring full go to
    /// `to_free` and are counted by the caller. Returns frames dropped that way.
    pub fn send(&mut self, tx: &mut TxRing, to_free: &mut Vec<u32>) -> u64 {
        let want = (tx.tail - tx.head) as u32;
        let mut full = 0u64;
        if want > 0 {
            let got = self.tx.prod_free(want).min(want);
            let first = if got > 0 { self.tx.reserve(got) } else { None };
            for k in 0..want {
                let (b, len) = tx.slot(tx.head + u64::from(k));
                match first {
                    Some(f) if k < got => {
                        if let Some(l) = self.umem.lens.get(b as usize) {
                            l.store(len, Ordering::Relaxed);
                        }
                        *self.tx.desc(f.wrapping_add(k)) = sys::XdpDesc {
                            addr: u64::from(b) * self.stride + HEADROOM as u64,
                            len: u32::from(len),
                            options: 0,
                        };
                    }
                    _ => {
                        full += 1;
                        to_free.push(b);
                    }
                }
            }
            if first.is_some() {
                self.tx_pool.queued.fetch_add(u64::from(got), Ordering::Relaxed);
                self.tx.submit(got);
            }
            // The worker's tx ring is only a staging area here: nothing left to reclaim.
            tx.head = tx.tail;
            tx.clean = tx.tail;
        }
        self.empty_polls = 0;
        if self.tx.outstanding() >= TX_KICK_BATCH {
            self.kick();
        }
        full
    }

    /// An rx poll came back empty: wake the kernel for what waits on the tx ring once
    /// [`TX_KICK_IDLE`] did in a row.
    pub fn idle_kick(&mut self) {
        self.empty_polls += 1;
        if self.empty_polls >= TX_KICK_IDLE {
            self.kick();
        }
    }

    /// Wake the kernel's transmit path for what waits on the tx ring, when it asks to be
    /// woken (copy mode always does).
    pub fn kick(&mut self) {
        if self.tx.outstanding() > 0 && (self.busy_poll || self.tx.needs_wakeup()) {
            // SAFETY: a zero-length, non-blocking send on our socket.
            unsafe { libc::sendto(self.tx_fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
        }
    }

    /// Buffers the kernel finished sending, into `to_free`: this worker's, and on a shared
    /// output queue any other worker's (nothing when another worker is taking them now).
    pub fn reclaim(&mut self, to_free: &mut Vec<u32>) -> XskDone {
        let mut d = XskDone::default();
        let Ok(mut comp) = self.tx_pool.comp.try_lock() else { return d };
        let (i, n) = comp.peek(u32::MAX);
        for k in 0..n {
            let addr = *comp.addr(i.wrapping_add(k));
            let (idx, _) = locate(addr, self.stride);
            if let Some(len) = self.umem.lens.get(idx as usize) {
                to_free.push(idx as u32);
                d.sent += 1;
                d.bytes += u64::from(len.load(Ordering::Relaxed));
            }
        }
        comp.release(n);
        self.tx_pool.completed.fetch_add(u64::from(n), Ordering::Relaxed);
        d
    }

    /// Frames on the output queue's tx rings the kernel has not completed (every worker's
    /// on that queue: whoever polls next takes their completions).
    pub fn in_flight(&self) -> u64 {
        let queued = self.tx_pool.queued.load(Ordering::Relaxed);
        queued.saturating_sub(self.tx_pool.completed.load(Ordering::Relaxed))
    }

    /// Block until a frame may be ready on any rx socket or `timeout_ms` passes.
    pub fn wait(&self, timeout_ms: i32) {
        let mut p: Vec<libc::pollfd> =
            self.rxs.iter().map(|r| libc::pollfd { fd: r.fd, events: libc::POLLIN, revents: 0 }).collect();
        // SAFETY: valid pollfds.
        unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    }

    /// The input queues this worker serves.
    pub fn rx_queue_ids(&self) -> Vec<u32> {
        self.rxs.iter().map(|r| r.queue).collect()
    }
}

/// A transmit-only AF_XDP port for a traffic generator (`lab send --via afxdp`): a UMEM of
/// its own (2048 chunks), a tx socket on each tx queue of the interface (no XDP program),
/// frames copied into free chunks and put on the ring of the queue their flow hashes to;
/// the kernel is woken every 32 frames of a ring (a copy-mode sendto sends at most 32) and
/// chunks come back from the completion rings.
pub struct XskTx {
    lib: &'static Libxdp,
    socks: Vec<TxSock>,
    arena: Arc<BufferArena>,
    free: Vec<u32>,
    lens: Vec<u16>,
    in_flight: u64,
    umem: Arc<UmemHandle>,
}

struct TxSock {
    sock: *mut Socket,
    fd: i32,
    tx: Box<XskRing>,
    comp: Box<XskRing>,
    _fill: Box<XskRing>,
    /// Reserved on the tx ring, not yet submitted.
    pending: u32,
}

// SAFETY: the rings and sockets are used by the one thread that owns the port.
unsafe impl Send for XskTx {}

impl Drop for XskTx {
    fn drop(&mut self) {
        for t in &self.socks {
            // SAFETY: sockets created by libxdp, each deleted once.
            unsafe { (self.lib.socket_delete)(t.sock) };
        }
        let _ = &self.umem;
    }
}

/// Chunks of a generator's UMEM.
const TX_CHUNKS: u32 = 4096;
/// Descriptors per tx and completion ring of a generator's socket.
const TX_RING: u32 = 2048;

impl XskTx {
    /// Open a tx socket on every tx queue of `ifname` (in this thread's network namespace).
    /// A sender that stopped moments ago keeps its queues until the kernel's deferred
    /// release runs: EBUSY for up to a second is retried from scratch (a new UMEM: libxdp's
    /// state after a failed bind is not reusable).
    pub fn open(ifname: &str) -> Result<XskTx> {
        let mut tries = 0;
        loop {
            match XskTx::open_once(ifname)? {
                Ok(port) => return Ok(port),
                Err((e, _)) if e == libc::EBUSY && tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err((_, text)) => return Err(Error::Config(text)),
            }
        }
    }

    /// One attempt: Ok(Err((errno, message))) when a socket could not be made.
    fn open_once(ifname: &str) -> Result<std::result::Result<XskTx, (i32, String)>> {
        let lib = sys::libxdp()?;
        ifindex(ifname)?;
        let name =
            CString::new(ifname).map_err(|_| Error::Config(format!("interface `{ifname}`: contains a NUL byte")))?;
        let arena = Arc::new(BufferArena::with_headroom(TX_CHUNKS, 0)?);
        let umem = register_umem(&arena, TX_RING, TX_RING)?;
        let mut port = XskTx {
            lib,
            socks: Vec::new(),
            arena: arena.clone(),
            free: (0..TX_CHUNKS).rev().collect(),
            lens: vec![0; TX_CHUNKS as usize],
            in_flight: 0,
            umem: umem.clone(),
        };
        for queue in 0..queue_counts(ifname).1 {
            let mut t = TxSock {
                sock: std::ptr::null_mut(),
                fd: -1,
                tx: Box::default(),
                comp: Box::default(),
                _fill: Box::default(),
                pending: 0,
            };
            let cfg = SocketConfig {
                rx_size: 0,
                tx_size: TX_RING,
                libxdp_flags: sys::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD,
                xdp_flags: 0,
                bind_flags: sys::XDP_USE_NEED_WAKEUP,
            };
            // SAFETY: the rings are boxed and live as long as the socket.
            let r = unsafe {
                (lib.socket_create_shared)(
                    &mut t.sock,
                    name.as_ptr(),
                    queue,
                    umem.umem,
                    std::ptr::null_mut(),
                    &mut *t.tx,
                    &mut *t._fill,
                    &mut *t.comp,
                    &cfg,
                )
            };
            if r != 0 {
                return Ok(Err((
                    -r,
                    format!(
                        "afxdp sender: tx socket on {ifname} queue {queue}: {}{}",
                        lib.error_text(r),
                        if -r == libc::EPERM { " (needs CAP_NET_RAW, or root)" } else { "" }
                    ),
                )));
            }
            // SAFETY: a socket just created.
            t.fd = unsafe { (lib.socket_fd)(t.sock) };
            port.socks.push(t);
        }
        Ok(Ok(port))
    }

    /// Queue one frame (a copy into a free chunk) on the tx ring of the queue `hash`
    /// selects; false when no chunk or slot is free (reclaim, then retry).
    pub fn push(&mut self, frame: &[u8], hash: u32) -> bool {
        let n = self.socks.len();
        if n == 0 {
            return false;
        }
        let Some(&chunk) = self.free.last() else { return false };
        let k = hash as usize % n;
        let t = &mut self.socks[k];
        let Some(i) = t.tx.reserve(1) else { return false };
        self.free.pop();
        let len = frame.len().min(self.arena.buf_len());
        // SAFETY: the chunk is free (ours until the completion ring returns it).
        unsafe { self.arena.buf_mut(chunk)[..len].copy_from_slice(&frame[..len]) };
        self.lens[chunk as usize] = len as u16;
        *t.tx.desc(i) =
            sys::XdpDesc { addr: u64::from(chunk) * self.arena.stride() as u64, len: len as u32, options: 0 };
        t.pending += 1;
        self.in_flight += 1;
        if t.pending >= TX_KICK_BATCH {
            Self::kick_one(t);
        }
        true
    }

    fn kick_one(t: &mut TxSock) {
        if t.pending > 0 {
            t.tx.submit(t.pending);
            t.pending = 0;
        }
        if t.tx.outstanding() > 0 && t.tx.needs_wakeup() {
            // SAFETY: a zero-length, non-blocking send on our socket.
            unsafe { libc::sendto(t.fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
        }
    }

    /// Hand every queued frame to the kernel and wake it.
    pub fn kick(&mut self) {
        for t in &mut self.socks {
            Self::kick_one(t);
        }
    }

    /// Frames the kernel has finished with since the last call (their chunks free again).
    pub fn reclaim(&mut self) -> super::afpacket::TxDone {
        let mut d = super::afpacket::TxDone::default();
        let stride = self.arena.stride() as u64;
        for t in &mut self.socks {
            let (i, n) = t.comp.peek(u32::MAX);
            for k in 0..n {
                let (chunk, _) = locate(*t.comp.addr(i.wrapping_add(k)), stride);
                if let Some(&len) = self.lens.get(chunk as usize) {
                    self.free.push(chunk as u32);
                    d.sent += 1;
                    d.bytes += u64::from(len);
                }
            }
            t.comp.release(n);
        }
        self.in_flight -= d.sent.min(self.in_flight);
        d
    }

    /// Frames still with the kernel.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Wait up to `ms` for the kernel to finish every frame; returns what finished, with
    /// descriptors it refused (XDP_STATISTICS tx_invalid_descs) as `refused`.
    pub fn drain(&mut self, ms: u64) -> super::afpacket::TxDone {
        let t0 = std::time::Instant::now();
        let mut d = super::afpacket::TxDone::default();
        loop {
            self.kick();
            let r = self.reclaim();
            d.sent += r.sent;
            d.bytes += r.bytes;
            if self.in_flight == 0 || t0.elapsed().as_millis() as u64 >= ms {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        for t in &self.socks {
            d.refused += xdp_statistics(t.fd).map_or(0, |st| st.tx_invalid_descs);
        }
        // Refused descriptors never come back on the completion ring.
        self.in_flight -= d.refused.min(self.in_flight);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_addresses_name_their_buffer_and_offset() {
        let stride = crate::nic::BUF_STRIDE as u64;
        // An rx descriptor: chunk 7's base with the kernel's 256-byte headroom as offset.
        assert_eq!(locate(7 * stride + (256u64 << 48), stride), (7, 256));
        // A completion: the data address we put on the tx ring.
        assert_eq!(locate(7 * stride + 256, stride), (7, 256));
        // An XDP program that pulled the head 14 bytes further.
        assert_eq!(locate(3 * stride + (270u64 << 48), stride), (3, 270));
        assert_eq!(locate(0, stride), (0, 0));
    }

    #[test]
    fn queues_are_dealt_to_workers_and_shortages_are_named() {
        let p = plan_queues("a", 4, 2, 2).expect("4 rx queues, 2 workers");
        assert_eq!(p[0], QueuePlan { rx_queues: vec![0, 2], tx_queue: 0 });
        assert_eq!(p[1], QueuePlan { rx_queues: vec![1, 3], tx_queue: 1 });
        assert_eq!(plan_queues("a", 2, 2, 1).expect("one worker")[0].rx_queues, vec![0, 1]);
        // Fewer output queues than workers: they share them.
        let p = plan_queues("a", 4, 1, 2).expect("one tx queue");
        assert_eq!((p[0].tx_queue, p[1].tx_queue), (0, 0));
        // One input queue: every worker on it, flows spread by the XDP program.
        assert!(spreads(1, 3) && !spreads(1, 1) && !spreads(2, 3));
        let p = plan_queues("in0", 1, 2, 3).expect("one rx queue, three workers");
        assert_eq!(
            p.iter().map(|q| (q.rx_queues.clone(), q.tx_queue)).collect::<Vec<_>>(),
            [(vec![0], 0), (vec![0], 1), (vec![0], 0)]
        );
        // Two queues, three workers: one worker would get nothing.
        let e = plan_queues("in0", 2, 4, 3).expect_err("2 rx queues, 3 workers").to_string();
        assert!(e.contains("in0") && e.contains("2 rx queues") && e.contains("one queue"), "{e}");
    }

    /// Frames built byte by byte; the slot is the C program's hash, worked by hand for one.
    #[test]
    fn the_spreading_hash_is_the_programs() {
        let mut f = vec![0u8; 42];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 19, 7, 9]);
        f[34..38].copy_from_slice(&[0x30, 0x39, 0x00, 0x35]); // ports 12345 -> 53
                                                              // Little-endian words as the BPF loads read them on x86: saddr 0x010012c6,
                                                              // daddr 0x090713c6, ports 0x35003930, protocol 17: h = 0x3d073821, and
                                                              // h * 0x9E3779B1 mod 2^32 = 0x089c67d1, whose top six bits are 2.
        assert_eq!(spread_slot(&f), 2);
        // A fragment: the ports are not read.
        let mut frag = f.clone();
        frag[20] = 0x20;
        // h = 0x08070111; h * 0x9E3779B1 mod 2^32 = 0x94ffc5c1: slot 37.
        assert_eq!(spread_slot(&frag), 37);
        // Not IPv4, or too short: slot 0.
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(spread_slot(&arp), 0);
        assert_eq!(spread_slot(&f[..30]), 0);
        // Slots cover 0..64.
        assert!((0..64u8).all(|x| {
            let mut g = f.clone();
            g[33] = x;
            spread_slot(&g) < 64
        }));
    }
}
