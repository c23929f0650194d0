//! Real interfaces through AF_PACKET: a TPACKET_V3 receive ring (blocks of frames the
//! kernel fills and hands over whole; fanout by flow hash spreads flows over the workers'
//! sockets) and a TPACKET_V2 transmit ring with PACKET_QDISC_BYPASS (frames go straight to
//! the driver's xmit, as a NIC queue would). Every system call of the driver is here.
//!
//! The port plays the device's part for the worker's own descriptor rings: `fill` copies
//! received frames into buffers the worker posted (as a NIC's DMA would), and `send`
//! copies placed frames into the kernel's tx ring and kicks it. So the stages, counters and
//! stats segment are exactly those of the synthetic NIC. Frames the kernel dropped because
//! our ring was full (PACKET_STATISTICS) are counted as `rx_missed`; oversize frames as
//! `drop_oversize`; tx frames the kernel refused as `drop_tx_error`; `tx_packets` counts
//! frames the kernel has taken from the tx ring.

use crate::nic::{BufferArena, RxDevice, TxRing, BUF_SIZE};
use crate::{Error, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// `enum tpacket_versions` values (the PACKET_VERSION option takes an int).
const TPACKET_V2: i32 = 1;
const TPACKET_V3: i32 = 2;
/// Receive ring: blocks of 256 KiB (power-of-two pages), 16 of them.
const RX_BLOCK_SIZE: u32 = 1 << 18;
const RX_BLOCKS: u32 = 16;
const RX_FRAME: u32 = 2048;
/// A partly filled block is handed over after this many ms.
const RX_BLOCK_TIMEOUT_MS: u32 = 1;
/// Transmit ring: 2048-byte frames, 4096 of them.
const TX_FRAME: u32 = 2048;
const TX_FRAMES: u32 = 4096;
/// `send` rings the kernel (one sendto) once this many frames wait; `flush` sends fewer.
/// Each sendto costs a system call and the kernel's per-call setup, so batching them past
/// one burst pays under load; a worker whose rx poll comes back empty flushes, so at low
/// rates no frame waits for a batch.
pub const TX_KICK_BATCH: u64 = 128;
/// Frame data starts after the aligned tpacket2_hdr (TPACKET2_HDRLEN - sizeof(sockaddr_ll)).
const TX_DATA_OFF: usize = 32;
/// `struct virtio_net_hdr`, put before each tx frame when PACKET_VNET_HDR is on.
const VNET_HDR_LEN: usize = 10;

fn sys(what: impl Into<String>) -> Error {
    Error::Sys { what: what.into(), source: std::io::Error::last_os_error() }
}

/// Interface index of `name` (an error naming it when there is none).
pub fn ifindex(name: &str) -> Result<i32> {
    let c = CString::new(name).map_err(|_| Error::Config(format!("interface `{name}`: contains a NUL byte")))?;
    // SAFETY: a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(Error::Config(format!("interface `{name}`: no such interface in this network namespace")));
    }
    Ok(i as i32)
}

/// The MAC address of interface `name` in this thread's network namespace (SIOCGIFHWADDR;
/// /sys shows the namespace it was mounted in, which after setns(2) is another one).
pub fn if_mac(name: &str) -> Result<[u8; 6]> {
    // SAFETY: SIOCGIFHWADDR fills the ifreq's hardware address and reads nothing else.
    let req = unsafe { if_ioctl(name, libc::SIOCGIFHWADDR, "SIOCGIFHWADDR", |_| {}) }?;
    // SAFETY: the kernel filled ifru_hwaddr.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut m = [0u8; 6];
    for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(m)
}

/// An interface ioctl on a datagram socket of this thread's network namespace: an ifreq
/// with `name`, set up further by `prepare`, as the kernel returned it.
///
/// # Safety
/// `request` must be an ioctl that takes a `struct ifreq`, and whatever `prepare` points
/// the ifreq at must stay valid and large enough for what the kernel writes there.
pub(crate) unsafe fn if_ioctl(
    name: &str,
    request: libc::c_ulong,
    what: &str,
    prepare: impl FnOnce(&mut libc::ifreq),
) -> Result<libc::ifreq> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(Error::Config(format!("interface `{name}`: name too long")));
    }
    // SAFETY: a zeroed ifreq is valid; the name fits (checked) with its NUL.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    prepare(&mut req);
    // SAFETY: a datagram socket for the ioctl, closed by OwnedFd.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(sys(format!("interface `{name}`: socket for {what}")));
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: per the contract, the request takes this ifreq.
    if unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut req) } != 0 {
        return Err(sys(format!("interface `{name}`: {what}")));
    }
    Ok(req)
}

/// The kernel's neighbour table as this thread's network namespace sees it.
pub fn arp_table() -> Result<String> {
    let p = "/proc/thread-self/net/arp";
    std::fs::read_to_string(p).map_err(|e| Error::Sys { what: format!("reading {p}"), source: e })
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in m.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// The neighbour MAC of `gw` on interface `dev` from the kernel's table (/proc/net/arp:
/// complete or permanent entries only).
pub fn neighbour_mac(arp_table: &str, gw: std::net::Ipv4Addr, dev: &str) -> Option<[u8; 6]> {
    arp_table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let flags = u32::from_str_radix(f.get(2)?.trim_start_matches("0x"), 16).ok()?;
        (f.first()?.parse::<std::net::Ipv4Addr>().ok()? == gw && *f.get(5)? == dev && flags & 0x2 != 0)
            .then(|| parse_mac(f.get(3)?))
            .flatten()
    })
}

fn setsockopt<T>(fd: i32, level: i32, opt: i32, val: &T, what: &str) -> Result<()> {
    // SAFETY: `val` points at a live T of the given size.
    let r = unsafe {
        libc::setsockopt(fd, level, opt, val as *const T as *const libc::c_void, std::mem::size_of::<T>() as u32)
    };
    if r != 0 {
        return Err(sys(what));
    }
    Ok(())
}

fn packet_socket(protocol: u16, what: &str) -> Result<OwnedFd> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(protocol.to_be())) };
    if fd < 0 {
        return Err(sys(format!("{what}: socket(AF_PACKET) (needs CAP_NET_RAW)")));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: i32, ifindex: i32, protocol: u16, what: &str) -> Result<()> {
    // SAFETY: a zeroed sockaddr_ll is valid; the fields set are plain integers.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: sll is a valid sockaddr_ll of the size given.
    let r = unsafe {
        libc::bind(
            fd,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r != 0 {
        return Err(sys(format!("{what}: bind")));
    }
    Ok(())
}

/// A shared mapping of a packet ring.
struct Ring {
    ptr: *mut u8,
    len: usize,
}

impl Ring {
    fn map(fd: i32, len: usize, what: &str) -> Result<Ring> {
        // SAFETY: mapping the socket's ring as the kernel sized it.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(sys(format!("{what}: mmap of the packet ring")));
        }
        Ok(Ring { ptr: p as *mut u8, len })
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping what `map` mapped.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The status word at `p` (the first u32 of a block or frame header), shared with the kernel.
///
/// # Safety
/// `p` must point at a 4-byte-aligned status word inside a live ring mapping.
unsafe fn status<'a>(p: *mut u8) -> &'a AtomicU32 {
    // SAFETY: per the contract; AtomicU32 has u32's layout.
    unsafe { &*(p as *const AtomicU32) }
}

/// A classic BPF socket filter passing IPv4 frames whole and nothing else
/// (`ldh [12]; jeq #0x800, pass, drop; pass: ret #262144; drop: ret #0`).
fn attach_ipv4_filter(fd: i32, what: &str) -> Result<()> {
    let f = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let prog = [
        f((libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16, 0, 0, 12),
        f((libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, 0, 1, libc::ETH_P_IP as u32),
        f((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, 1 << 18),
        f((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, 0),
    ];
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr() as *mut libc::sock_filter };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog, &format!("{what}: IPv4 filter"))
}

/// The receive side: a TPACKET_V3 ring on the input interface.
pub struct AfpRx {
    fd: OwnedFd,
    ring: Ring,
    block: u32,
    /// Inside the current block: packets left and the offset of the next one.
    left: u32,
    off: usize,
}

// SAFETY: the ring mapping is used by the one worker that owns this queue.
unsafe impl Send for AfpRx {}

impl AfpRx {
    /// Open a receive ring on `ifname` for IPv4 frames; with `fanout`, join that group
    /// (flows spread by hash over every socket in it).
    ///
    /// The socket is a tap (ETH_P_ALL, with a kernel filter passing IPv4 only): taps see a
    /// frame before the interface's ingress hooks, so a `netdev` ingress drop rule can keep
    /// the kernel's own IP stack from processing every frame a second time (what the lab
    /// does). A socket bound to ETH_P_IP would get frames only after those hooks.
    pub fn open(ifname: &str, fanout: Option<u16>) -> Result<AfpRx> {
        let what = format!("afpacket rx on {ifname}");
        let idx = ifindex(ifname)?;
        // Protocol 0 until `bind`: no frame of any interface is queued to the socket
        // before its filter and ring are in place.
        let fd = packet_socket(0, &what)?;
        let raw = fd.as_raw_fd();
        attach_ipv4_filter(raw, &what)?;
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3, &what)?;
        let req = libc::tpacket_req3 {
            tp_block_size: RX_BLOCK_SIZE,
            tp_block_nr: RX_BLOCKS,
            tp_frame_size: RX_FRAME,
            tp_frame_nr: RX_BLOCK_SIZE / RX_FRAME * RX_BLOCKS,
            tp_retire_blk_tov: RX_BLOCK_TIMEOUT_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req, &what)?;
        let ring = Ring::map(raw, (RX_BLOCK_SIZE * RX_BLOCKS) as usize, &what)?;
        // Our own transmissions on this interface are not input (Linux 4.20+; best effort).
        let _ = setsockopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32, &what);
        bind(raw, idx, libc::ETH_P_ALL as u16, &what)?;
        if let Some(g) = fanout {
            let arg: u32 = u32::from(g) | (libc::PACKET_FANOUT_HASH << 16);
            setsockopt(raw, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg, &format!("{what}: fanout group {g}"))?;
        }
        Ok(AfpRx { fd, ring, block: 0, left: 0, off: 0 })
    }

    fn block_ptr(&self, b: u32) -> *mut u8 {
        self.ring.ptr.wrapping_add((b * RX_BLOCK_SIZE) as usize)
    }

    /// Copy up to `max` received frames into buffers the driver posted on `dev`'s ring.
    /// Returns (frames delivered, frames too large for a buffer, which were dropped).
    pub fn fill(&mut self, dev: &mut RxDevice, arena: &BufferArena, max: usize) -> (usize, u64) {
        let (mut n, mut oversize) = (0usize, 0u64);
        while n < max {
            let bp = self.block_ptr(self.block);
            if self.left == 0 {
                // tpacket_block_desc: version u32, offset_to_priv u32, then tpacket_hdr_v1
                // (block_status u32, num_pkts u32, offset_to_first_pkt u32, ...).
                // SAFETY: the block header lies inside the ring.
                let st = unsafe { status(bp.add(8)) };
                if st.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                    break;
                }
                // SAFETY: as above; the kernel handed the block over (status USER).
                unsafe {
                    self.left = std::ptr::read(bp.add(12) as *const u32);
                    self.off = std::ptr::read(bp.add(16) as *const u32) as usize;
                }
                if self.left == 0 {
                    self.release();
                    continue;
                }
            }
            // The kernel's offsets are checked like any input: a packet header that would
            // not fit in the block ends the block.
            if self.off + 28 > RX_BLOCK_SIZE as usize {
                self.release();
                continue;
            }
            let Some(buf) = dev.posted(0) else { break };
            // tpacket3_hdr: tp_next_offset u32, tp_sec, tp_nsec, tp_snaplen u32 (at 12),
            // tp_len (16), tp_status (20), tp_mac u16 (24), tp_net u16.
            // SAFETY: the packet header lies inside the block the kernel handed over.
            let (next, snap, mac) = unsafe {
                let h = bp.add(self.off);
                (
                    std::ptr::read(h as *const u32),
                    std::ptr::read(h.add(12) as *const u32) as usize,
                    std::ptr::read(h.add(24) as *const u16) as usize,
                )
            };
            if snap > BUF_SIZE || self.off + mac + snap > RX_BLOCK_SIZE as usize {
                oversize += 1;
            } else {
                // SAFETY: the source lies inside the block (checked); `buf` is posted to the
                // device, so we own it until `complete`.
                unsafe {
                    std::ptr::copy_nonoverlapping(bp.add(self.off + mac), arena.ptr(buf), snap);
                }
                dev.complete(buf, snap as u16);
                n += 1;
            }
            self.left -= 1;
            self.off += next as usize;
            if self.left == 0 {
                self.release();
            }
        }
        (n, oversize)
    }

    /// Hand the current block back to the kernel and move to the next.
    fn release(&mut self) {
        // SAFETY: the block status word inside the ring.
        let st = unsafe { status(self.block_ptr(self.block).add(8)) };
        st.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.block = (self.block + 1) % RX_BLOCKS;
        self.left = 0;
    }

    /// Frames the kernel dropped since the last call because the ring was full.
    pub fn take_drops(&mut self) -> u64 {
        // SAFETY: a zeroed tpacket_stats_v3 is valid for the kernel to fill.
        let mut st: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as u32;
        // SAFETY: st and len describe a writable buffer of that size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut libc::tpacket_stats_v3 as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            u64::from(st.tp_drops)
        } else {
            0
        }
    }

    /// Block until a frame may be ready or `timeout_ms` passes (an idle worker sleeps here
    /// instead of spinning).
    pub fn wait(&self, timeout_ms: i32) {
        let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN | libc::POLLERR, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout_ms) };
    }
}

/// The transmit side: a TPACKET_V2 ring on the output interface, bypassing the qdisc.
pub struct AfpTx {
    fd: OwnedFd,
    ring: Ring,
    /// Bytes of virtio_net_hdr before each frame (0 when the kernel refused the option).
    vnet: usize,
    /// Frames submitted so far, how many of them the kernel was asked to send, and how
    /// many it has finished with.
    next: u64,
    kicked: u64,
    done: u64,
}

// SAFETY: the ring mapping is used by the one worker that owns this queue.
unsafe impl Send for AfpTx {}

/// What one reclaim of the tx ring found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TxDone {
    pub sent: u64,
    pub bytes: u64,
    pub refused: u64,
}

impl AfpTx {
    /// A tx ring on `ifname` that bypasses the qdisc (frames go straight to the driver's
    /// xmit on the queue of the sending CPU).
    pub fn open(ifname: &str) -> Result<AfpTx> {
        AfpTx::open_with(ifname, true)
    }

    /// A tx ring on `ifname`; with `qdisc_bypass` false frames take the device's queue
    /// selection (a flow hash across its tx queues) and its qdisc.
    pub fn open_with(ifname: &str, qdisc_bypass: bool) -> Result<AfpTx> {
        let what = format!("afpacket tx on {ifname}");
        let idx = ifindex(ifname)?;
        // Protocol 0: this socket receives nothing.
        let fd = packet_socket(0, &what)?;
        let raw = fd.as_raw_fd();
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V2, &what)?;
        if qdisc_bypass {
            setsockopt(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32, &what)?;
        }
        // With a virtio_net_hdr whose hdr_len is the whole frame, the kernel copies each
        // frame into the skb's linear part. Without it the frame stays in the ring's page
        // as a zero-copy fragment, which a veth into another namespace must then copy out
        // into a freshly allocated page (skb_copy_ubufs): a page allocation per packet.
        let vnet = match setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &1i32, &what) {
            Ok(()) => VNET_HDR_LEN,
            Err(_) => 0,
        };
        let req = libc::tpacket_req {
            tp_block_size: TX_FRAME * 64,
            tp_block_nr: TX_FRAMES / 64,
            tp_frame_size: TX_FRAME,
            tp_frame_nr: TX_FRAMES,
        };
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_TX_RING, &req, &what)?;
        let ring = Ring::map(raw, (TX_FRAME * TX_FRAMES) as usize, &what)?;
        bind(raw, idx, 0, &what)?;
        Ok(AfpTx { fd, ring, vnet, next: 0, kicked: 0, done: 0 })
    }

    fn frame(&self, seq: u64) -> *mut u8 {
        self.ring.ptr.wrapping_add((seq % u64::from(TX_FRAMES)) as usize * TX_FRAME as usize)
    }

    /// Frames the kernel has taken since the last call (sent, or refused as malformed).
    pub fn reclaim(&mut self) -> TxDone {
        let mut d = TxDone::default();
        while self.done < self.next {
            let f = self.frame(self.done);
            // SAFETY: the frame's status word inside the ring.
            let st = unsafe { status(f) }.load(Ordering::Acquire);
            if st & libc::TP_STATUS_WRONG_FORMAT != 0 {
                d.refused += 1;
            } else if st == libc::TP_STATUS_AVAILABLE {
                d.sent += 1;
                // SAFETY: tp_len (u32 at 4) of a frame the kernel finished with.
                let tp_len = unsafe { std::ptr::read(f.add(4) as *const u32) };
                d.bytes += u64::from(tp_len).saturating_sub(self.vnet as u64);
            } else {
                break; // still queued or being sent
            }
            // SAFETY: as above; the frame is ours again.
            unsafe { status(f) }.store(libc::TP_STATUS_AVAILABLE, Ordering::Relaxed);
            self.done += 1;
        }
        d
    }

    /// Copy the frames placed on `tx` since the last doorbell into the kernel's ring, and
    /// kick it once [`TX_KICK_BATCH`] frames wait; they complete on `tx` at once (their
    /// buffers are free to reuse). Returns the frames that found no free slot (dropped)
    /// and what the kernel finished.
    pub fn send(&mut self, tx: &mut TxRing, arena: &BufferArena) -> (u64, TxDone) {
        let mut full = 0u64;
        let mut done = self.reclaim();
        for s in tx.head..tx.tail {
            let (b, len) = tx.slot(s);
            // SAFETY: the buffer is on our tx ring, owned by this queue until reclaimed.
            let frame = unsafe { &arena.buf_mut(b)[..usize::from(len).min(BUF_SIZE)] };
            if !self.push(frame) {
                full += 1;
            }
        }
        tx.head = tx.tail;
        if self.next - self.kicked >= TX_KICK_BATCH || full > 0 {
            self.kick();
        }
        let more = self.reclaim();
        done.sent += more.sent;
        done.bytes += more.bytes;
        done.refused += more.refused;
        (full, done)
    }

    /// Queue one frame (a copy); false when every slot is still with the kernel.
    pub fn push(&mut self, frame: &[u8]) -> bool {
        if self.next - self.done >= u64::from(TX_FRAMES) {
            return false;
        }
        let len = frame.len().min(TX_FRAME as usize - TX_DATA_OFF - self.vnet);
        let f = self.frame(self.next);
        let tp_len = (self.vnet + len) as u32;
        // SAFETY: the frame slot is free (checked) and inside the ring.
        unsafe {
            if self.vnet > 0 {
                // virtio_net_hdr: no checksum offload, no GSO, hdr_len = the whole frame.
                let mut h = [0u8; VNET_HDR_LEN];
                h[2..4].copy_from_slice(&(len as u16).to_le_bytes());
                std::ptr::copy_nonoverlapping(h.as_ptr(), f.add(TX_DATA_OFF), VNET_HDR_LEN);
            }
            std::ptr::copy_nonoverlapping(frame.as_ptr(), f.add(TX_DATA_OFF + self.vnet), len);
            std::ptr::write(f.add(4) as *mut u32, tp_len);
            std::ptr::write(f.add(8) as *mut u32, tp_len);
            std::ptr::write(f.add(12) as *mut u16, TX_DATA_OFF as u16);
            fence(Ordering::Release);
            status(f).store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        }
        self.next += 1;
        true
    }

    /// Ask the kernel to send every frame marked SEND_REQUEST (without blocking).
    pub fn kick(&mut self) {
        if self.next > self.done {
            // SAFETY: a zero-length send on our packet socket.
            unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        }
        self.kicked = self.next;
    }

    /// Send what waits for a batch now; returns what the kernel finished.
    pub fn flush(&mut self) -> TxDone {
        if self.next > self.kicked {
            self.kick();
        }
        self.reclaim()
    }

    /// Frames still with the kernel.
    pub fn in_flight(&self) -> u64 {
        self.next - self.done
    }

    /// Wait up to `ms` for the kernel to finish every frame; returns what finished.
    pub fn drain(&mut self, ms: u64) -> TxDone {
        let t0 = std::time::Instant::now();
        let mut d = TxDone::default();
        loop {
            self.kick();
            let r = self.reclaim();
            d.sent += r.sent;
            d.bytes += r.bytes;
            d.refused += r.refused;
            if self.in_flight() == 0 || t0.elapsed().as_millis() as u64 >= ms {
                return d;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

/// One worker's port: its rx socket (in the fanout group), its tx socket, and the device
/// side of the worker's rx descriptor ring.
pub struct AfpQueue {
    pub rx: AfpRx,
    pub tx: AfpTx,
    pub dev: RxDevice,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_and_neighbours_parse() {
        assert_eq!(parse_mac("02:00:c6:12:00:06"), Some([2, 0, 0xc6, 0x12, 0, 6]));
        assert_eq!(parse_mac("02:00:c6:12:00"), None);
        assert_eq!(parse_mac("02:00:c6:12:00:06:07"), None);
        let arp = "IP address       HW type     Flags       HW address            Mask     Device\n\
                   198.18.0.6       0x1         0x6         02:00:c6:12:00:06     *        fsl-f1\n\
                   198.18.0.9       0x1         0x0         00:00:00:00:00:00     *        fsl-f1\n";
        let gw = |s: &str| s.parse().unwrap();
        assert_eq!(neighbour_mac(arp, gw("198.18.0.6"), "fsl-f1"), Some([2, 0, 0xc6, 0x12, 0, 6]));
        assert_eq!(neighbour_mac(arp, gw("198.18.0.6"), "fsl-f0"), None, "another device");
        assert_eq!(neighbour_mac(arp, gw("198.18.0.9"), "fsl-f1"), None, "incomplete entry");
    }

    #[test]
    fn unknown_interfaces_are_named() {
        let e = AfpRx::open("fwdscope-nope0", None).err().expect("error").to_string();
        assert!(e.contains("fwdscope-nope0"), "{e}");
    }
}
