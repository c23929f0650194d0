//! The one decoder of PERF_RECORD_SAMPLE bodies, used by live capture (the ring buffers in
//! [`crate::perf_abi`]) and by the analyzer's perf.data reader (its direct path and the
//! records it takes from linux-perf-data's sorted iterator alike). One layout type
//! ([`SampleLayout`]: the event's `sample_type`, `read_format`, default period and byte
//! order) and one notion of kernel vs user vs guest ([`CpuMode`]). A sample recorded for
//! DWARF unwinding (`perf record --call-graph dwarf`) also carries the user registers and
//! a copy of the top of the user stack: [`SampleLayout::decode_with_stack`] returns them
//! beside the sample ([`UserStack`]), for the analyzer's unwinder.

use crate::records::Sample;

/// Callchain entries at or above PERF_CONTEXT_MAX (-4095) are context markers
/// (PERF_CONTEXT_KERNEL, _USER, _GUEST...), not addresses: the decoder drops them.
pub const PERF_CONTEXT_MAX: u64 = (-4095i64) as u64;

/// PERF_RECORD_SAMPLE.
pub const PERF_RECORD_SAMPLE: u32 = 9;

/// PERF_RECORD_MISC_CPUMODE_MASK.
const MISC_CPUMODE_MASK: u16 = 0x7;

/// Where the CPU was when a record was taken: the record header's `misc & 7`
/// (PERF_RECORD_MISC_CPUMODE_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuMode {
    Unknown,
    Kernel,
    User,
    Hypervisor,
    GuestKernel,
    GuestUser,
}

impl CpuMode {
    pub fn from_misc(misc: u16) -> CpuMode {
        match misc & MISC_CPUMODE_MASK {
            1 => CpuMode::Kernel,
            2 => CpuMode::User,
            3 => CpuMode::Hypervisor,
            4 => CpuMode::GuestKernel,
            5 => CpuMode::GuestUser,
            _ => CpuMode::Unknown,
        }
    }

    /// A kernel's code ran (the host's or a guest's): its addresses are symbolized against
    /// kernel symbols, never a process's mappings.
    pub fn is_kernel(self) -> bool {
        matches!(self, CpuMode::Kernel | CpuMode::GuestKernel)
    }
}

/// Sample layout bits (perf_event.h `PERF_SAMPLE_*`) the decoder reads or steps over.
pub mod sample_bits {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// `read_format` bits (perf_event.h `PERF_FORMAT_*`): what a READ value holds.
pub mod read_bits {
    pub const TOTAL_TIME_ENABLED: u64 = 1 << 0;
    pub const TOTAL_TIME_RUNNING: u64 = 1 << 1;
    pub const ID: u64 = 1 << 2;
    pub const GROUP: u64 = 1 << 3;
    pub const LOST: u64 = 1 << 4;
}

/// How one event's SAMPLE records are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleLayout {
    /// The event's `sample_type` (PERF_SAMPLE_* bits).
    pub sample_type: u64,
    /// The event's `read_format`, used only when `sample_type` has READ.
    pub read_format: u64,
    /// The period a sample stands for when the layout has no PERIOD (the event's fixed
    /// sample_period; 1 when it sampled by frequency).
    pub default_period: u64,
    /// The record's byte order (a perf.data file written on a big-endian machine).
    pub big_endian: bool,
}

/// What a sample recorded for DWARF unwinding carries beside its fields: the user
/// registers (PERF_SAMPLE_REGS_USER) and the bytes copied from the user stack pointer up
/// (PERF_SAMPLE_STACK_USER).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStack<'a> {
    /// The registers' values, one per set bit of the event's `sample_regs_user`, lowest
    /// bit first; empty when the sample has none (it interrupted a kernel thread: ABI none).
    pub regs: Vec<u64>,
    /// The stack bytes from the user stack pointer up, as many as the kernel copied (its
    /// `dyn_size`; at most the event's `sample_stack_user`).
    pub stack: &'a [u8],
}

impl UserStack<'_> {
    /// The value of perf register number `reg` (arch/x86/include/uapi/asm/perf_regs.h:
    /// BP 6, SP 7, IP 8) under the event's `sample_regs_user` mask, when recorded.
    pub fn reg(&self, mask: u64, reg: u32) -> Option<u64> {
        if reg >= 64 || mask & (1 << reg) == 0 {
            return None;
        }
        self.regs.get((mask & ((1u64 << reg) - 1)).count_ones() as usize).copied()
    }
}

impl SampleLayout {
    /// Decode a SAMPLE record's body (after its 8-byte header). Fields after the callchain
    /// (raw data, branch stacks, registers...) are not read. None when the body is shorter
    /// than its layout says.
    pub fn decode(&self, body: &[u8], misc: u16) -> Option<Sample> {
        let mut r = Reader { body, pos: 0, big: self.big_endian };
        let mut chain = Vec::new();
        let mut s = self.fields(&mut r, misc, &mut chain)?;
        s.callchain = chain;
        Some(s)
    }

    /// [`decode`](Self::decode) without allocating: the callchain goes into `chain`
    /// (cleared first), and the returned sample's own `callchain` stays empty. For readers
    /// that look the chain up (grouping millions of samples per distinct stack).
    pub fn decode_reusing(&self, body: &[u8], misc: u16, chain: &mut Vec<u64>) -> Option<Sample> {
        let mut r = Reader { body, pos: 0, big: self.big_endian };
        self.fields(&mut r, misc, chain)
    }

    /// Decode a SAMPLE record's body with its user registers and stack copy, when the
    /// layout has them (REGS_USER or STACK_USER; `regs_mask` is the event's
    /// `sample_regs_user`). The stack is not read from a layout with a branch stack (its
    /// entries' size depends on the event's branch_sample_type): None beside the sample then.
    pub fn decode_with_stack<'a>(
        &self,
        body: &'a [u8],
        misc: u16,
        regs_mask: u64,
    ) -> Option<(Sample, Option<UserStack<'a>>)> {
        use sample_bits::*;
        let mut r = Reader { body, pos: 0, big: self.big_endian };
        let mut chain = Vec::new();
        let mut s = self.fields(&mut r, misc, &mut chain)?;
        s.callchain = chain;
        let st = self.sample_type;
        if st & (REGS_USER | STACK_USER) == 0 || st & BRANCH_STACK != 0 {
            return Some((s, None));
        }
        if st & RAW != 0 {
            // A u32 size, then that many bytes (the kernel pads them so the pair ends on 8).
            let size = r.u32()?;
            r.slice(size as usize)?;
        }
        let mut regs = Vec::new();
        if st & REGS_USER != 0 && r.u64()? != 0 {
            let n = regs_mask.count_ones() as usize;
            regs.reserve(n);
            for _ in 0..n {
                regs.push(r.u64()?);
            }
        }
        let mut stack: &[u8] = &[];
        if st & STACK_USER != 0 {
            let size = usize::try_from(r.u64()?).ok()?;
            if size > 0 {
                let data = r.slice(size)?;
                let copied = usize::try_from(r.u64()?).ok()?;
                stack = &data[..copied.min(size)];
            }
        }
        Some((s, Some(UserStack { regs, stack })))
    }

    /// The time of a side-band record (MMAP, MMAP2, COMM...) from the `sample_id` trailer
    /// the kernel appends with `sample_id_all`: its fields (TID, TIME, ID, STREAM_ID, CPU,
    /// IDENTIFIER, as the layout has them) end the record, so the time sits at a fixed
    /// distance from its end. None without TIME in the layout, or a body too short.
    pub fn trailer_time(&self, body: &[u8]) -> Option<u64> {
        use sample_bits::*;
        if self.sample_type & TIME == 0 {
            return None;
        }
        let has = |b: u64| usize::from(self.sample_type & b != 0);
        let trailer = 8 * (has(TID) + 1 + has(ID) + has(STREAM_ID) + has(CPU) + has(IDENTIFIER));
        let at = body.len().checked_sub(trailer)? + 8 * has(TID);
        let mut r = Reader { body, pos: at, big: self.big_endian };
        r.u64()
    }

    /// The fields every sample has, up to its callchain (into `chain`, cleared first; the
    /// returned sample's `callchain` is empty).
    fn fields(&self, r: &mut Reader, misc: u16, chain: &mut Vec<u64>) -> Option<Sample> {
        use sample_bits::*;
        let body = r.body;
        let st = self.sample_type;
        if st & IDENTIFIER != 0 {
            r.u64()?;
        }
        let ip = if st & IP != 0 { r.u64()? } else { 0 };
        let (pid, tid) = if st & TID != 0 { r.u32_pair()? } else { (0, 0) };
        let time = if st & TIME != 0 { r.u64()? } else { 0 };
        if st & ADDR != 0 {
            r.u64()?;
        }
        if st & ID != 0 {
            r.u64()?;
        }
        if st & STREAM_ID != 0 {
            r.u64()?;
        }
        let cpu = if st & CPU != 0 { r.u32_pair()?.0 } else { 0 };
        let period = if st & PERIOD != 0 { r.u64()? } else { self.default_period };
        if st & READ != 0 {
            r.skip_read(self.read_format)?;
        }
        chain.clear();
        if st & CALLCHAIN != 0 {
            let nr = r.u64()?;
            if nr > (body.len() / 8) as u64 {
                return None;
            }
            let words = r.slice(nr as usize * 8)?;
            chain.reserve(nr as usize);
            let big = self.big_endian;
            chain.extend(
                words
                    .chunks_exact(8)
                    .map(|w| {
                        let w: [u8; 8] = w.try_into().unwrap_or([0xff; 8]);
                        if big {
                            u64::from_be_bytes(w)
                        } else {
                            u64::from_le_bytes(w)
                        }
                    })
                    .filter(|&a| a < PERF_CONTEXT_MAX),
            );
        }
        let kernel = CpuMode::from_misc(misc).is_kernel();
        Some(Sample { time, pid, tid, cpu, ip, period, kernel, callchain: Vec::new() })
    }
}

/// A cursor over a record body in its byte order.
struct Reader<'a> {
    body: &'a [u8],
    pos: usize,
    big: bool,
}

impl<'a> Reader<'a> {
    fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let b: [u8; N] = self.body.get(self.pos..self.pos.checked_add(N)?)?.try_into().ok()?;
        self.pos += N;
        Some(b)
    }

    fn slice(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.body.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(b)
    }

    fn u32(&mut self) -> Option<u32> {
        let b = self.bytes::<4>()?;
        Some(if self.big { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }

    fn u64(&mut self) -> Option<u64> {
        let b = self.bytes::<8>()?;
        Some(if self.big { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
    }

    /// Two u32 in one u64 slot (pid/tid, cpu/res), each in the record's byte order.
    fn u32_pair(&mut self) -> Option<(u32, u32)> {
        let a = self.bytes::<4>()?;
        let b = self.bytes::<4>()?;
        Some(if self.big {
            (u32::from_be_bytes(a), u32::from_be_bytes(b))
        } else {
            (u32::from_le_bytes(a), u32::from_le_bytes(b))
        })
    }

    /// Step over a READ value: a group (nr, times, then nr values with their id and lost)
    /// or one value (value, times, id, lost).
    fn skip_read(&mut self, rf: u64) -> Option<()> {
        use read_bits::*;
        let times = u64::from(rf & TOTAL_TIME_ENABLED != 0) + u64::from(rf & TOTAL_TIME_RUNNING != 0);
        let per_value = 1 + u64::from(rf & ID != 0) + u64::from(rf & LOST != 0);
        let words = if rf & GROUP != 0 {
            let nr = self.u64()?;
            times.checked_add(nr.checked_mul(per_value)?)?
        } else {
            times + per_value
        };
        let bytes = usize::try_from(words.checked_mul(8)?).ok()?;
        let end = self.pos.checked_add(bytes)?;
        (end <= self.body.len()).then(|| self.pos = end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[u64]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    const LIVE: u64 = sample_bits::IP | sample_bits::TID | sample_bits::TIME | sample_bits::CPU | sample_bits::PERIOD;

    #[test]
    fn the_live_layout_decodes_field_by_field() {
        let l = SampleLayout {
            sample_type: LIVE | sample_bits::CALLCHAIN,
            read_format: 0,
            default_period: 1,
            big_endian: false,
        };
        // ip, pid 7 / tid 9, time, cpu 3, period, callchain of 3 with a context marker.
        let body = words(&[0x4000, 7 | (9 << 32), 55, 3, 250_000, 3, PERF_CONTEXT_MAX + 1, 0x4001, 0x4002]);
        let s = l.decode(&body, 2).expect("whole body");
        assert_eq!((s.ip, s.pid, s.tid, s.time, s.cpu, s.period), (0x4000, 7, 9, 55, 3, 250_000));
        assert_eq!(s.callchain, vec![0x4001, 0x4002]);
        assert!(!s.kernel);
        assert!(l.decode(&body[..body.len() - 8], 2).is_none(), "a callchain cut short");
    }

    #[test]
    fn kernel_means_host_or_guest_kernel() {
        let kernel: Vec<u16> = (0..8).filter(|&m| CpuMode::from_misc(m | 0x4000).is_kernel()).collect();
        assert_eq!(kernel, vec![1, 4]);
    }

    #[test]
    fn read_values_are_stepped_over_by_their_format() {
        use read_bits::*;
        let st = sample_bits::IP | sample_bits::PERIOD | sample_bits::READ | sample_bits::CALLCHAIN;
        // A group of two with both times and ids: nr, enabled, running, (v, id) x 2.
        let grouped = SampleLayout {
            sample_type: st,
            read_format: GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID,
            default_period: 1,
            big_endian: false,
        };
        let body = words(&[0x10, 4, 2, 100, 90, 5, 1, 6, 2, 1, 0x11]);
        let s = grouped.decode(&body, 1).expect("whole body");
        assert_eq!((s.ip, s.period, s.callchain.clone(), s.kernel), (0x10, 4, vec![0x11], true));
        // One value with LOST: value, lost.
        let single = SampleLayout { read_format: LOST, ..grouped };
        let s = single.decode(&words(&[0x10, 4, 77, 0, 1, 0x12]), 1).expect("whole body");
        assert_eq!(s.callchain, vec![0x12]);
        // A group count past the body is refused, not read past.
        assert!(grouped.decode(&words(&[0x10, 4, u64::MAX / 2, 0]), 1).is_none());
    }

    /// A `--call-graph dwarf` sample: the fields, a (kernel) callchain, then the user
    /// registers under their mask and the stack copy with its dyn_size; registers are
    /// found by perf number; a kernel thread's sample (ABI none) has none.
    #[test]
    fn user_registers_and_the_stack_copy_come_beside_the_sample() {
        use sample_bits::*;
        let l = SampleLayout {
            sample_type: IP | TID | PERIOD | CALLCHAIN | REGS_USER | STACK_USER,
            read_format: 0,
            default_period: 1,
            big_endian: false,
        };
        // BP, SP and IP (perf numbers 6, 7, 8) and R8 (16).
        let mask = (1 << 6) | (1 << 7) | (1 << 8) | (1 << 16);
        let mut body = words(&[0x4000, 7 | (7 << 32), 1, 0, 2, 0x7f00_0000_1000, 0x7ffe_0000, 0x4000, 99, 16]);
        body.extend(0xdead_beefu64.to_le_bytes());
        body.extend([0u8; 8]);
        body.extend(9u64.to_le_bytes());
        let (s, st) = l.decode_with_stack(&body, 2, mask).expect("whole body");
        assert_eq!((s.ip, s.pid, s.callchain.len()), (0x4000, 7, 0));
        let st = st.expect("a user stack");
        assert_eq!(st.regs, vec![0x7f00_0000_1000, 0x7ffe_0000, 0x4000, 99]);
        assert_eq!(
            (st.reg(mask, 6), st.reg(mask, 7), st.reg(mask, 8), st.reg(mask, 16)),
            (Some(0x7f00_0000_1000), Some(0x7ffe_0000), Some(0x4000), Some(99))
        );
        assert_eq!(st.reg(mask, 0), None, "AX was not recorded");
        assert_eq!(st.stack.len(), 9, "the copy is cut to its dyn_size");
        assert_eq!(&st.stack[..8], &0xdead_beefu64.to_le_bytes());
        // ABI none (a kernel thread) and an empty stack copy (size 0, no dyn_size).
        let kernel_thread = words(&[0x10, 1, 1, 0, 0, 0]);
        let (_, st) = l.decode_with_stack(&kernel_thread, 1, mask).expect("whole body");
        assert_eq!(st.expect("fields present"), UserStack { regs: vec![], stack: &[] });
        // A stack copy announced past the body is refused.
        assert!(l.decode_with_stack(&words(&[0x10, 1, 1, 0, 0, 4096, 1]), 1, mask).is_none());
        // Without the bits, nothing beside; decode agrees with decode_with_stack.
        let plain = SampleLayout { sample_type: IP | TID | PERIOD | CALLCHAIN, ..l };
        let b = words(&[0x10, 1, 1, 0]);
        assert_eq!(plain.decode_with_stack(&b, 1, mask), Some((plain.decode(&b, 1).unwrap(), None)));
    }

    #[test]
    fn big_endian_records_and_the_default_period() {
        let l = SampleLayout {
            sample_type: sample_bits::IP | sample_bits::TID,
            read_format: 0,
            default_period: 4000,
            big_endian: true,
        };
        let mut body = 0x1234u64.to_be_bytes().to_vec();
        body.extend(7u32.to_be_bytes());
        body.extend(9u32.to_be_bytes());
        let s = l.decode(&body, 2).expect("whole body");
        assert_eq!((s.ip, s.pid, s.tid, s.period), (0x1234, 7, 9, 4000));
    }

    /// A side-band record's time from its sample_id trailer (TID, TIME, CPU here: the
    /// time 16 bytes before the end), and none without TIME.
    #[test]
    fn the_time_of_a_side_band_record_is_in_its_trailer() {
        let l = SampleLayout { sample_type: LIVE, read_format: 0, default_period: 1, big_endian: false };
        // An MMAP2-like body of 40 bytes, then pid/tid, time, cpu/res.
        let mut body = vec![0xeeu8; 40];
        body.extend(words(&[7 | (8 << 32), 123_456_789, 1]));
        assert_eq!(l.trailer_time(&body), Some(123_456_789));
        let with_id = SampleLayout { sample_type: LIVE | sample_bits::ID, ..l };
        let mut b2 = vec![0u8; 16];
        b2.extend(words(&[7, 55, 9, 1])); // pid/tid, time, id, cpu
        assert_eq!(with_id.trailer_time(&b2), Some(55));
        let untimed = SampleLayout { sample_type: LIVE & !sample_bits::TIME, ..l };
        assert_eq!(untimed.trailer_time(&body), None);
        assert_eq!(l.trailer_time(&body[..8]), None, "shorter than its trailer");
    }
}
