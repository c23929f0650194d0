//! The AF_XDP ABI in one file: libxdp's socket and UMEM calls, loaded at run time
//! (`dlopen("libxdp.so.1")`, so the forwarder builds and runs its other drivers on a machine
//! without libxdp), the kernel's `if_xdp.h` constants and structs, and the four ring
//! operations libxdp keeps as inline functions in its header (reserve/submit on producer
//! rings, peek/release on consumer rings), written out here with the same memory order.
//!
//! libxdp loads its default XSK program (`xsk_def_prog`: redirect by rx queue index into an
//! XSKMAP, pass to the stack when no socket is bound) the first time a socket binds to an
//! interface's queue, and detaches it when the last socket of the interface is deleted.

use crate::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// `SOL_XDP` (linux/socket.h).
pub const SOL_XDP: c_int = 283;
/// getsockopt names (linux/if_xdp.h).
pub const XDP_STATISTICS: c_int = 7;
pub const XDP_OPTIONS: c_int = 8;
pub const XDP_OPTIONS_ZEROCOPY: u32 = 1;
/// Bind flags.
pub const XDP_ZEROCOPY: u16 = 1 << 2;
pub const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// `XDP_RING_NEED_WAKEUP` in a ring's flags word.
pub const XDP_RING_NEED_WAKEUP: u32 = 1;
/// UMEM flags: chunks at any address (our buffers are 2112 bytes apart, not a power of two).
pub const XDP_UMEM_UNALIGNED_CHUNK_FLAG: u32 = 1;
/// In unaligned mode a descriptor's address carries the data offset in its top 16 bits.
pub const XSK_UNALIGNED_BUF_OFFSET_SHIFT: u32 = 48;
pub const XSK_UNALIGNED_BUF_ADDR_MASK: u64 = (1 << XSK_UNALIGNED_BUF_OFFSET_SHIFT) - 1;
/// Where the kernel puts a received frame's first byte, past the chunk's start.
pub const XDP_PACKET_HEADROOM: usize = 256;
/// `xdp_flags` of the attach (linux/if_link.h).
pub const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// libxdp: do not load the default program (a tx-only socket needs none).
pub const XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD: u32 = 1;
/// `enum xdp_attach_mode` (libxdp.h).
pub const XDP_MODE_NATIVE: c_int = 1;
pub const XDP_MODE_SKB: c_int = 2;
pub const XDP_MODE_HW: c_int = 3;

/// `struct xsk_ring_prod` / `xsk_ring_cons` (DEFINE_XSK_RING in xsk.h).
#[repr(C)]
#[derive(Debug)]
pub struct XskRing {
    pub cached_prod: u32,
    pub cached_cons: u32,
    pub mask: u32,
    pub size: u32,
    pub producer: *mut u32,
    pub consumer: *mut u32,
    pub ring: *mut c_void,
    pub flags: *mut u32,
}

impl Default for XskRing {
    fn default() -> Self {
        XskRing {
            cached_prod: 0,
            cached_cons: 0,
            mask: 0,
            size: 0,
            producer: std::ptr::null_mut(),
            consumer: std::ptr::null_mut(),
            ring: std::ptr::null_mut(),
            flags: std::ptr::null_mut(),
        }
    }
}

/// `struct xdp_desc`: one rx or tx descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// `struct xsk_umem_config`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct UmemConfig {
    pub fill_size: u32,
    pub comp_size: u32,
    pub frame_size: u32,
    pub frame_headroom: u32,
    pub flags: u32,
}

/// `struct xsk_socket_config`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SocketConfig {
    pub rx_size: u32,
    pub tx_size: u32,
    pub libxdp_flags: u32,
    pub xdp_flags: u32,
    pub bind_flags: u16,
}

/// `struct xdp_statistics` (every field since Linux 5.9).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

/// Opaque libxdp handles.
pub enum Umem {}
pub enum Socket {}
pub enum Multiprog {}
pub enum Program {}
/// libbpf's opaque object handle (an ELF of BPF programs and maps).
pub enum BpfObject {}

type UmemCreate =
    unsafe extern "C" fn(*mut *mut Umem, *mut c_void, u64, *mut XskRing, *mut XskRing, *const UmemConfig) -> c_int;
type SocketCreateShared = unsafe extern "C" fn(
    *mut *mut Socket,
    *const c_char,
    u32,
    *mut Umem,
    *mut XskRing,
    *mut XskRing,
    *mut XskRing,
    *mut XskRing,
    *const SocketConfig,
) -> c_int;

/// The libxdp entry points the driver uses.
pub struct Libxdp {
    _lib: libloading::Library,
    pub umem_create: UmemCreate,
    pub umem_delete: unsafe extern "C" fn(*mut Umem) -> c_int,
    pub socket_create_shared: SocketCreateShared,
    pub socket_delete: unsafe extern "C" fn(*mut Socket),
    pub socket_fd: unsafe extern "C" fn(*const Socket) -> c_int,
    pub multiprog_get_from_ifindex: unsafe extern "C" fn(c_int) -> *mut Multiprog,
    pub multiprog_attach_mode: unsafe extern "C" fn(*const Multiprog) -> c_int,
    pub multiprog_is_legacy: unsafe extern "C" fn(*const Multiprog) -> bool,
    pub multiprog_close: unsafe extern "C" fn(*mut Multiprog),
    pub get_error: unsafe extern "C" fn(*const c_void) -> std::ffi::c_long,
    pub strerror: unsafe extern "C" fn(c_int, *mut c_char, usize) -> c_int,
    set_print: unsafe extern "C" fn(*const c_void) -> *const c_void,
    program_find_file: unsafe extern "C" fn(*const c_char, *const c_char, *const c_void) -> *mut Program,
    program_attach: unsafe extern "C" fn(*mut Program, c_int, c_int, u32) -> c_int,
    program_detach: unsafe extern "C" fn(*mut Program, c_int, c_int, u32) -> c_int,
    program_close: unsafe extern "C" fn(*mut Program),
    program_from_bpf_obj: unsafe extern "C" fn(*mut BpfObject, *const c_char) -> *mut Program,
    /// libbpf, for fwdscope's own XDP program: open an object from memory, find a map's
    /// descriptor after the load, set a map entry, close the object.
    object_open_mem: unsafe extern "C" fn(*const c_void, usize, *const c_void) -> *mut BpfObject,
    object_find_map_fd_by_name: unsafe extern "C" fn(*const BpfObject, *const c_char) -> c_int,
    object_close: unsafe extern "C" fn(*mut BpfObject),
    map_update_elem: unsafe extern "C" fn(c_int, *const c_void, *const c_void, u64) -> c_int,
    _bpf: libloading::Library,
}

// SAFETY: plain function pointers into a library that stays loaded.
unsafe impl Send for Libxdp {}
unsafe impl Sync for Libxdp {}

/// libxdp, loaded once per process; an error says what to install. Its and libbpf's own
/// messages on stderr are silenced: the driver reports what it obtained itself (attach
/// mode, legacy attach without a dispatcher, copy mode) and every failure with its errno.
pub fn libxdp() -> Result<&'static Libxdp> {
    static LIB: OnceLock<std::result::Result<Libxdp, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let l = load()?;
        // SAFETY: a null print function turns the library's messages off.
        unsafe { (l.set_print)(std::ptr::null()) };
        // SAFETY: libbpf is already loaded (libxdp needs it); a null print function turns
        // its messages off too. Best effort: an absent symbol leaves them on.
        unsafe {
            if let Ok(bpf) = libloading::Library::new("libbpf.so.1") {
                if let Ok(f) = bpf.get::<unsafe extern "C" fn(*const c_void) -> *const c_void>(b"libbpf_set_print\0") {
                    f(std::ptr::null());
                }
                std::mem::forget(bpf);
            }
        }
        Ok(l)
    })
    .as_ref()
    .map_err(|e| Error::Config(e.clone()))
}

fn load() -> std::result::Result<Libxdp, String> {
    // SAFETY: loading libxdp runs its (libbpf's) constructors, which only set defaults.
    let lib = unsafe { libloading::Library::new("libxdp.so.1") }.map_err(|e| {
        format!("--driver afxdp needs libxdp (Debian/Ubuntu: apt install libxdp1; Fedora: dnf install libxdp): {e}")
    })?;
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol's C signature is the one declared on the field (xsk.h,
            // libxdp.h of libxdp 1.2 and later).
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("libxdp.so.1 has no {} (libxdp 1.2 or later needed): {e}", $name))?
        };
    }
    // SAFETY: libbpf is libxdp's dependency, already loaded by the line above.
    let bpf = unsafe { libloading::Library::new("libbpf.so.1") }
        .map_err(|e| format!("--driver afxdp needs libbpf (it comes with libxdp): {e}"))?;
    macro_rules! bpf_sym {
        ($name:literal) => {
            // SAFETY: the symbol's C signature is the one declared on the field (libbpf.h,
            // bpf.h of libbpf 0.6 and later).
            *unsafe { bpf.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("libbpf.so.1 has no {}: {e}", $name))?
        };
    }
    Ok(Libxdp {
        program_from_bpf_obj: sym!("xdp_program__from_bpf_obj"),
        object_open_mem: bpf_sym!("bpf_object__open_mem"),
        object_find_map_fd_by_name: bpf_sym!("bpf_object__find_map_fd_by_name"),
        object_close: bpf_sym!("bpf_object__close"),
        map_update_elem: bpf_sym!("bpf_map_update_elem"),
        _bpf: bpf,
        umem_create: sym!("xsk_umem__create"),
        umem_delete: sym!("xsk_umem__delete"),
        socket_create_shared: sym!("xsk_socket__create_shared"),
        socket_delete: sym!("xsk_socket__delete"),
        socket_fd: sym!("xsk_socket__fd"),
        multiprog_get_from_ifindex: sym!("xdp_multiprog__get_from_ifindex"),
        multiprog_attach_mode: sym!("xdp_multiprog__attach_mode"),
        multiprog_is_legacy: sym!("xdp_multiprog__is_legacy"),
        multiprog_close: sym!("xdp_multiprog__close"),
        get_error: sym!("libxdp_get_error"),
        strerror: sym!("libxdp_strerror"),
        set_print: sym!("libxdp_set_print"),
        program_find_file: sym!("xdp_program__find_file"),
        program_attach: sym!("xdp_program__attach"),
        program_detach: sym!("xdp_program__detach"),
        program_close: sym!("xdp_program__close"),
        _lib: lib,
    })
}

impl Libxdp {
    /// libxdp's text for a negative errno-style return.
    pub fn error_text(&self, err: c_int) -> String {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer and its size.
        unsafe { (self.strerror)(err, buf.as_mut_ptr(), buf.len()) };
        // SAFETY: libxdp_strerror NUL-terminates within the size given.
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
    }

    /// Whether `ifindex` takes libxdp's XSK program in native mode: attach it there and
    /// detach it at once, no socket involved (a socket whose native attach failed leaves
    /// the queue unusable for a few seconds). Ok, or libxdp's error as a positive errno.
    pub fn probe_native(&self, ifindex: i32) -> std::result::Result<(), c_int> {
        // SAFETY: a NUL-terminated file name libxdp looks up on its object path.
        let prog =
            unsafe { (self.program_find_file)(c"xsk_def_xdp_prog.o".as_ptr(), std::ptr::null(), std::ptr::null()) };
        // SAFETY: libxdp_get_error accepts any pointer the library returned.
        let e = unsafe { (self.get_error)(prog as *const c_void) };
        if prog.is_null() || e != 0 {
            return Err(if e != 0 { (-e) as c_int } else { libc::ENOENT });
        }
        // SAFETY: a valid program handle, attached and detached on this interface, closed once.
        let r = unsafe { (self.program_attach)(prog, ifindex, XDP_MODE_NATIVE, 0) };
        if r == 0 {
            // SAFETY: as above.
            unsafe { (self.program_detach)(prog, ifindex, XDP_MODE_NATIVE, 0) };
        }
        // SAFETY: as above.
        unsafe { (self.program_close)(prog) };
        if r == 0 {
            Ok(())
        } else {
            Err(-r)
        }
    }

    /// How the XDP program on `ifindex` is attached (`XDP_MODE_*`), or None when there is
    /// none; and whether it is libxdp's legacy single-program attach (no dispatcher).
    pub fn attach_mode(&self, ifindex: i32) -> Option<(c_int, bool)> {
        // SAFETY: returns a handle or an error pointer (libxdp_get_error tells).
        let mp = unsafe { (self.multiprog_get_from_ifindex)(ifindex) };
        // SAFETY: libxdp_get_error accepts any pointer the library returned.
        if mp.is_null() || unsafe { (self.get_error)(mp as *const c_void) } != 0 {
            return None;
        }
        // SAFETY: a valid handle, closed once.
        let r = unsafe { ((self.multiprog_attach_mode)(mp), (self.multiprog_is_legacy)(mp)) };
        // SAFETY: as above.
        unsafe { (self.multiprog_close)(mp) };
        Some(r)
    }
}

/// setsockopt/getsockopt names and the mmap offset of a tx ring (linux/if_xdp.h).
const XDP_MMAP_OFFSETS: c_int = 1;
const XDP_TX_RING: c_int = 3;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
/// Bind flag: share the buffer pool of the socket named by `sxdp_shared_umem_fd`.
const XDP_SHARED_UMEM: u16 = 1;

/// `struct xdp_ring_offset` and `struct xdp_mmap_offsets` (with the flags word, Linux 5.4+).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// A transmit-only socket bound to a queue that already has a socket of ours: it shares
/// that socket's buffer pool (its fill and completion rings) and has its own tx ring.
/// libxdp cannot make one: it always names the UMEM's first socket as the one to share
/// with, and the kernel shares a pool only with a socket on the same interface and queue.
pub struct SharedTxSocket {
    pub fd: c_int,
    map: *mut c_void,
    map_len: usize,
}

// SAFETY: the mapping is only touched through the ring of the worker that owns it.
unsafe impl Send for SharedTxSocket {}

impl SharedTxSocket {
    /// Bind a socket with a tx ring of `size` descriptors to `queue` of `ifindex`, sharing
    /// the pool of `shared_fd` (bound there already), and set `ring` up over its tx ring.
    /// Err: the failing call and its error.
    pub fn bind(
        ifindex: u32,
        queue: u32,
        size: u32,
        shared_fd: c_int,
        ring: &mut XskRing,
    ) -> std::result::Result<SharedTxSocket, (&'static str, std::io::Error)> {
        // SAFETY: plain socket creation.
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(last_error("socket(AF_XDP)"));
        }
        let mut sock = SharedTxSocket { fd, map: std::ptr::null_mut(), map_len: 0 };
        let off = sock.tx_ring_offsets(size)?;
        sock.map_tx_ring(&off, size)?;
        sock.bind_shared(ifindex, queue, shared_fd)?;
        sock.start_ring(&off, size, ring);
        Ok(sock)
    }

    /// Ask for a tx ring of `size` descriptors and read where the kernel maps its parts.
    fn tx_ring_offsets(&self, size: u32) -> std::result::Result<MmapOffsets, (&'static str, std::io::Error)> {
        let fd = self.fd;
        // SAFETY: a u32 option of its size.
        let r = unsafe { libc::setsockopt(fd, SOL_XDP, XDP_TX_RING, &size as *const u32 as *const c_void, 4) };
        if r != 0 {
            return Err(last_error("setsockopt(XDP_TX_RING)"));
        }
        let mut off = MmapOffsets::default();
        let mut len = std::mem::size_of::<MmapOffsets>() as libc::socklen_t;
        // SAFETY: the struct and its size.
        let r = unsafe {
            libc::getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &mut off as *mut MmapOffsets as *mut c_void, &mut len)
        };
        if r != 0 || len as usize != std::mem::size_of::<MmapOffsets>() {
            return Err(last_error("getsockopt(XDP_MMAP_OFFSETS)"));
        }
        Ok(off)
    }

    /// Map the socket's tx ring of `size` descriptors (unmapped on drop).
    fn map_tx_ring(&mut self, off: &MmapOffsets, size: u32) -> std::result::Result<(), (&'static str, std::io::Error)> {
        let map_len = off.tx.desc as usize + size as usize * std::mem::size_of::<XdpDesc>();
        // SAFETY: mapping the socket's tx ring at the kernel's page offset for it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                self.fd,
                XDP_PGOFF_TX_RING,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(last_error("mmap of the tx ring"));
        }
        self.map = map;
        self.map_len = map_len;
        Ok(())
    }

    /// Bind to `queue` of `ifindex`, sharing the buffer pool of `shared_fd`.
    fn bind_shared(
        &self,
        ifindex: u32,
        queue: u32,
        shared_fd: c_int,
    ) -> std::result::Result<(), (&'static str, std::io::Error)> {
        let sa = SockaddrXdp {
            family: libc::AF_XDP as u16,
            flags: XDP_SHARED_UMEM,
            ifindex,
            queue_id: queue,
            shared_umem_fd: shared_fd as u32,
        };
        // SAFETY: the address and its size.
        let r = unsafe {
            libc::bind(
                self.fd,
                &sa as *const SockaddrXdp as *const libc::sockaddr,
                std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(last_error("bind (sharing the queue's buffer pool)"));
        }
        Ok(())
    }

    /// Set `ring` up over the mapped tx ring of `size` descriptors, as libxdp starts a
    /// producer ring.
    fn start_ring(&self, off: &MmapOffsets, size: u32, ring: &mut XskRing) {
        let map = self.map;
        let at = |o: u64| (map as *mut u8).wrapping_add(o as usize);
        *ring = XskRing {
            cached_prod: 0,
            cached_cons: 0,
            mask: size - 1,
            size,
            producer: at(off.tx.producer) as *mut u32,
            consumer: at(off.tx.consumer) as *mut u32,
            ring: at(off.tx.desc) as *mut c_void,
            flags: at(off.tx.flags) as *mut u32,
        };
        // As libxdp starts a producer ring: its cached consumer one ring ahead.
        // SAFETY: the index words of the ring just mapped.
        unsafe {
            ring.cached_prod = word(ring.producer).load(Ordering::Relaxed);
            ring.cached_cons = word(ring.consumer).load(Ordering::Relaxed).wrapping_add(size);
        }
    }
}

/// `what` failed: the call's name and the thread's last OS error.
fn last_error(what: &'static str) -> (&'static str, std::io::Error) {
    (what, std::io::Error::last_os_error())
}

impl Drop for SharedTxSocket {
    fn drop(&mut self) {
        // SAFETY: the mapping and descriptor made in `bind`, released once.
        unsafe {
            if !self.map.is_null() {
                libc::munmap(self.map, self.map_len);
            }
            libc::close(self.fd);
        }
    }
}

/// Slots of the flow-spreading program's XSKMAP (`FWD_SPREAD_SLOTS` in bpf/xdp_spread.c).
pub const SPREAD_SLOTS: u32 = 64;

/// fwdscope's flow-spreading XDP program (bpf/xdp_spread.c, compiled by the build script
/// with clang), or why this build has none.
pub fn spread_object() -> std::result::Result<&'static [u8], &'static str> {
    #[cfg(fwd_xdp_spread)]
    {
        Ok(include_bytes!(concat!(env!("OUT_DIR"), "/xdp_spread.o")))
    }
    #[cfg(not(fwd_xdp_spread))]
    {
        Err(env!("FWD_XDP_SPREAD_WHY"))
    }
}

/// The flow-spreading program, loaded and attached to one interface; detached and
/// unloaded when dropped (after every socket it redirects to is gone).
pub struct SpreadProg {
    lib: &'static Libxdp,
    obj: *mut BpfObject,
    prog: *mut Program,
    ifindex: c_int,
    mode: c_int,
    map_fd: c_int,
}

// SAFETY: the handles are only used under &self/&mut self; libbpf's map update is a
// system call on a descriptor.
unsafe impl Send for SpreadProg {}
unsafe impl Sync for SpreadProg {}

impl SpreadProg {
    /// Load the program and attach it to `ifindex` in `mode` (`XDP_MODE_NATIVE` or
    /// `XDP_MODE_SKB`). Err: the attach's positive errno (0 for other failures) and what
    /// failed.
    pub fn attach(
        lib: &'static Libxdp,
        ifindex: c_int,
        mode: c_int,
    ) -> std::result::Result<SpreadProg, (c_int, String)> {
        let bytes = spread_object().map_err(|e| (0, e.to_string()))?;
        // SAFETY: the bytes outlive the call (libbpf copies them); no open options.
        let obj = unsafe { (lib.object_open_mem)(bytes.as_ptr() as *const c_void, bytes.len(), std::ptr::null()) };
        if obj.is_null() {
            return Err((0, format!("opening the spreading program: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: a valid object; the section name of the program in bpf/xdp_spread.c.
        let prog = unsafe { (lib.program_from_bpf_obj)(obj, c"xdp".as_ptr()) };
        // SAFETY: libxdp_get_error accepts any pointer the library returned.
        let e = unsafe { (lib.get_error)(prog as *const c_void) };
        if prog.is_null() || e != 0 {
            // SAFETY: the object opened above, closed once.
            unsafe { (lib.object_close)(obj) };
            let e = if e != 0 { e as c_int } else { -libc::ENOENT };
            return Err((0, format!("the spreading program: {}", lib.error_text(e))));
        }
        let mut p = SpreadProg { lib, obj, prog, ifindex, mode, map_fd: -1 };
        // SAFETY: a valid program handle; libxdp loads it (the verifier runs here) and
        // attaches it, through its dispatcher where bpffs allows, alone otherwise.
        let r = unsafe { (lib.program_attach)(prog, ifindex, mode, 0) };
        if r != 0 {
            p.ifindex = 0;
            return Err((-r, lib.error_text(r)));
        }
        // SAFETY: the object is loaded now; the map's name in bpf/xdp_spread.c.
        p.map_fd = unsafe { (lib.object_find_map_fd_by_name)(obj, c"fwd_xsks".as_ptr()) };
        if p.map_fd < 0 {
            return Err((0, "the spreading program has no map fwd_xsks".into()));
        }
        Ok(p)
    }

    /// Put socket `fd` in slot `slot` of the program's map.
    pub fn set_slot(&self, slot: u32, fd: c_int) -> std::io::Result<()> {
        // SAFETY: key and value of the map's sizes (u32 each).
        let r = unsafe {
            (self.lib.map_update_elem)(
                self.map_fd,
                &slot as *const u32 as *const c_void,
                &fd as *const c_int as *const c_void,
                0,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::from_raw_os_error(-r))
        }
    }
}

impl Drop for SpreadProg {
    fn drop(&mut self) {
        // SAFETY: handles created in `attach`, each released once; ifindex 0 means the
        // attach never happened.
        unsafe {
            if self.ifindex != 0 {
                (self.lib.program_detach)(self.prog, self.ifindex, self.mode, 0);
            }
            (self.lib.program_close)(self.prog);
            (self.lib.object_close)(self.obj);
        }
    }
}

/// Words shared with the kernel: the producer and consumer indexes and the flags word.
///
/// # Safety
/// `p` must be one of a live ring's index pointers.
#[inline(always)]
unsafe fn word<'a>(p: *mut u32) -> &'a AtomicU32 {
    // SAFETY: per the contract; AtomicU32 has u32's layout and alignment.
    unsafe { &*(p as *const AtomicU32) }
}

impl XskRing {
    /// Producer ring: free slots, at least `nb` if there are (xsk_prod_nb_free).
    #[inline(always)]
    pub fn prod_free(&mut self, nb: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= nb {
            return free;
        }
        // SAFETY: a ring set up by libxdp.
        self.cached_cons = unsafe { word(self.consumer) }.load(Ordering::Acquire).wrapping_add(self.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Producer ring: reserve `nb` slots; the first one's index, or None (xsk_ring_prod__reserve).
    #[inline(always)]
    pub fn reserve(&mut self, nb: u32) -> Option<u32> {
        if self.prod_free(nb) < nb {
            return None;
        }
        let idx = self.cached_prod;
        self.cached_prod = self.cached_prod.wrapping_add(nb);
        Some(idx)
    }

    /// Producer ring: hand `nb` reserved slots to the kernel (xsk_ring_prod__submit).
    #[inline(always)]
    pub fn submit(&mut self, nb: u32) {
        // SAFETY: a ring set up by libxdp; only this thread produces on it.
        let p = unsafe { word(self.producer) };
        p.store(p.load(Ordering::Relaxed).wrapping_add(nb), Ordering::Release);
    }

    /// Consumer ring: up to `nb` entries ready; the first one's index (xsk_ring_cons__peek).
    #[inline(always)]
    pub fn peek(&mut self, nb: u32) -> (u32, u32) {
        let mut entries = self.cached_prod.wrapping_sub(self.cached_cons);
        if entries == 0 {
            // SAFETY: a ring set up by libxdp.
            self.cached_prod = unsafe { word(self.producer) }.load(Ordering::Acquire);
            entries = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        let n = entries.min(nb);
        let idx = self.cached_cons;
        self.cached_cons = self.cached_cons.wrapping_add(n);
        (idx, n)
    }

    /// Consumer ring: entries ready, none taken (the producer index is read afresh).
    #[inline(always)]
    pub fn ready(&mut self) -> u32 {
        // SAFETY: a ring set up by libxdp.
        self.cached_prod = unsafe { word(self.producer) }.load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Consumer ring: give `nb` consumed entries back (xsk_ring_cons__release).
    #[inline(always)]
    pub fn release(&mut self, nb: u32) {
        // SAFETY: a ring set up by libxdp; only this thread consumes from it.
        let c = unsafe { word(self.consumer) };
        c.store(c.load(Ordering::Relaxed).wrapping_add(nb), Ordering::Release);
    }

    /// Submitted entries the kernel has not consumed yet (producer ring).
    #[inline(always)]
    pub fn outstanding(&self) -> u32 {
        // SAFETY: a ring set up by libxdp.
        let (prod, cons) = unsafe { (word(self.producer), word(self.consumer)) };
        prod.load(Ordering::Relaxed).wrapping_sub(cons.load(Ordering::Acquire))
    }

    /// The kernel asks to be woken (a system call) to process this ring.
    #[inline(always)]
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: a ring set up by libxdp with XDP_USE_NEED_WAKEUP.
        unsafe { word(self.flags) }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Fill or completion ring entry `idx` (a UMEM address).
    #[inline(always)]
    pub fn addr(&mut self, idx: u32) -> &mut u64 {
        // SAFETY: the ring holds `size` u64 entries; the mask keeps idx inside.
        unsafe { &mut *(self.ring as *mut u64).add((idx & self.mask) as usize) }
    }

    /// Rx or tx ring entry `idx`.
    #[inline(always)]
    pub fn desc(&mut self, idx: u32) -> &mut XdpDesc {
        // SAFETY: the ring holds `size` descriptors; the mask keeps idx inside.
        unsafe { &mut *(self.ring as *mut XdpDesc).add((idx & self.mask) as usize) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring over plain memory, as the kernel would map it.
    struct Mem {
        prod: Box<u32>,
        cons: Box<u32>,
        flags: Box<u32>,
        slots: Vec<u64>,
    }

    fn ring(m: &mut Mem, producer_side: bool) -> XskRing {
        let size = m.slots.len() as u32;
        let mut r = XskRing {
            mask: size - 1,
            size,
            producer: &mut *m.prod,
            consumer: &mut *m.cons,
            ring: m.slots.as_mut_ptr() as *mut c_void,
            flags: &mut *m.flags,
            ..XskRing::default()
        };
        if producer_side {
            // libxdp starts a producer ring's cached consumer one ring ahead.
            r.cached_cons = size;
        }
        r
    }

    #[test]
    fn a_producer_fills_the_ring_and_no_further_until_the_consumer_releases() {
        let mut m = Mem { prod: Box::new(0), cons: Box::new(0), flags: Box::new(0), slots: vec![0; 8] };
        let mut p = ring(&mut m, true);
        let i = p.reserve(6).expect("6 of 8");
        for k in 0..6 {
            *p.addr(i + k) = u64::from(k) * 100;
        }
        p.submit(6);
        assert_eq!(*m.prod, 6);
        assert_eq!(p.reserve(3), None, "2 slots free, 3 asked");
        let mut c = ring(&mut m, false);
        assert_eq!(c.ready(), 6);
        let (j, n) = c.peek(4);
        assert_eq!((j, n), (0, 4));
        assert_eq!(*c.addr(j + 3), 300);
        c.release(n);
        assert_eq!(*m.cons, 4);
        assert_eq!(p.reserve(6), Some(6), "the consumer's release makes room, indexes wrap by mask");
        assert_eq!(p.outstanding(), 2, "6 produced, 4 consumed (the reservation is not submitted)");
        *m.flags = XDP_RING_NEED_WAKEUP;
        assert!(p.needs_wakeup());
    }
}
