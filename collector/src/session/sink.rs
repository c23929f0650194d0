//! Where a recording session's records go: one handler per record type (as samply's
//! converter has), each feeding both the recording writer and, when there is one, the live
//! stream. The session's drain loop and its final drain after the target stopped go
//! through the same handlers, so the two cannot differ. With `--call-graph dwarf` the sink
//! also keeps the user unwinder's view of every process (mappings, forks, execs) and
//! unwinds each sample's stack copy here, before the sample is written or streamed: the
//! recording and `top` get whole callchains, and no stack copy is kept.

use crate::recording::{CounterRow, Meta, RecordingWriter};
use crate::records::{Mapping, Record, Sample, StackSample, TaskEvent};
use crate::sample_decode::UserStack;
use crate::stream::{Batch, StreamSender};
use crate::unwind::UserUnwinder;
use crate::Result;
use std::collections::HashSet;

/// The recording being written, its meta.json, and the live stream.
pub struct Sink<'a> {
    pub writer: RecordingWriter,
    pub meta: Meta,
    stream: Option<&'a StreamSender>,
    /// Mappings already kept: (pid, start, path).
    seen_maps: HashSet<(u32, u64, String)>,
    /// What the current pass gathered for the stream.
    samples: Vec<Sample>,
    new_maps: Vec<Mapping>,
    new_tasks: Vec<TaskEvent>,
    /// The user-stack unwinder, when samples carry stacks (`--call-graph dwarf`).
    unwinder: Option<UserUnwinder>,
}

impl<'a> Sink<'a> {
    pub fn new(writer: RecordingWriter, meta: Meta, stream: Option<&'a StreamSender>) -> Sink<'a> {
        Sink {
            writer,
            meta,
            stream,
            seen_maps: HashSet::new(),
            samples: Vec::new(),
            new_maps: Vec::new(),
            new_tasks: Vec::new(),
            unwinder: None,
        }
    }

    /// Unwind the user stacks samples carry with `u` (from here on, every mapping, fork
    /// and exec also goes to it).
    pub fn unwind_with(&mut self, u: UserUnwinder) {
        self.unwinder = Some(u);
    }

    /// One record from a ring buffer.
    pub fn record(&mut self, r: Record) {
        match r {
            Record::Sample(s) => self.sample(s),
            Record::StackSample(s) => self.stack_sample(*s),
            Record::Mmap(m) => self.mapping(m),
            Record::Task(t) => self.task(t),
            Record::Lost(n) => self.lost(n),
            Record::Throttle(on) => self.throttle(on),
        }
    }

    fn sample(&mut self, s: Sample) {
        self.meta.samples += 1;
        if self.stream.is_some() {
            self.samples.push(s.clone());
        }
        self.writer.push_sample(s);
    }

    /// A sample with its user stack: its user frames unwound onto its callchain, the stack
    /// dropped.
    fn stack_sample(&mut self, st: StackSample) {
        let StackSample { mut sample, regs, stack } = st;
        if let Some(u) = self.unwinder.as_mut() {
            u.extend(&mut sample, &UserStack { regs, stack: &stack });
        }
        self.sample(sample);
    }

    /// A mapping, kept once per (pid, start, path); new ones also go to the stream.
    pub fn mapping(&mut self, m: Mapping) {
        if self.seen_maps.insert((m.pid, m.start, m.path.clone())) {
            if let Some(u) = self.unwinder.as_mut() {
                u.map(&m);
            }
            if self.stream.is_some() {
                self.new_maps.push(m.clone());
            }
            self.writer.maps.push(m);
        }
    }

    pub fn task(&mut self, t: TaskEvent) {
        if let Some(u) = self.unwinder.as_mut() {
            match &t {
                TaskEvent::Fork { pid, ppid, .. } => u.fork(*ppid, *pid),
                TaskEvent::Comm { pid, exec: true, .. } => {
                    u.exec(*pid);
                    // The new program's mappings reach the unwinder even where they repeat
                    // the old one's (same address and path: no ASLR).
                    self.seen_maps.retain(|(p, _, _)| p != pid);
                }
                TaskEvent::Exit { pid, tid, .. } if pid == tid => u.exit(*pid),
                _ => {}
            }
        }
        if self.stream.is_some() {
            self.new_tasks.push(t.clone());
        }
        self.writer.tasks.push(t);
    }

    fn lost(&mut self, n: u64) {
        self.meta.lost = self.meta.lost.saturating_add(n);
        if let Some(st) = self.stream {
            st.send(Batch::Lost(n));
        }
    }

    fn throttle(&mut self, on: bool) {
        if on {
            self.meta.throttled += 1;
        } else {
            self.meta.unthrottled += 1;
        }
    }

    /// End of a drain pass: what it gathered goes to the stream, mappings first (the
    /// samples after them may fall in the new mappings).
    pub fn end_pass(&mut self) {
        let Some(st) = self.stream else { return };
        if !self.new_maps.is_empty() {
            st.send_reliably(Batch::Maps(std::mem::take(&mut self.new_maps)));
        }
        if !self.new_tasks.is_empty() {
            st.send_reliably(Batch::Tasks(std::mem::take(&mut self.new_tasks)));
        }
        if !self.samples.is_empty() {
            st.send(Batch::Samples(std::mem::take(&mut self.samples)));
        }
    }

    /// Counter rows taken at `time` (PMU counts, the forwarder's segment).
    pub fn counters(&mut self, time: u64, rows: Vec<CounterRow>) {
        if let Some(st) = self.stream {
            st.send(Batch::Counters { time, rows: rows.clone() });
        }
        for r in rows {
            self.writer.push_counter(r);
        }
    }

    /// A batch the consumer cannot do without (start, end), if there is a stream.
    pub fn send_reliably(&self, b: Batch) {
        if let Some(st) = self.stream {
            st.send_reliably(b);
        }
    }

    /// Write the parts gathered so far and meta.json as it stands.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.writer.flush()?;
        self.meta.stream_dropped = self.stream.map_or(0, |s| s.dropped());
        self.meta.sampling.unwinding = self.unwinder.as_ref().map(|u| u.stats.clone());
        self.writer.write_meta(&self.meta)
    }
}
