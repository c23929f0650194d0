//! fwdscope's XDP forwarder (bpf/xdp_fwd.c, compiled by the build script) seen from user
//! space: libbpf loaded at run time (`dlopen("libbpf.so.1")`, as the forwarder loads
//! libxdp), the object loaded with the verifier's refusal turned into a short message
//! ([`shorten_verifier_log`]), programs attached to an interface natively or generically
//! and detached only if they are still ours, the per-CPU counters read, and how they map
//! onto the stats segment's counters ([`COUNTERS`]).

use crate::{Error, Result};
use fwd_abi::Ctr;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

/// `xdp_flags` of an attach (linux/if_link.h).
pub const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1;
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
pub const XDP_FLAGS_REPLACE: u32 = 1 << 4;

/// The forwarding program, the XDP_PASS program for the egress veth's peer, and the maps
/// (names in bpf/xdp_fwd.c).
pub const FWD_PROGRAM: &str = "fwd_xdp_fwd";
pub const PASS_PROGRAM: &str = "fwd_xdp_pass";
pub const STATS_MAP: &str = "fwd_xdp_stats";
pub const PORTS_MAP: &str = "fwd_xdp_ports";

/// The program's counters (`enum fwd_counter` in bpf/xdp_fwd.c, in that order) and the
/// stats-segment counter each one is published as.
pub const COUNTERS: [(&str, Ctr); 13] = [
    ("rx", Ctr::RxPackets),
    ("rx_bytes", Ctr::RxBytes),
    ("forwarded", Ctr::TxPackets),
    ("forwarded_bytes", Ctr::TxBytes),
    ("runt", Ctr::DropRunt),
    ("bad_version", Ctr::DropBadVersion),
    ("bad_ihl", Ctr::DropBadIhl),
    ("not_ipv4", Ctr::DropNotIpv4),
    ("ttl_expired", Ctr::DropTtlExceeded),
    ("no_route", Ctr::DropNoRoute),
    ("no_neighbour", Ctr::DropNoNeighbour),
    ("fib_other", Ctr::DropFibOther),
    ("redirect_failed", Ctr::DropRedirectFailed),
];

/// The compiled forwarder object (bpf/xdp_fwd.c), or why this build has none.
pub fn forwarder_object() -> std::result::Result<&'static [u8], &'static str> {
    #[cfg(lab_xdp_fwd)]
    {
        Ok(include_bytes!(concat!(env!("OUT_DIR"), "/xdp_fwd.o")))
    }
    #[cfg(not(lab_xdp_fwd))]
    {
        Err(env!("LAB_XDP_FWD_WHY"))
    }
}

/// Opaque libbpf handles.
pub enum BpfObject {}
pub enum BpfProgram {}

/// `struct bpf_xdp_attach_opts` (libbpf 1.0+): the program that must be attached for a
/// replace (or a detach with `XDP_FLAGS_REPLACE`) to happen. The tail padding is a field,
/// zeroed: libbpf refuses options whose bytes past the fields it knows are not zero.
#[repr(C)]
struct AttachOpts {
    sz: usize,
    old_prog_fd: c_int,
    _pad: u32,
}

/// The libbpf entry points used (libbpf.h, bpf.h of libbpf 1.0 and later).
pub struct Libbpf {
    object_open_mem: unsafe extern "C" fn(*const c_void, usize, *const c_void) -> *mut BpfObject,
    object_load: unsafe extern "C" fn(*mut BpfObject) -> c_int,
    object_close: unsafe extern "C" fn(*mut BpfObject),
    object_next_program: unsafe extern "C" fn(*const BpfObject, *mut BpfProgram) -> *mut BpfProgram,
    object_find_program_by_name: unsafe extern "C" fn(*const BpfObject, *const c_char) -> *mut BpfProgram,
    object_find_map_fd_by_name: unsafe extern "C" fn(*const BpfObject, *const c_char) -> c_int,
    program_name: unsafe extern "C" fn(*const BpfProgram) -> *const c_char,
    program_set_log_buf: unsafe extern "C" fn(*mut BpfProgram, *mut c_char, usize) -> c_int,
    program_fd: unsafe extern "C" fn(*const BpfProgram) -> c_int,
    map_update_elem: unsafe extern "C" fn(c_int, *const c_void, *const c_void, u64) -> c_int,
    map_lookup_elem: unsafe extern "C" fn(c_int, *const c_void, *mut c_void) -> c_int,
    xdp_attach: unsafe extern "C" fn(c_int, c_int, u32, *const AttachOpts) -> c_int,
    xdp_query_id: unsafe extern "C" fn(c_int, c_int, *mut u32) -> c_int,
    num_possible_cpus: unsafe extern "C" fn() -> c_int,
    _lib: libloading::Library,
}

// SAFETY: plain function pointers into a library that stays loaded.
unsafe impl Send for Libbpf {}
unsafe impl Sync for Libbpf {}

/// libbpf, loaded once per process (its own messages on stderr silenced: failures are
/// reported here, the verifier's log among them); an error says what to install.
pub fn libbpf() -> Result<&'static Libbpf> {
    static LIB: OnceLock<std::result::Result<Libbpf, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(|e| Error::Config(e.clone()))
}

fn load() -> std::result::Result<Libbpf, String> {
    // SAFETY: loading libbpf runs its constructors, which only set defaults.
    let lib = unsafe { libloading::Library::new("libbpf.so.1") }.map_err(|e| {
        format!("--mode xdp needs libbpf 1.0 or later (Debian/Ubuntu: apt install libbpf1; Fedora: dnf install libbpf): {e}")
    })?;
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol's C signature is the one declared on the field.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("libbpf.so.1 has no {} (libbpf 1.0 or later needed): {e}", $name))?
        };
    }
    let set_print: unsafe extern "C" fn(*const c_void) -> *const c_void = sym!("libbpf_set_print");
    // SAFETY: a null print function turns libbpf's messages off.
    unsafe { set_print(std::ptr::null()) };
    Ok(Libbpf {
        object_open_mem: sym!("bpf_object__open_mem"),
        object_load: sym!("bpf_object__load"),
        object_close: sym!("bpf_object__close"),
        object_next_program: sym!("bpf_object__next_program"),
        object_find_program_by_name: sym!("bpf_object__find_program_by_name"),
        object_find_map_fd_by_name: sym!("bpf_object__find_map_fd_by_name"),
        program_name: sym!("bpf_program__name"),
        program_set_log_buf: sym!("bpf_program__set_log_buf"),
        program_fd: sym!("bpf_program__fd"),
        map_update_elem: sym!("bpf_map_update_elem"),
        map_lookup_elem: sym!("bpf_map_lookup_elem"),
        xdp_attach: sym!("bpf_xdp_attach"),
        xdp_query_id: sym!("bpf_xdp_query_id"),
        num_possible_cpus: sym!("libbpf_num_possible_cpus"),
        _lib: lib,
    })
}

/// Verifier log kept per program when a load fails (the kernel keeps the log's end).
const LOG_SIZE: usize = 256 * 1024;

/// A BPF object loaded into the kernel (its programs verified, its maps created); closed
/// (programs and maps released, unless attached) when dropped.
pub struct Object {
    lib: &'static Libbpf,
    obj: *mut BpfObject,
}

// SAFETY: the handle is only used through &self; libbpf's calls on it are system calls on
// descriptors it holds.
unsafe impl Send for Object {}
unsafe impl Sync for Object {}

impl Object {
    /// Open and load the object in `bytes` (`what` names it in errors). A program the
    /// verifier refuses is an error with the verifier's message, shortened.
    pub fn load(lib: &'static Libbpf, bytes: &[u8], what: &str) -> Result<Object> {
        // SAFETY: the bytes outlive the call (libbpf copies them); no open options.
        let obj = unsafe { (lib.object_open_mem)(bytes.as_ptr() as *const c_void, bytes.len(), std::ptr::null()) };
        if obj.is_null() {
            return Err(Error::Config(format!("opening {what}: {}", std::io::Error::last_os_error())));
        }
        let o = Object { lib, obj };
        // One log buffer per program; libbpf fills one (load retried with logging) only
        // when the kernel refuses that program.
        let mut logs: Vec<(String, Vec<u8>)> = Vec::new();
        let mut p = std::ptr::null_mut();
        loop {
            // SAFETY: a valid object; null starts the iteration.
            p = unsafe { (lib.object_next_program)(obj, p) };
            if p.is_null() {
                break;
            }
            // SAFETY: a program of the object; libbpf returns its NUL-terminated name.
            let name = unsafe { CStr::from_ptr((lib.program_name)(p)) }.to_string_lossy().into_owned();
            logs.push((name, vec![0u8; LOG_SIZE]));
            let buf = &mut logs.last_mut().expect("just pushed").1;
            // SAFETY: the buffer lives in `logs` until after the load below.
            unsafe { (lib.program_set_log_buf)(p, buf.as_mut_ptr() as *mut c_char, buf.len()) };
        }
        // SAFETY: a valid, opened object; the verifier runs here.
        let r = unsafe { (lib.object_load)(obj) };
        if r != 0 {
            let err = std::io::Error::from_raw_os_error(-r);
            // The program whose log has text is the one refused.
            let refused = logs.iter().find_map(|(name, buf)| {
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                (end > 0).then(|| (name.clone(), String::from_utf8_lossy(&buf[..end]).into_owned()))
            });
            return Err(Error::Config(match refused {
                Some((name, log)) => {
                    format!("the kernel's verifier refused {what} (program {name}): {}", shorten_verifier_log(&log))
                }
                None => format!("loading {what}: {err}"),
            }));
        }
        Ok(o)
    }

    /// The descriptor of program `name` (valid while the object is).
    pub fn program_fd(&self, name: &str) -> Result<c_int> {
        let c = CString::new(name).map_err(|_| Error::Config(format!("program name {name:?}")))?;
        // SAFETY: a valid object and a NUL-terminated name.
        let p = unsafe { (self.lib.object_find_program_by_name)(self.obj, c.as_ptr()) };
        // SAFETY: a program of the loaded object.
        let fd = if p.is_null() { -1 } else { unsafe { (self.lib.program_fd)(p) } };
        if fd < 0 {
            return Err(Error::Config(format!("the XDP object has no loaded program {name}")));
        }
        Ok(fd)
    }

    /// The descriptor of map `name`.
    pub fn map_fd(&self, name: &str) -> Result<c_int> {
        let c = CString::new(name).map_err(|_| Error::Config(format!("map name {name:?}")))?;
        // SAFETY: a valid object and a NUL-terminated name.
        let fd = unsafe { (self.lib.object_find_map_fd_by_name)(self.obj, c.as_ptr()) };
        if fd < 0 {
            return Err(Error::Config(format!("the XDP object has no map {name}")));
        }
        Ok(fd)
    }

    /// Set `key` to `value` in map `fd` (u32 keys and values).
    pub fn map_set(&self, fd: c_int, key: u32, value: u32) -> std::io::Result<()> {
        // SAFETY: key and value of the map's sizes (u32 each).
        let r = unsafe {
            (self.lib.map_update_elem)(
                fd,
                &key as *const u32 as *const c_void,
                &value as *const u32 as *const c_void,
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

impl Drop for Object {
    fn drop(&mut self) {
        // SAFETY: the object opened in `load`, closed once.
        unsafe { (self.lib.object_close)(self.obj) };
    }
}

impl Libbpf {
    /// CPUs the kernel may run on (a per-CPU map holds one value for each).
    pub fn possible_cpus(&self) -> Result<usize> {
        // SAFETY: no arguments; reads /sys/devices/system/cpu/possible.
        let n = unsafe { (self.num_possible_cpus)() };
        if n <= 0 {
            return Err(Error::Config(format!(
                "libbpf could not count the possible CPUs: {}",
                std::io::Error::from_raw_os_error(-n)
            )));
        }
        Ok(n as usize)
    }

    /// Attach program `prog_fd` to `ifindex` with `flags` (`XDP_FLAGS_DRV_MODE` or
    /// `XDP_FLAGS_SKB_MODE`), never replacing a program already there.
    pub fn attach(&self, ifindex: u32, prog_fd: c_int, flags: u32) -> std::io::Result<()> {
        // SAFETY: plain values; no options.
        let r = unsafe {
            (self.xdp_attach)(ifindex as c_int, prog_fd, flags | XDP_FLAGS_UPDATE_IF_NOEXIST, std::ptr::null())
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::from_raw_os_error(-r))
        }
    }

    /// Detach program `prog_fd` from `ifindex` (`flags` as at the attach), only if it is
    /// still the one attached there.
    pub fn detach(&self, ifindex: u32, prog_fd: c_int, flags: u32) -> std::io::Result<()> {
        let opts = AttachOpts { sz: std::mem::size_of::<AttachOpts>(), old_prog_fd: prog_fd, _pad: 0 };
        // SAFETY: the options struct of its size; -1 as the new program detaches.
        let r = unsafe { (self.xdp_attach)(ifindex as c_int, -1, flags | XDP_FLAGS_REPLACE, &opts) };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::from_raw_os_error(-r))
        }
    }

    /// The id of the XDP program attached to `ifindex` (in any mode), if there is one.
    pub fn attached_id(&self, ifindex: u32) -> Option<u32> {
        let mut id = 0u32;
        // SAFETY: an out-parameter of its type.
        let r = unsafe { (self.xdp_query_id)(ifindex as c_int, 0, &mut id) };
        (r == 0 && id != 0).then_some(id)
    }

    /// Every CPU's values of the program's counters: `out[cpu][counter]`.
    pub fn read_counters(&self, map_fd: c_int, cpus: usize) -> std::io::Result<Vec<[u64; COUNTERS.len()]>> {
        let mut out = vec![[0u64; COUNTERS.len()]; cpus];
        let mut values = vec![0u64; cpus];
        for key in 0..COUNTERS.len() as u32 {
            // SAFETY: a per-CPU array of u64: the kernel writes one u64 per possible CPU.
            let r = unsafe {
                (self.map_lookup_elem)(map_fd, &key as *const u32 as *const c_void, values.as_mut_ptr() as *mut c_void)
            };
            if r != 0 {
                return Err(std::io::Error::from_raw_os_error(-r));
            }
            for (row, v) in out.iter_mut().zip(&values) {
                row[key as usize] = *v;
            }
        }
        Ok(out)
    }
}

/// The verifier's log cut to what says why: the last instruction it looked at, the
/// source line above it, and the lines after it (the complaint), without the closing
/// statistics (`processed N insns ...`); at most 400 characters.
pub fn shorten_verifier_log(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("processed ") && !l.starts_with("verification time"))
        .collect();
    // An instruction line: `N: (OPCODE) TEXT`, perhaps with `; register state` after it.
    let is_insn =
        |l: &str| l.split_once(": (").is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let last = lines.iter().rposition(|l| is_insn(l));
    let mut s = match last {
        Some(i) => {
            let complaint = lines[i + 1..].join("; ");
            let insn = lines[i].split_once("; ").map_or(lines[i], |(a, _)| a).trim();
            let source = lines[..i].iter().rev().find(|l| l.starts_with("; ")).map(|l| l[2..].trim());
            let mut s = if complaint.is_empty() { "refused".to_string() } else { complaint };
            s.push_str(&format!(" (at {insn}"));
            if let Some(src) = source {
                s.push_str(&format!(", source: {src}"));
            }
            s.push(')');
            s
        }
        None => lines.iter().rev().take(3).rev().copied().collect::<Vec<_>>().join("; "),
    };
    if s.is_empty() {
        s = "refused, with an empty log".into();
    }
    if s.chars().count() > 400 {
        s = s.chars().take(397).collect::<String>() + "...";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verifier log as this kernel writes it for bpf/xdp_refused.c (log level 1).
    const REFUSED_LOG: &str = "func#0 @0
0: R1=ctx() R10=fp0
; unsigned char *data = (void *)(long)ctx->data; @ xdp_refused.c:13
0: (61) r1 = *(u32 *)(r1 +0)          ; R1_w=pkt(r=0)
; return data[20] ? XDP_PASS : XDP_DROP; @ xdp_refused.c:15
1: (71) r2 = *(u8 *)(r1 +20)
invalid access to packet, off=20 size=1, R1(id=0,off=20,r=0)
R1 offset is outside of the packet
processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0
";

    #[test]
    fn a_verifier_log_is_cut_to_the_complaint_its_instruction_and_source() {
        assert_eq!(
            shorten_verifier_log(REFUSED_LOG),
            "invalid access to packet, off=20 size=1, R1(id=0,off=20,r=0); R1 offset is outside of the packet \
             (at 1: (71) r2 = *(u8 *)(r1 +20), source: return data[20] ? XDP_PASS : XDP_DROP; @ xdp_refused.c:15)"
        );
        // No instruction lines: the last three lines; nothing at all: said so.
        assert_eq!(shorten_verifier_log("a\nb\nc\nd\nprocessed 0 insns\n"), "b; c; d");
        assert_eq!(shorten_verifier_log("\n"), "refused, with an empty log");
        // Long complaints are cut.
        let long = format!("0: (b7) r0 = 0\n{}\n", "x".repeat(5000));
        let s = shorten_verifier_log(&long);
        assert!(s.chars().count() == 400 && s.ends_with("..."), "{s}");
    }

    /// The counters' order is the C enum's: the table's names against bpf/xdp_fwd.c.
    #[test]
    fn the_counter_table_follows_the_programs_enum() {
        let src = include_str!("../bpf/xdp_fwd.c");
        let body = src.split("enum fwd_counter {").nth(1).and_then(|r| r.split("};").next()).expect("enum fwd_counter");
        let names: Vec<String> = body
            .split(',')
            .map(|s| s.trim().trim_start_matches("FWD_").to_ascii_lowercase())
            .filter(|s| !s.is_empty() && s != "n_counters")
            .collect();
        let ours: Vec<String> =
            COUNTERS.iter().map(|(n, _)| n.replace("no_neighbour", "no_neigh").to_string()).collect();
        assert_eq!(names, ours);
    }

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions.
        let r = unsafe { libc::geteuid() } == 0;
        if !r {
            println!("SKIP: loading BPF programs needs root");
        }
        r
    }

    /// The real verifier on the real refused program: the error names the program and
    /// carries the verifier's complaint, shortened; the forwarder itself loads.
    #[test]
    fn the_verifiers_refusal_is_reported_shortened() {
        if !root() {
            return;
        }
        let lib = match libbpf() {
            Ok(l) => l,
            Err(e) => {
                println!("SKIP: {e}");
                return;
            }
        };
        #[cfg(lab_xdp_fwd)]
        {
            let bad: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdp_refused.o"));
            let e = Object::load(lib, bad, "the test program").err().expect("the verifier refuses it").to_string();
            println!("{e}");
            assert!(e.starts_with("the kernel's verifier refused the test program (program fwd_xdp_refused): "), "{e}");
            assert!(e.contains("invalid access to packet") && e.contains("r1 +20"), "{e}");
            assert!(!e.contains("processed ") && e.len() < 600, "{e}");
            let obj = Object::load(lib, forwarder_object().unwrap(), "the XDP forwarder").expect("the forwarder loads");
            assert!(obj.program_fd(FWD_PROGRAM).unwrap() >= 0 && obj.map_fd(STATS_MAP).unwrap() >= 0);
            assert!(obj.program_fd("nope").is_err());
        }
        #[cfg(not(lab_xdp_fwd))]
        {
            let _ = lib;
            println!("SKIP: {}", forwarder_object().unwrap_err());
        }
    }
}
