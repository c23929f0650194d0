//! The stats segment: a shared-memory file (mode 0600) per forwarder process through which
//! other processes (collector, TUI, tests) read its counters and steer it.
//!
//! Layout (version [`VERSION`]; all offsets in the header, all blocks 64-byte aligned):
//!
//! ```text
//! 0       Header: magic "FWDSCOPE", version, sizes and offsets, pid, start time, TSC Hz, state
//! ctrl    Control block: generation, prefetch depth, cache mode, flush and stop requests
//! names   Counter names, 32 bytes each, NUL-padded (readers need no compiled-in list)
//! config  The forwarder's configuration as JSON
//! workers One block per worker: a sequence word, then one u64 per counter
//! ```
//!
//! Each worker block has a single writer (its worker) using a sequence lock as VPP's stats
//! segment does: the sequence is odd while the block is being written; a reader retries
//! until it reads the same even sequence before and after copying, so it never sees a
//! torn snapshot. The control block is written by controllers and polled by every worker
//! each time it publishes its counters (every 16 bursts, or 1024 empty polls); a
//! controller bumps `generation` after changing a field.
//!
//! A segment owned by another user is not mapped: its owner could truncate the file under
//! the mapping, and the next read of it would kill the reader with SIGBUS (a root `top`,
//! `stat` or metrics exporter watching a user's forwarder). Such a segment is read into a
//! private copy at open and its worker blocks and state word are read again with `pread`
//! on every read (the same sequence lock, over three reads); settings written to it go to
//! the file with `pwrite`. A segment that shrank under a reader reads as exited, with the
//! counters last read.

use crate::counters::{Ctr, COUNTER_NAMES, N_COUNTERS};
use crate::{Error, Result};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// The most of another user's segment a reader copies (see the module docs): 1024 workers
/// of the current counters take well under 1 MiB.
const MAX_FOREIGN_BYTES: usize = 16 << 20;
/// Layout version; readers refuse any other.
pub const VERSION: u32 = 3;
const MAGIC: [u8; 8] = *b"FWDSCOPE";
const NAME_LEN: usize = 32;
const HEADER_SIZE: usize = 256;
const CONTROL_SIZE: usize = 128;

#[repr(C)]
struct Header {
    magic: [u8; 8],
    version: u32,
    header_size: u32,
    n_workers: u32,
    n_counters: u32,
    block_size: u32,
    control_off: u32,
    names_off: u32,
    config_off: u32,
    config_len: u32,
    workers_off: u32,
    pid: u32,
    _pad: u32,
    start_unix_ns: u64,
    tsc_hz: u64,
    /// 0 initializing, 1 running, 2 exited.
    state: AtomicU32,
}

/// Forwarder state as published in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Initializing,
    Running,
    Exited,
}

/// Largest calibration cost per packet a worker applies, ns (100 us).
pub const MAX_SPIN_NS: u32 = 100_000;

/// The control block.
#[repr(C)]
pub struct Control {
    /// Bumped by a controller after it changes any field below.
    pub generation: AtomicU64,
    /// Requested prefetch depth ([`crate::Prefetch`]; a reader clamps what it finds).
    pub prefetch: AtomicU32,
    /// Requested cache mode (see [`crate::CacheMode::code`]).
    pub cache_mode: AtomicU32,
    /// Incremented to request a route-cache flush.
    pub flush: AtomicU64,
    /// Non-zero asks the forwarder to stop.
    pub stop: AtomicU32,
    /// Non-zero turns per-stage TSC clocks on.
    pub stage_clock: AtomicU32,
    /// The calibration stage's cost per forwarded packet, ns (0: off; workers clamp it to
    /// [`MAX_SPIN_NS`]).
    pub spin_ns: AtomicU32,
    pub _pad: AtomicU32,
    /// What the controller calls the setting in force (copied into each worker's
    /// `setting` counter once applied).
    pub setting: AtomicU64,
    /// Route-cache GC tunables in force (the forwarder writes its start values; workers
    /// clamp what a controller writes to the bounds of [`GcTunables::clamped`]).
    pub gc_thresh: AtomicU32,
    pub gc_elasticity: AtomicU32,
    pub gc_min_interval_ms: AtomicU32,
    pub gc_timeout_s: AtomicU32,
}

/// The route-cache GC tunables a controller can change while the forwarder runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcTunables {
    /// GC runs past this many entries (kept below the cache's max_size).
    pub thresh: u32,
    /// GC's target average chain length, and the chain length beyond which an insert
    /// evicts (1..=1024).
    pub elasticity: u32,
    /// Minimum time between GC runs below max_size, ms (at most one hour).
    pub min_interval_ms: u32,
    /// Idle time after which an entry expires, s (at most one day).
    pub timeout_s: u32,
}

impl GcTunables {
    /// Within the bounds the forwarder accepts at start: `thresh` below `max_size`.
    pub fn clamped(self, max_size: u32) -> GcTunables {
        GcTunables {
            thresh: self.thresh.min(max_size.saturating_sub(1)),
            elasticity: self.elasticity.clamp(1, 1024),
            min_interval_ms: self.min_interval_ms.min(3_600_000),
            timeout_s: self.timeout_s.min(86_400),
        }
    }
}

impl Control {
    /// The GC tunables in force.
    pub fn gc(&self) -> GcTunables {
        GcTunables {
            thresh: self.gc_thresh.load(Ordering::Relaxed),
            elasticity: self.gc_elasticity.load(Ordering::Relaxed),
            min_interval_ms: self.gc_min_interval_ms.load(Ordering::Relaxed),
            timeout_s: self.gc_timeout_s.load(Ordering::Relaxed),
        }
    }

    /// Write GC tunables (no generation bump: [`Segment::apply`] bumps once for all).
    pub fn store_gc(&self, g: GcTunables) {
        self.gc_thresh.store(g.thresh, Ordering::Relaxed);
        self.gc_elasticity.store(g.elasticity, Ordering::Relaxed);
        self.gc_min_interval_ms.store(g.min_interval_ms, Ordering::Relaxed);
        self.gc_timeout_s.store(g.timeout_s, Ordering::Relaxed);
    }
}

const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_SIZE);

fn align64(x: usize) -> usize {
    (x + 63) & !63
}

struct Layout {
    control_off: usize,
    names_off: usize,
    config_off: usize,
    workers_off: usize,
    block_size: usize,
    total: usize,
}

fn layout(n_workers: usize, n_counters: usize, config_len: usize) -> Layout {
    let control_off = HEADER_SIZE;
    let names_off = control_off + CONTROL_SIZE;
    let config_off = align64(names_off + n_counters * NAME_LEN);
    let workers_off = align64(config_off + config_len);
    let block_size = align64(8 + n_counters * 8);
    Layout { control_off, names_off, config_off, workers_off, block_size, total: workers_off + n_workers * block_size }
}

/// Where segments live.
pub const SEGMENT_DIR: &str = "/dev/shm";

/// A fresh default segment path for forwarder process `pid`:
/// `SEGMENT_DIR/fwdscope-PID-RANDOM.stats`. The random part makes the name unpredictable, so
/// another local user cannot plant a file there ahead of a run; readers find a process's
/// segment through the process ([`Segment::find_for`]), not by its name.
pub fn default_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("{SEGMENT_DIR}/fwdscope-{pid}-{:016x}.stats", random_u64()))
}

/// 64 random bits from the kernel (getrandom), or from the clock and PID where it fails.
fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: writing at most 8 bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut libc::c_void, b.len(), 0) };
    if n == 8 {
        return u64::from_ne_bytes(b);
    }
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64);
    t.unwrap_or(0) ^ (u64::from(std::process::id()) << 40)
}

/// The files in [`SEGMENT_DIR`] named as default segments of process `pid`
/// (`fwdscope-PID-*.stats`): what a forwarder of that PID may have left behind.
pub fn named_for(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("fwdscope-{pid}-");
    let Ok(rd) = std::fs::read_dir(SEGMENT_DIR) else { return Vec::new() };
    rd.flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".stats")))
        .map(|e| e.path())
        .collect()
}

/// Whether process `pid` runs: it exists and is not a zombie (a dead process its parent
/// has not reaped, or an orphan whose init does not reap, holds no segment open).
pub fn process_runs(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // pid (comm) state ...: the comm may hold spaces and parentheses, so split after the last ')'.
    matches!(stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()), Some(s) if s != "Z" && s != "X")
}

/// The files process `pid` has mapped that may be its stats segment (read from
/// /proc/PID/maps): those ending in `.stats` or lying in [`SEGMENT_DIR`].
fn mapped_segment_paths(pid: u32) -> Vec<PathBuf> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return Vec::new() };
    let mut out: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode PATH: the first '/' starts the path.
        let Some(at) = line.find('/') else { continue };
        let path = &line[at..];
        if path.ends_with(" (deleted)") {
            continue;
        }
        if path.ends_with(".stats") || path.starts_with(&format!("{SEGMENT_DIR}/")) {
            let p = PathBuf::from(path);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Remove the `fwdscope-*.stats` segments in `dir` that this user owns and whose forwarder
/// is gone (left by a run that was killed, or aborted, before it could remove its own).
/// Returns how many were removed. Files of other users, symlinks and files that are not
/// segments are left alone.
pub fn remove_stale(dir: &Path) -> usize {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for e in rd.flatten() {
        let named = e.file_name().to_str().is_some_and(|n| n.starts_with("fwdscope-") && n.ends_with(".stats"));
        let Ok(md) = std::fs::symlink_metadata(e.path()) else { continue };
        if !named || !md.file_type().is_file() || md.uid() != me {
            continue;
        }
        let Ok(seg) = Segment::open(&e.path()) else { continue };
        if !process_runs(seg.pid()) && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A mapped segment (writer or reader side).
pub struct Segment {
    /// The shared mapping; for a segment of another user, a private copy (see `foreign`).
    map: memmap2::MmapMut,
    /// Another user's segment: the file read with `pread` into `map` and written with
    /// `pwrite` (see the module docs).
    foreign: Option<Foreign>,
    path: PathBuf,
    n_workers: usize,
    n_counters: usize,
    block_size: usize,
    workers_off: usize,
    control_off: usize,
    /// Where the counter names and the configuration text lie, checked at open.
    names_off: usize,
    config_off: usize,
    config_len: usize,
    remove_on_drop: bool,
}

/// Another user's segment, read and written through its file.
struct Foreign {
    file: File,
    /// Set once a read came up short: the file shrank under the reader.
    gone: std::sync::atomic::AtomicBool,
}

impl Foreign {
    /// `buf.len()` bytes at `off`, or None (and `gone` set) when the file no longer has them.
    fn read(&self, off: usize, buf: &mut [u8]) -> Option<()> {
        match self.file.read_exact_at(buf, off as u64) {
            Ok(()) => Some(()),
            Err(_) => {
                self.gone.store(true, Ordering::Relaxed);
                None
            }
        }
    }
    fn read_u64(&self, off: usize) -> Option<u64> {
        let mut b = [0u8; 8];
        self.read(off, &mut b)?;
        Some(u64::from_ne_bytes(b))
    }
}

// SAFETY: all shared fields are accessed through atomics.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

/// Another user's segment at `path` (`f`, `len` bytes), read into a private copy: only
/// what its header lays out (checked again by [`check_header`]), never a file's whole
/// length: another user's file may be a sparse terabyte.
fn copy_foreign(f: &File, path: &Path, len: usize) -> Result<memmap2::MmapMut> {
    let mut head = memmap2::MmapMut::map_anon(HEADER_SIZE).map_err(|e| Error::io(path, e))?;
    f.read_exact_at(&mut head, 0).map_err(|e| Error::io(path, e))?;
    // SAFETY: a page-aligned copy of HEADER_SIZE bytes; Header is plain data plus an atomic.
    let h = unsafe { &*(head.as_ptr() as *const Header) };
    let total = layout(h.n_workers as usize, h.n_counters as usize, h.config_len as usize).total;
    if total > len || total > MAX_FOREIGN_BYTES {
        return Err(Error::Segment {
            path: path.into(),
            msg: format!(
                "its header lays out {total} bytes in a file of {len} (another user's segment is copied, at most \
                 {MAX_FOREIGN_BYTES} bytes)"
            ),
        });
    }
    let mut copy = memmap2::MmapMut::map_anon(total.max(HEADER_SIZE + CONTROL_SIZE)).map_err(|e| Error::io(path, e))?;
    f.read_exact_at(&mut copy, 0).map_err(|e| Error::io(path, e))?;
    Ok(copy)
}

/// Check the header at the start of `map` (a file of `len` bytes at `path`): magic,
/// version, header size, and every offset against the sizes it gives. Returns the layout.
/// `map` holds at least a header and a control block.
fn check_header(map: &[u8], path: &Path, len: usize) -> Result<Layout> {
    let bad = |msg: String| Error::Segment { path: path.into(), msg };
    // SAFETY: the caller checked the length; Header is plain data plus an atomic.
    let h = unsafe { &*(map.as_ptr() as *const Header) };
    if h.magic != MAGIC {
        return Err(bad("bad magic: not a fwdscope stats segment".into()));
    }
    if h.version != VERSION {
        return Err(bad(format!("layout version {}, this reader understands {VERSION}", h.version)));
    }
    if h.header_size as usize != HEADER_SIZE {
        return Err(bad(format!("header size {}, this reader expects {HEADER_SIZE}", h.header_size)));
    }
    let lay = layout(h.n_workers as usize, h.n_counters as usize, h.config_len as usize);
    if lay.total > len
        || lay.workers_off != h.workers_off as usize
        || lay.block_size != h.block_size as usize
        || lay.config_off != h.config_off as usize
        || lay.names_off != h.names_off as usize
        || lay.control_off != h.control_off as usize
    {
        return Err(bad(format!(
            "header offsets do not match its sizes ({} workers, {} counters)",
            h.n_workers, h.n_counters
        )));
    }
    Ok(lay)
}

impl Segment {
    /// Create the segment file (mode 0600) for `n_workers` workers. A file already there is
    /// replaced only when it is stale: left by a forwarder that was killed (its owner is not
    /// running, or the owner recorded is this very process, whose PID was reused); a segment
    /// of a running forwarder is an error.
    pub fn create(path: &Path, n_workers: usize, config_json: &str, tsc_hz: u64) -> Result<Segment> {
        let lay = layout(n_workers, N_COUNTERS, config_json.len());
        let open_new = || OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path);
        let f = match open_new() {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let owner = Segment::open(path).ok().map(|s| s.header().pid);
                match owner {
                    Some(pid) if pid != std::process::id() && process_runs(pid) => {
                        return Err(Error::Segment {
                            path: path.into(),
                            msg: format!("in use by the running forwarder {pid}"),
                        });
                    }
                    None => {
                        return Err(Error::Segment {
                            path: path.into(),
                            msg: "exists and is not a fwdscope stats segment; not replacing it".into(),
                        });
                    }
                    // Stale: its owner is gone, or it names this process (a reused PID).
                    Some(_) => {
                        std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
                        open_new().map_err(|e| Error::io(path, e))?
                    }
                }
            }
            r => r.map_err(|e| Error::io(path, e))?,
        };
        f.set_len(lay.total as u64).map_err(|e| Error::io(path, e))?;
        // SAFETY: we created the file and size it; other processes only read it or use atomics.
        let mut map = unsafe { memmap2::MmapMut::map_mut(&f) }.map_err(|e| Error::io(path, e))?;
        for (i, n) in COUNTER_NAMES.iter().enumerate() {
            let at = lay.names_off + i * NAME_LEN;
            map[at..at + n.len()].copy_from_slice(n.as_bytes());
        }
        map[lay.config_off..lay.config_off + config_json.len()].copy_from_slice(config_json.as_bytes());
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let h = Header {
            magic: MAGIC,
            version: VERSION,
            header_size: HEADER_SIZE as u32,
            n_workers: n_workers as u32,
            n_counters: N_COUNTERS as u32,
            block_size: lay.block_size as u32,
            control_off: lay.control_off as u32,
            names_off: lay.names_off as u32,
            config_off: lay.config_off as u32,
            config_len: config_json.len() as u32,
            workers_off: lay.workers_off as u32,
            pid: std::process::id(),
            _pad: 0,
            start_unix_ns: start,
            tsc_hz,
            state: AtomicU32::new(0),
        };
        // SAFETY: the mapping is page aligned and larger than Header.
        unsafe { std::ptr::write(map.as_mut_ptr() as *mut Header, h) };
        Ok(Segment {
            map,
            foreign: None,
            path: path.to_path_buf(),
            n_workers,
            n_counters: N_COUNTERS,
            block_size: lay.block_size,
            workers_off: lay.workers_off,
            control_off: lay.control_off,
            names_off: lay.names_off,
            config_off: lay.config_off,
            config_len: config_json.len(),
            remove_on_drop: true,
        })
    }

    /// Open an existing segment, checking magic, version and every size against the file.
    /// One of another user is read into a private copy instead of mapped (module docs).
    pub fn open(path: &Path) -> Result<Segment> {
        let bad = |msg: String| Error::Segment { path: path.into(), msg };
        // O_NONBLOCK: a FIFO at the path must not hang the open; it is refused below.
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let md = f.metadata().map_err(|e| Error::io(path, e))?;
        if !md.file_type().is_file() {
            return Err(bad("not a regular file".into()));
        }
        let len = md.len() as usize;
        if len < HEADER_SIZE + CONTROL_SIZE {
            return Err(bad(format!("file is {len} bytes, smaller than a header")));
        }
        // SAFETY: geteuid cannot fail.
        let foreign = md.uid() != unsafe { libc::geteuid() };
        let (map, foreign) = if foreign {
            let copy = copy_foreign(&f, path, len)?;
            (copy, Some(Foreign { file: f, gone: std::sync::atomic::AtomicBool::new(false) }))
        } else {
            // SAFETY: shared mapping of a file of this user's, which the forwarder writes
            // only through atomics.
            (unsafe { memmap2::MmapMut::map_mut(&f) }.map_err(|e| Error::io(path, e))?, None)
        };
        let lay = check_header(&map, path, len)?;
        // SAFETY: length checked above; Header is plain data plus an atomic.
        let h = unsafe { &*(map.as_ptr() as *const Header) };
        Ok(Segment {
            n_workers: h.n_workers as usize,
            n_counters: h.n_counters as usize,
            block_size: lay.block_size,
            workers_off: lay.workers_off,
            control_off: lay.control_off,
            names_off: lay.names_off,
            config_off: lay.config_off,
            config_len: h.config_len as usize,
            map,
            foreign,
            path: path.to_path_buf(),
            remove_on_drop: false,
        })
    }

    /// The segment of the running forwarder `pid`, once it has started, found through the
    /// process: among the files it has mapped (/proc/PID/maps), the one that is a segment
    /// naming `pid` as its owner. A file someone else left at a predictable name is never
    /// taken for it, and neither is a segment of an earlier, killed process of the same PID
    /// (not mapped by this one). None until the forwarder has mapped it and left
    /// `Initializing`. A forwarder started with `--stats PATH` is found when PATH ends in
    /// `.stats` or lies in [`SEGMENT_DIR`].
    pub fn find_for(pid: u32) -> Option<Segment> {
        let ours = |s: &Segment| s.pid() == pid && s.state() != State::Initializing;
        mapped_segment_paths(pid).into_iter().find_map(|p| Segment::open(&p).ok().filter(ours))
    }

    fn header(&self) -> &Header {
        // SAFETY: checked at create/open.
        unsafe { &*(self.map.as_ptr() as *const Header) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn n_workers(&self) -> usize {
        self.n_workers
    }
    pub fn pid(&self) -> u32 {
        self.header().pid
    }
    pub fn tsc_hz(&self) -> u64 {
        self.header().tsc_hz
    }
    pub fn start_unix_ns(&self) -> u64 {
        self.header().start_unix_ns
    }
    /// Keep the file when this handle drops (the creator removes it by default).
    pub fn keep_file(&mut self) {
        self.remove_on_drop = false;
    }

    pub fn state(&self) -> State {
        if let Some(f) = &self.foreign {
            let mut b = [0u8; 4];
            match f.read(std::mem::offset_of!(Header, state), &mut b) {
                Some(()) => self.header().state.store(u32::from_ne_bytes(b), Ordering::Relaxed),
                None => return State::Exited,
            }
        }
        match self.header().state.load(Ordering::Acquire) {
            0 => State::Initializing,
            1 => State::Running,
            _ => State::Exited,
        }
    }
    pub fn set_state(&self, s: State) {
        let v = match s {
            State::Initializing => 0,
            State::Running => 1,
            State::Exited => 2,
        };
        self.header().state.store(v, Ordering::Release);
    }

    /// Counter names as published in the segment (at the offsets checked when it was
    /// opened: the header is not read again, so a writer that changes it later moves
    /// nothing out of the mapping).
    pub fn counter_names(&self) -> Vec<String> {
        (0..self.n_counters)
            .map(|i| {
                let at = self.names_off + i * NAME_LEN;
                let raw = self.map.get(at..at + NAME_LEN).unwrap_or(&[]);
                let end = raw.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
                String::from_utf8_lossy(&raw[..end]).into_owned()
            })
            .collect()
    }

    /// The forwarder's configuration JSON.
    pub fn config_json(&self) -> String {
        let raw = self.map.get(self.config_off..self.config_off + self.config_len).unwrap_or(&[]);
        String::from_utf8_lossy(raw).into_owned()
    }

    /// The control block. For another user's segment, the private copy: the values read at
    /// open and this process's own changes since (the setters write them to the file).
    pub fn control(&self) -> &Control {
        // SAFETY: control_off is 64-aligned inside the mapping; Control is all atomics.
        unsafe { &*(self.map.as_ptr().add(self.control_off) as *const Control) }
    }

    fn block(&self, w: usize) -> (&AtomicU64, &[AtomicU64]) {
        assert!(w < self.n_workers, "worker index out of range");
        let base = self.workers_off + w * self.block_size;
        // SAFETY: the block lies inside the mapping (checked layout), 64-aligned, all u64s.
        unsafe {
            let seq = &*(self.map.as_ptr().add(base) as *const AtomicU64);
            let ctrs = std::slice::from_raw_parts(self.map.as_ptr().add(base + 8) as *const AtomicU64, self.n_counters);
            (seq, ctrs)
        }
    }

    /// Publish a worker's counters (single writer per block).
    #[inline]
    pub fn publish(&self, w: usize, values: &[u64]) {
        let (seq, ctrs) = self.block(w);
        let s = seq.load(Ordering::Relaxed);
        seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (c, v) in ctrs.iter().zip(values) {
            c.store(*v, Ordering::Relaxed);
        }
        seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// A consistent copy of worker `w`'s counters.
    /// A segment of another user that shrank under the reader gives the counters last read.
    pub fn read_worker(&self, w: usize) -> Vec<u64> {
        loop {
            if let Some(v) = self.read_worker_within(w, std::time::Duration::from_secs(1)) {
                return v;
            }
            if self.foreign.as_ref().is_some_and(|f| f.gone.load(Ordering::Relaxed)) {
                return self.block(w).1.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            }
        }
    }

    /// A consistent copy of worker `w`'s counters, or None when the block stayed
    /// mid-write for `patience`: its writer was stopped or killed while publishing (a
    /// reader in another process must not spin forever on it).
    pub fn read_worker_within(&self, w: usize, patience: std::time::Duration) -> Option<Vec<u64>> {
        if let Some(f) = &self.foreign {
            return self.read_foreign_worker(f, w, patience);
        }
        let (seq, ctrs) = self.block(w);
        let mut out = vec![0u64; self.n_counters];
        let mut deadline = None;
        loop {
            let s1 = seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                let now = std::time::Instant::now();
                let until = *deadline.get_or_insert(now + patience);
                if now >= until {
                    return None;
                }
                std::hint::spin_loop();
                continue;
            }
            for (o, c) in out.iter_mut().zip(ctrs) {
                *o = c.load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s1 {
                return Some(out);
            }
        }
    }

    /// [`Segment::read_worker_within`] through the file of another user's segment: the
    /// sequence word, the counters and the sequence word again, each with its own `pread`
    /// (one returns before the next starts, so the sequence lock holds as it does over
    /// the mapping). What it reads is kept in the private copy, for a read after the file
    /// shrank.
    fn read_foreign_worker(&self, f: &Foreign, w: usize, patience: std::time::Duration) -> Option<Vec<u64>> {
        let base = self.workers_off + w * self.block_size;
        let mut raw = vec![0u8; self.n_counters * 8];
        let mut deadline = None;
        loop {
            let s1 = f.read_u64(base)?;
            if s1 & 1 == 1 {
                let now = std::time::Instant::now();
                if now >= *deadline.get_or_insert(now + patience) {
                    return None;
                }
                std::hint::spin_loop();
                continue;
            }
            f.read(base + 8, &mut raw)?;
            if f.read_u64(base)? == s1 {
                let out: Vec<u64> =
                    raw.chunks_exact(8).map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8]))).collect();
                let (_, ctrs) = self.block(w);
                for (c, v) in ctrs.iter().zip(&out) {
                    c.store(*v, Ordering::Relaxed);
                }
                return Some(out);
            }
        }
    }

    /// A segment of another user: write the control block (changed in the private copy)
    /// to its file. Settings are the controller's to write; the forwarder only reads them
    /// (but for the GC tunables' start values, written before it runs).
    fn write_control(&self) {
        if let Some(f) = &self.foreign {
            // A file that shrank is not written (a write past its end would grow it again).
            let end = (self.control_off + CONTROL_SIZE) as u64;
            if f.gone.load(Ordering::Relaxed) || f.file.metadata().map_or(true, |m| m.len() < end) {
                f.gone.store(true, Ordering::Relaxed);
                return;
            }
            // SAFETY: the control block lies inside the copy (checked layout); a byte view of
            // atomics this thread just stored to.
            let bytes = unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(self.control_off), CONTROL_SIZE) };
            if f.file.write_all_at(bytes, self.control_off as u64).is_err() {
                f.gone.store(true, Ordering::Relaxed);
            }
        }
    }

    /// A snapshot of every worker.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            at: std::time::Instant::now(),
            names: None,
            workers: (0..self.n_workers).map(|w| self.read_worker(w)).collect(),
        }
    }

    /// A snapshot of every worker, or None when a worker's block stayed mid-write for
    /// `patience` (see [`Segment::read_worker_within`]).
    pub fn snapshot_within(&self, patience: std::time::Duration) -> Option<Snapshot> {
        let workers = (0..self.n_workers).map(|w| self.read_worker_within(w, patience)).collect::<Option<Vec<_>>>()?;
        Some(Snapshot { at: std::time::Instant::now(), names: None, workers })
    }

    /// Ask for a prefetch depth change.
    pub fn set_prefetch(&self, depth: crate::Prefetch) {
        self.control().prefetch.store(u32::from(depth), Ordering::Relaxed);
        self.bump();
    }
    /// Ask for a cache-mode change.
    pub fn set_cache_mode(&self, code: u32) {
        self.control().cache_mode.store(code, Ordering::Relaxed);
        self.bump();
    }
    /// Ask for a route-cache flush.
    pub fn request_flush(&self) {
        self.control().flush.fetch_add(1, Ordering::Relaxed);
        self.bump();
    }
    /// Set the calibration cost per packet (ns; 0 turns it off).
    pub fn set_spin_ns(&self, ns: u32) {
        self.control().spin_ns.store(ns, Ordering::Relaxed);
        self.bump();
    }
    /// Turn the stage clocks on or off.
    pub fn set_stage_clock(&self, on: bool) {
        self.control().stage_clock.store(u32::from(on), Ordering::Relaxed);
        self.bump();
    }
    /// Change several settings at once, tagged `setting` (copied into each worker's
    /// `setting` counter when applied), with a single generation bump so every worker
    /// switches them together at one burst boundary. Returns the new generation: a worker
    /// whose `ctrl_generation` counter reads it (or more) runs the new settings.
    pub fn apply(&self, req: &Request) -> u64 {
        let c = self.control();
        if let Some(p) = req.prefetch {
            c.prefetch.store(u32::from(p), Ordering::Relaxed);
        }
        if let Some(m) = req.cache_mode {
            c.cache_mode.store(m, Ordering::Relaxed);
        }
        if let Some(ns) = req.spin_ns {
            c.spin_ns.store(ns, Ordering::Relaxed);
        }
        if let Some(g) = req.gc {
            c.store_gc(g);
        }
        if req.flush {
            c.flush.fetch_add(1, Ordering::Relaxed);
        }
        c.setting.store(req.setting, Ordering::Relaxed);
        self.bump()
    }

    /// After a controller changed control fields: bump the generation (and, for another
    /// user's segment, write the block to its file). Returns the new generation.
    fn bump(&self) -> u64 {
        let generation = self.control().generation.fetch_add(1, Ordering::Release) + 1;
        self.write_control();
        generation
    }
    /// Ask the forwarder to stop.
    pub fn request_stop(&self) {
        self.control().stop.store(1, Ordering::Relaxed);
        self.bump();
    }
}

/// Settings changed together through [`Segment::apply`] (`None`: left as they are).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    pub prefetch: Option<crate::Prefetch>,
    pub cache_mode: Option<u32>,
    pub spin_ns: Option<u32>,
    /// Route-cache GC tunables.
    pub gc: Option<GcTunables>,
    /// Flush the route cache as well.
    pub flush: bool,
    /// The controller's tag for the setting in force.
    pub setting: u64,
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.remove_on_drop {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Counters of every worker at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: std::time::Instant,
    pub names: Option<Vec<String>>,
    pub workers: Vec<Vec<u64>>,
}

impl Snapshot {
    /// Sum of counter `c` over workers.
    pub fn total(&self, c: Ctr) -> u64 {
        self.workers.iter().map(|w| w.get(c as usize).copied().unwrap_or(0)).sum()
    }
    /// Counter `c` of worker `w`.
    pub fn get(&self, w: usize, c: Ctr) -> u64 {
        self.workers.get(w).and_then(|v| v.get(c as usize)).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment left by a killed forwarder (never removed) under this process's PID is
    /// replaced; one of a live other process, or a file that is no segment, is refused.
    #[test]
    fn stale_segments_are_replaced_live_ones_refused() {
        let path = std::env::temp_dir().join(format!("fwdscope-stale-{}.stats", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut leaked = Segment::create(&path, 1, "{}", 0).unwrap();
        leaked.remove_on_drop = false; // as if SIGKILLed: the file stays
        drop(leaked);
        let again = Segment::create(&path, 2, "{}", 0).unwrap();
        assert_eq!(Segment::open(&path).unwrap().n_workers, 2);
        drop(again);
        assert!(!path.exists());
        // A live owner: PID 1 (init) is always running.
        let mut s = Segment::create(&path, 1, "{}", 0).unwrap();
        s.remove_on_drop = false;
        // SAFETY: test-only rewrite of the owner field in our own mapping.
        unsafe { (*(s.map.as_mut_ptr() as *mut Header)).pid = 1 };
        s.map.flush().unwrap();
        drop(s);
        let e = Segment::create(&path, 1, "{}", 0).err().expect("refused").to_string();
        assert!(e.contains("in use by the running forwarder 1"), "{e}");
        std::fs::write(&path, b"not a segment").unwrap();
        let e = Segment::create(&path, 1, "{}", 0).err().expect("refused").to_string();
        assert!(e.contains("not a fwdscope stats segment"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    /// A header whose names offset points outside the file (a byte-flip fuzz case made
    /// `metrics --segment` panic) is refused at open; one rewritten after the open moves
    /// nothing the reader looks at.
    #[test]
    fn a_names_offset_outside_the_layout_is_refused_and_later_changes_ignored() {
        let path = std::env::temp_dir().join(format!("fwdscope-namesoff-{}.stats", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut s = Segment::create(&path, 1, "{\"a\":1}", 0).unwrap();
        s.remove_on_drop = false;
        let names = s.counter_names();
        // SAFETY: test-only rewrite of a header field in our own mapping.
        unsafe { (*(s.map.as_mut_ptr() as *mut Header)).names_off = 0x7fff_ffff };
        s.map.flush().unwrap();
        let e = Segment::open(&path).err().expect("refused").to_string();
        assert!(e.contains("header offsets do not match"), "{e}");
        // Opened before the change: the offsets checked then are the ones used.
        unsafe { (*(s.map.as_mut_ptr() as *mut Header)).names_off = 0 };
        let opened_names = {
            let mut fresh = Segment::create(&path.with_extension("b.stats"), 1, "{\"a\":1}", 0).unwrap();
            // SAFETY: as above, after the open.
            unsafe { (*(fresh.map.as_mut_ptr() as *mut Header)).names_off = 0x7fff_ffff };
            unsafe { (*(fresh.map.as_mut_ptr() as *mut Header)).config_len = u32::MAX };
            (fresh.counter_names(), fresh.config_json())
        };
        assert_eq!(opened_names, (names, "{\"a\":1}".to_string()));
        drop(s);
        std::fs::remove_file(&path).unwrap();
    }

    /// A header whose declared size is not this layout's is refused (it was not checked).
    #[test]
    fn a_header_of_another_size_is_refused() {
        let path = std::env::temp_dir().join(format!("fwdscope-hdrsize-{}.stats", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut s = Segment::create(&path, 1, "{}", 0).unwrap();
        s.remove_on_drop = false;
        assert!(Segment::open(&path).is_ok());
        // SAFETY: test-only rewrite of a header field in our own mapping.
        unsafe { (*(s.map.as_mut_ptr() as *mut Header)).header_size = 4096 };
        s.map.flush().unwrap();
        let e = Segment::open(&path).err().expect("refused").to_string();
        assert!(e.contains("header size 4096, this reader expects 256"), "{e}");
        drop(s);
        std::fs::remove_file(&path).unwrap();
    }

    /// A block left mid-write (its writer stopped or killed while publishing) makes a
    /// patient read give up instead of spinning forever; once it is whole it reads again.
    #[test]
    fn a_block_left_mid_write_is_given_up_on() {
        let path = std::env::temp_dir().join(format!("fwdscope-midwrite-{}.stats", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let seg = Segment::create(&path, 2, "{}", 0).unwrap();
        let mut v = vec![0u64; N_COUNTERS];
        v[Ctr::TxPackets as usize] = 42;
        seg.publish(1, &v);
        let (seq, _) = seg.block(1);
        let even = seq.load(Ordering::Relaxed);
        seq.store(even + 1, Ordering::Release);
        let t = std::time::Instant::now();
        assert!(seg.read_worker_within(1, std::time::Duration::from_millis(20)).is_none());
        assert!(t.elapsed() >= std::time::Duration::from_millis(20));
        assert!(seg.snapshot_within(std::time::Duration::from_millis(5)).is_none());
        assert!(seg.read_worker_within(0, std::time::Duration::from_millis(5)).is_some());
        seq.store(even + 2, Ordering::Release);
        let snap = seg.snapshot_within(std::time::Duration::from_millis(5)).expect("whole again");
        assert_eq!(snap.get(1, Ctr::TxPackets), 42);
    }

    /// A symlink planted at a segment's path is never followed into writing its target,
    /// and default names differ on every call (nothing to plant ahead of a run).
    #[test]
    fn a_planted_symlink_is_refused_and_default_names_are_unpredictable() {
        let dir = std::env::temp_dir().join(format!("fwdscope-plant-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let path = dir.join("seg.stats");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let e = Segment::create(&path, 1, "{}", 0).err().expect("refused").to_string();
        assert!(e.contains("not a fwdscope stats segment"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
        // remove_stale leaves symlinks and others' files alone, too.
        std::fs::rename(&path, dir.join("fwdscope-1-x.stats")).unwrap();
        assert_eq!(remove_stale(&dir), 0);
        assert_ne!(default_path(7), default_path(7));
        assert!(default_path(7).display().to_string().starts_with("/dev/shm/fwdscope-7-"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Whether this test may give a file to another user (chown); says why not.
    fn root() -> bool {
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if !root {
            println!("SKIP: giving a segment to another user needs root");
        }
        root
    }

    /// Another user's segment is read through its file, never mapped: counters and state
    /// follow the writer, a setting written reaches the writer's control block, and when
    /// the owner truncates the file the reader sees an exited forwarder with the counters
    /// it last read, where a mapping would have died of SIGBUS. Needs root (chown).
    #[test]
    fn another_users_segment_is_read_through_its_file_and_survives_truncation() {
        if !root() {
            return;
        }
        let path = std::env::temp_dir().join(format!("fwdscope-foreign-{}.stats", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let writer = Segment::create(&path, 2, "{}", 0).unwrap();
        writer.set_state(State::Running);
        let mut v = vec![0u64; N_COUNTERS];
        v[Ctr::TxPackets as usize] = 7;
        writer.publish(1, &v);
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        let reader = Segment::open(&path).unwrap();
        assert!(reader.foreign.is_some(), "another user's segment was mapped");
        assert_eq!((reader.state(), reader.snapshot().get(1, Ctr::TxPackets)), (State::Running, 7));
        v[Ctr::TxPackets as usize] = 9;
        writer.publish(1, &v);
        assert_eq!(reader.snapshot().get(1, Ctr::TxPackets), 9, "a later publish is read from the file");
        // A block left mid-write is given up on through the file too.
        let (seq, _) = writer.block(0);
        let even = seq.load(Ordering::Relaxed);
        seq.store(even + 1, Ordering::Release);
        assert!(reader.read_worker_within(0, std::time::Duration::from_millis(5)).is_none());
        seq.store(even, Ordering::Release);
        let g = writer.control().generation.load(Ordering::Relaxed);
        reader.set_prefetch(crate::Prefetch::clamped(5));
        assert_eq!(writer.control().prefetch.load(Ordering::Relaxed), 5, "the setting reached the file");
        assert_eq!(writer.control().generation.load(Ordering::Relaxed), g + 1);
        // The owner truncates it. (The writer's own mapping is not touched again.)
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
        assert_eq!(reader.state(), State::Exited);
        assert!(reader.read_worker_within(1, std::time::Duration::from_millis(5)).is_none());
        assert_eq!(reader.snapshot().get(1, Ctr::TxPackets), 9, "the counters last read");
        reader.set_spin_ns(10); // no SIGBUS, and the file is not grown again
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        drop(reader);
        drop(writer);
        assert!(!path.exists());
    }

    /// Another user's file whose header lays out more than the copy limit is refused,
    /// not read whole (a sparse file of any length costs the reader nothing).
    #[test]
    fn another_users_oversized_segment_is_refused_not_copied() {
        if !root() {
            return;
        }
        let path = std::env::temp_dir().join(format!("fwdscope-huge-{}.stats", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut s = Segment::create(&path, 1, "{}", 0).unwrap();
        s.remove_on_drop = false;
        // SAFETY: test-only rewrite of a header field in our own mapping.
        unsafe { (*(s.map.as_mut_ptr() as *mut Header)).n_workers = 1 << 20 };
        drop(s);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(1 << 40).unwrap();
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        let e = Segment::open(&path).err().expect("refused").to_string();
        assert!(e.contains("is copied, at most 16777216 bytes"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    /// A FIFO at a segment's path is refused at open, not waited on.
    #[test]
    fn a_fifo_is_not_a_segment() {
        let path = std::env::temp_dir().join(format!("fwdscope-fifo-{}.stats", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = Segment::open(&path).err().expect("refused").to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }
}
