//! DWARF unwinding of user stacks. A sample recorded for it (`perf record --call-graph
//! dwarf`, or fwdscope's own `record --call-graph dwarf`) carries the user registers and a
//! copy of the top of the user stack ([`crate::sample_decode::UserStack`]); [`UserUnwinder`]
//! walks that copy with
//! framehop from the binaries' own call-frame information (`.eh_frame` through
//! `.eh_frame_hdr`, or `.debug_frame`), as samply does, so that programs built without frame
//! pointers (DPDK's l3fwd and libraries, most distribution binaries) get whole callchains
//! and their helpers can be charged to their callers.
//!
//! The same unwinder serves both sides: the analyzer unwinds a perf.data file's stacks after
//! the fact, and the collector unwinds its own samples as they arrive (live), keeping the
//! callchains and dropping the stack copies. Each process's modules follow the side-band
//! records: a mapping adds one (the binary read once per path, found by the
//! [`FileOf`] the user of the unwinder gives: the analyzer looks for the recorded build-id
//! at its path or in perf's build-id cache; the collector opens the live process's file),
//! a fork copies the parent's, an exec starts afresh. Live, a process met before any of its
//! mappings (one that started between two drain passes) has its modules read once from
//! /proc/PID/maps. [`UnwindStats`] counts what happened
//! to every stack: unwound to its outermost frame, or cut short and why (the stack copy
//! ended, an address in no mapped binary, a binary that could not be read).

use crate::records::Mapping;
use crate::sample_decode::UserStack;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{Error as UnwindError, ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// perf's x86-64 user register numbers (arch/x86/include/uapi/asm/perf_regs.h).
const PERF_REG_X86_BP: u32 = 6;
const PERF_REG_X86_SP: u32 = 7;
const PERF_REG_X86_IP: u32 = 8;

/// Frames at most per stack: a corrupt copy cannot keep the unwinder going.
const MAX_FRAMES: usize = 512;

/// Addresses at or above this are the kernel's (x86-64's canonical upper half).
const KERNEL_SPACE: u64 = 0x8000_0000_0000_0000;

/// Section bytes, shared by every process that maps the binary.
type Data = Arc<[u8]>;

/// Where the file of a mapped binary is: `(mapped path, recorded build-id, pid)` to a
/// readable path, or None when it cannot be found.
pub type FileOf = Box<dyn FnMut(&str, Option<&str>, u32) -> Option<std::path::PathBuf> + Send>;

/// perf's x86-64 user registers an unwind needs (BP, SP, IP): the `sample_regs_user` mask
/// fwdscope's own recordings ask for (samply asks for the same three).
pub const REGS_MASK_X86_64: u64 = (1 << PERF_REG_X86_BP) | (1 << PERF_REG_X86_SP) | (1 << PERF_REG_X86_IP);

/// One binary's unwind sections and load segments, read once.
struct Binary {
    sections: ExplicitModuleSectionInfo<Data>,
    /// (file offset, stated address, file size) of each loadable segment.
    loads: Vec<(u64, u64, u64)>,
}

impl Binary {
    /// The address in a process of the binary's stated address 0, from one of its mappings
    /// (`start`, file offset `pgoff`): through the segment that holds that offset.
    fn base_avma(&self, start: u64, pgoff: u64) -> Option<u64> {
        let (off, vaddr, _) = self
            .loads
            .iter()
            .filter(|(off, _, size)| *off <= pgoff.saturating_add(0xfff) && pgoff < off.saturating_add(*size))
            .min_by_key(|(off, _, _)| off.abs_diff(pgoff))?;
        Some(start.wrapping_sub(pgoff).wrapping_add(*off).wrapping_sub(*vaddr))
    }
}

/// How the user stacks of a recording were unwound.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnwindStats {
    /// Samples that carried user registers and a stack copy.
    pub stacks: u64,
    /// Of them, unwound to their outermost frame (the CFI or a null return address ends it).
    pub whole: u64,
    /// Cut short, by reason.
    pub cut: BTreeMap<String, u64>,
    /// Samples of kernel threads (no user registers to start from).
    pub kernel_threads: u64,
    /// User frames added to callchains.
    pub frames: u64,
    /// Binaries whose unwind information could not be read, with why.
    pub unreadable: BTreeMap<String, String>,
}

impl UnwindStats {
    /// The report's line: how the user callchains were made and how many were cut short.
    pub fn summary(&self) -> String {
        self.summary_when("")
    }

    /// The report's line with when the unwinding happened (` while recording`) said.
    pub fn summary_when(&self, when: &str) -> String {
        // Saturating: the counts may come from a recording's meta.json.
        let cut: u64 = self.cut.values().fold(0u64, |a, &n| a.saturating_add(n));
        let mut s = format!(
            "user callchains unwound{when} from DWARF CFI (.eh_frame/.debug_frame, framehop) for {} samples: {} to \
             the outermost frame, {cut} cut short",
            self.stacks, self.whole
        );
        if cut > 0 {
            let why: Vec<String> = self.cut.iter().map(|(r, n)| format!("{n} {r}")).collect();
            s.push_str(&format!(" ({})", why.join(", ")));
        }
        if self.kernel_threads > 0 {
            s.push_str(&format!("; {} samples of kernel threads have no user stack", self.kernel_threads));
        }
        s
    }
}

/// Unwinds user stacks for every process of one recording.
pub struct UserUnwinder {
    /// The events' `sample_regs_user`: which registers each sample carries.
    regs_mask: u64,
    processes: HashMap<u32, UnwinderX86_64<Data>>,
    /// Each process's mapped ranges, to tell an address in no binary (JIT code, anonymous
    /// memory) from one the CFI did not cover.
    ranges: HashMap<u32, Vec<std::ops::Range<u64>>>,
    cache: CacheX86_64,
    /// Binaries by path: read, or why not (kept in `stats.unreadable`).
    binaries: HashMap<String, Option<Arc<Binary>>>,
    /// Where a mapped binary's file is found.
    file_of: FileOf,
    /// Live: read a process's modules from /proc/PID/maps when a sample of it comes
    /// before any mapping (each process tried once).
    live: bool,
    tried_proc: std::collections::HashSet<u32>,
    pub stats: UnwindStats,
}

impl UserUnwinder {
    /// An unwinder for samples whose registers follow `regs_mask` (the event's
    /// `sample_regs_user`), finding binaries with `file_of`; None when the mask lacks IP,
    /// SP or BP, which every unwind needs.
    pub fn new(regs_mask: u64, file_of: FileOf) -> Option<UserUnwinder> {
        let needed = [PERF_REG_X86_BP, PERF_REG_X86_SP, PERF_REG_X86_IP].iter().all(|r| regs_mask & (1 << r) != 0);
        needed.then(|| UserUnwinder {
            regs_mask,
            processes: HashMap::new(),
            ranges: HashMap::new(),
            cache: CacheX86_64::new(),
            binaries: HashMap::new(),
            file_of,
            live: false,
            tried_proc: std::collections::HashSet::new(),
            stats: UnwindStats::default(),
        })
    }

    /// The collector's unwinder: samples taken here and now, registers by
    /// [`REGS_MASK_X86_64`], each binary the file the live process maps (through
    /// /proc/PID/root, so a process in another mount namespace is read right), and a
    /// process met before its mappings read from /proc/PID/maps.
    pub fn live() -> Option<UserUnwinder> {
        let file_of: FileOf = Box::new(|path: &str, _: Option<&str>, pid: u32| {
            let inside = std::path::PathBuf::from(format!("/proc/{pid}/root{path}"));
            if inside.exists() {
                Some(inside)
            } else {
                Some(std::path::PathBuf::from(path))
            }
        });
        let mut u = UserUnwinder::new(REGS_MASK_X86_64, file_of)?;
        u.live = true;
        Some(u)
    }

    /// The events' `sample_regs_user` this unwinder reads registers by.
    pub fn regs_mask(&self) -> u64 {
        self.regs_mask
    }

    /// A user-space mapping of process `m.pid`: its binary becomes one of the process's
    /// modules. Mappings of no file on disk (`[vdso]`, `//anon`, `socket:[N]`, a memfd, a
    /// deleted file, a device) only mark their range.
    pub fn map(&mut self, m: &Mapping) {
        let range = m.start..m.start.saturating_add(m.len);
        let ranges = self.ranges.entry(m.pid).or_default();
        if ranges.contains(&range) {
            // Known already (a fork's copy, the /proc read, then the kernel's record).
            return;
        }
        ranges.push(range);
        let p = m.path.as_str();
        let no_file = !p.starts_with('/')
            || p.starts_with("//")
            || p.starts_with("/memfd:")
            || p.starts_with("/dev/")
            || p.ends_with(" (deleted)");
        if no_file || m.start >= KERNEL_SPACE {
            return;
        }
        let Some(bin) = self.binary(&m.path, m.build_id.as_deref(), m.pid) else { return };
        let Some(base) = bin.base_avma(m.start, m.pgoff) else {
            self.stats
                .unreadable
                .insert(m.path.clone(), format!("no loadable segment holds file offset {:#x}", m.pgoff));
            return;
        };
        let module = Module::new(m.path.clone(), m.start..m.start.saturating_add(m.len), base, bin.sections.clone());
        self.processes.entry(m.pid).or_default().add_module(module);
    }

    /// Process `pid` was forked from `ppid`: it starts with the parent's modules.
    pub fn fork(&mut self, ppid: u32, pid: u32) {
        if pid == ppid || self.processes.contains_key(&pid) {
            return;
        }
        if let Some(u) = self.processes.get(&ppid).cloned() {
            self.processes.insert(pid, u);
        }
        if let Some(r) = self.ranges.get(&ppid).cloned() {
            self.ranges.insert(pid, r);
        }
    }

    /// Process `pid` executed a new program: its old modules are gone.
    pub fn exec(&mut self, pid: u32) {
        self.processes.remove(&pid);
        self.ranges.remove(&pid);
    }

    /// Process `pid` exited: forget it (its number may come back as another process, and
    /// a long system-wide recording must not keep every process that ever ran).
    pub fn exit(&mut self, pid: u32) {
        self.exec(pid);
        self.tried_proc.remove(&pid);
    }

    /// The user frames of one sample of process `pid`: the interrupted instruction, then
    /// each return address, innermost first. Empty for a kernel thread's sample.
    pub fn unwind(&mut self, pid: u32, stack: &UserStack) -> Vec<u64> {
        let regs = (
            stack.reg(self.regs_mask, PERF_REG_X86_IP),
            stack.reg(self.regs_mask, PERF_REG_X86_SP),
            stack.reg(self.regs_mask, PERF_REG_X86_BP),
        );
        let (Some(ip), Some(sp), Some(bp)) = regs else {
            self.stats.kernel_threads += 1;
            return Vec::new();
        };
        self.stats.stacks += 1;
        if self.live && !self.processes.contains_key(&pid) && self.tried_proc.insert(pid) {
            for m in crate::records::synthesize_process(pid, 0).0 {
                self.map(&m);
            }
        }
        let Some(unwinder) = self.processes.get(&pid) else {
            self.cut("in a process with no mapped binary");
            return vec![ip];
        };
        let bytes = stack.stack;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let word = bytes.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut frames = Vec::new();
        let mut it = unwinder.iter_frames(ip, UnwindRegsX86_64::new(ip, sp, bp), &mut self.cache, &mut read_stack);
        let end = loop {
            if frames.len() >= MAX_FRAMES {
                break Some(format!("deeper than {MAX_FRAMES} frames"));
            }
            match it.next() {
                Ok(Some(FrameAddress::InstructionPointer(a))) => frames.push(a),
                Ok(Some(FrameAddress::ReturnAddress(a))) => frames.push(a.get()),
                Ok(None) => break None,
                Err(UnwindError::CouldNotReadStack(_)) => break Some("at the end of the stack copy".to_string()),
                Err(e) => break Some(format!("by the unwinder ({e})")),
            }
        };
        match end {
            None => self.stats.whole += 1,
            Some(why) => {
                let last = frames.last().copied().unwrap_or(ip);
                let in_binary = self.ranges.get(&pid).is_some_and(|r| r.iter().any(|r| r.contains(&last)));
                if in_binary {
                    self.cut(&why)
                } else {
                    self.cut("at an address in no mapped binary (JIT or anonymous code)")
                }
            }
        }
        self.stats.frames += frames.len() as u64;
        frames
    }

    /// Extend a sample's callchain with its unwound user frames: its kernel part kept, any
    /// user part the kernel gave replaced.
    pub fn extend(&mut self, s: &mut crate::records::Sample, stack: &UserStack) {
        let user = self.unwind(s.pid, stack);
        if user.is_empty() {
            return;
        }
        s.callchain.retain(|&a| a >= KERNEL_SPACE);
        s.callchain.extend(user);
    }

    fn cut(&mut self, why: &str) {
        *self.stats.cut.entry(why.to_string()).or_default() += 1;
    }

    /// The binary at `path`, read once; None (and why, in the stats) when it cannot be.
    fn binary(&mut self, path: &str, recorded: Option<&str>, pid: u32) -> Option<Arc<Binary>> {
        // Live, one path may be different files in different mount namespaces (a
        // container's libc): the file found is the key. After the fact, the path and the
        // recorded build-id (finding the file checks its build-id: done once).
        let file = if self.live { (self.file_of)(path, recorded, pid) } else { None };
        let key = match file.as_deref().and_then(|f| std::fs::metadata(f).ok()) {
            Some(md) => {
                use std::os::unix::fs::MetadataExt;
                format!("{}:{} {path}", md.dev(), md.ino())
            }
            None => format!("{} {path}", recorded.unwrap_or("-")),
        };
        if let Some(b) = self.binaries.get(&key) {
            return b.clone();
        }
        let file = if self.live { file } else { (self.file_of)(path, recorded, pid) };
        let read = match file {
            Some(file) => read_binary(&file, recorded),
            None => Err(Some(format!(
                "no file of the recorded build-id {} at the path or in perf's build-id cache",
                recorded.unwrap_or("-")
            ))),
        };
        let b = match read {
            Ok(b) => Some(Arc::new(b)),
            // A mapped file that is no binary (/etc/ld.so.cache, a font): nothing to unwind.
            Err(None) => None,
            Err(Some(why)) => {
                self.stats.unreadable.insert(path.to_string(), why);
                None
            }
        };
        self.binaries.insert(key, b.clone());
        b
    }
}

/// A binary's unwind sections and segments from `path` (found by the unwinder's
/// [`FileOf`]). `Err(None)`: a file that is no object
/// file, which nothing is unwound through; `Err(Some(why))`: a binary that cannot be.
fn read_binary(path: &std::path::Path, recorded: Option<&str>) -> Result<Binary, Option<String>> {
    // A mapped file that is gone and was given no build-id (a DPDK runtime file under
    // /run/dpdk after its lab went down) need not have been a binary: nothing to say.
    if recorded.is_none() && std::fs::symlink_metadata(path).is_err() {
        return Err(None);
    }
    // Through the checked opener (another user's process may map a FIFO or a device, or
    // swap one in), read rather than mapped: a file truncated while it is read cannot
    // fault this process. The sections needed are copied out before the bytes are dropped.
    let bytes = crate::files::read(path, crate::files::Kind::Binary).map_err(|e| Some(e.to_string()))?;
    let file = object::File::parse(&*bytes).map_err(|_| None)?;
    let section = |name: &str| -> Option<(std::ops::Range<u64>, Data)> {
        let s = file.section_by_name(name)?;
        let data = s.data().ok()?;
        Some((s.address()..s.address() + s.size(), Arc::from(data)))
    };
    let (eh_frame_svma, eh_frame) = section(".eh_frame").unzip();
    let (eh_frame_hdr_svma, eh_frame_hdr) = section(".eh_frame_hdr").unzip();
    let (text_svma, text) = section(".text").unzip();
    let debug_frame = section(".debug_frame").map(|(_, d)| d);
    if eh_frame.is_none() && debug_frame.is_none() {
        return Err(Some(format!("{}: no .eh_frame or .debug_frame", path.display())));
    }
    let sections = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma,
        text,
        got_svma: file.section_by_name(".got").map(|s| s.address()..s.address() + s.size()),
        eh_frame_svma,
        eh_frame,
        eh_frame_hdr_svma,
        eh_frame_hdr,
        debug_frame,
        ..Default::default()
    };
    let loads = file
        .segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (off, s.address(), size)
        })
        .collect();
    Ok(Binary { sections, loads })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binary's stated address 0 lands where its mapping says, for a PIE (text segment
    /// at the offset it is stated at) and for a fixed-address one (stated 0x401000).
    #[test]
    fn the_base_address_comes_from_the_segment_that_holds_the_offset() {
        let pie = Binary {
            sections: ExplicitModuleSectionInfo::default(),
            loads: vec![(0, 0, 0x1000), (0x1000, 0x1000, 0x5000), (0x6000, 0x7000, 0x800)],
        };
        assert_eq!(pie.base_avma(0x5555_5555_5000, 0x1000), Some(0x5555_5555_4000));
        let fixed = Binary { sections: ExplicitModuleSectionInfo::default(), loads: vec![(0x1000, 0x401000, 0x2000)] };
        assert_eq!(fixed.base_avma(0x401000, 0x1000), Some(0));
        assert_eq!(fixed.base_avma(0x401000, 0x9000), None, "no segment holds that offset");
    }

    /// Registers lacking IP, SP or BP cannot start an unwind.
    #[test]
    fn the_register_mask_must_hold_ip_sp_and_bp() {
        let none = || -> FileOf { Box::new(|_: &str, _: Option<&str>, _: u32| None) };
        assert!(UserUnwinder::new(0xff0fff, none()).is_some(), "perf's --call-graph dwarf mask");
        assert!(UserUnwinder::new(REGS_MASK_X86_64, none()).is_some(), "fwdscope's own");
        assert!(UserUnwinder::new((1 << 7) | (1 << 8), none()).is_none());
    }

    /// A fork inherits the parent's modules; an exec or an exit forgets the process (a
    /// number that comes back is another process); mappings repeated are kept once.
    #[test]
    fn processes_follow_fork_exec_and_exit() {
        let none = || -> FileOf { Box::new(|_: &str, _: Option<&str>, _: u32| None) };
        let mut u = UserUnwinder::new(REGS_MASK_X86_64, none()).expect("mask");
        let m = Mapping {
            time: 1,
            pid: 10,
            tid: 10,
            start: 0x1000,
            len: 0x1000,
            pgoff: 0,
            path: "//anon".into(),
            build_id: None,
        };
        u.map(&m);
        u.map(&m);
        assert_eq!(u.ranges[&10].len(), 1, "a repeated mapping is kept once");
        u.fork(10, 11);
        assert_eq!(u.ranges[&11], vec![0x1000..0x2000]);
        u.exec(11);
        assert!(!u.ranges.contains_key(&11));
        u.tried_proc.insert(10);
        u.exit(10);
        assert!(!u.ranges.contains_key(&10) && !u.tried_proc.contains(&10));
        // A sample of a process with nothing mapped is cut, and says why.
        let stack = UserStack { regs: vec![1, 2, 3], stack: &[] };
        assert_eq!(u.unwind(12, &stack), vec![3]);
        assert_eq!(u.stats.cut.get("in a process with no mapped binary"), Some(&1));
    }
}
