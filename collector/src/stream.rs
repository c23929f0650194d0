//! The live stream: sample batches and counter snapshots delivered to another thread (the
//! TUI) through a bounded channel. When the consumer falls behind, whole batches are
//! dropped and counted, so the collector's memory stays bounded and the recording on disk
//! is never affected.

use crate::recording::{CounterRow, CountingInfo, SamplingInfo};
use crate::records::{Mapping, Sample};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

/// What the stream carries.
// `Started` is large and sent once per run: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Batch {
    /// Sent once, when sampling has started: the events actually used (after any fallback),
    /// and the target's PID (none system-wide).
    Started { sampling: SamplingInfo, counting: Vec<CountingInfo>, target_pid: Option<i32> },
    /// File mappings seen for the first time (needed to symbolize the samples that follow).
    Maps(Vec<Mapping>),
    /// Thread events (COMM, FORK, EXIT) drained in one pass, sent before that pass's
    /// samples: a forwarder's start-up ends at its first worker's FORK.
    Tasks(Vec<crate::records::TaskEvent>),
    /// Samples drained in one pass over the ring buffers.
    Samples(Vec<Sample>),
    /// Cumulative counters at one instant (PMU and forwarder).
    Counters { time: u64, rows: Vec<CounterRow> },
    /// Records the kernel reported lost since the last batch.
    Lost(u64),
    /// The collection ended, and why.
    Ended(String),
}

/// The collector's end of the stream.
#[derive(Clone)]
pub struct StreamSender {
    tx: SyncSender<Batch>,
    dropped: Arc<AtomicU64>,
}

/// A bounded stream holding at most `capacity` batches in flight.
pub fn channel(capacity: usize) -> (StreamSender, Receiver<Batch>) {
    let (tx, rx) = sync_channel(capacity.max(1));
    (StreamSender { tx, dropped: Arc::default() }, rx)
}

impl StreamSender {
    /// Offer a batch; if the consumer is behind, drop it and count it. Never blocks.
    pub fn send(&self, b: Batch) {
        match self.tx.try_send(b) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Offer a batch the consumer cannot do without (mappings, start and end): wait up to
    /// 100 ms for room before dropping it (and counting it).
    pub fn send_reliably(&self, mut b: Batch) {
        for _ in 0..50 {
            match self.tx.try_send(b) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => return,
                Err(TrySendError::Full(back)) => b = back,
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Batches dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_consumer_costs_dropped_batches_not_memory() {
        let (tx, rx) = channel(4);
        for i in 0..100 {
            tx.send(Batch::Lost(i));
        }
        assert_eq!(tx.dropped(), 96);
        let got: Vec<u64> = rx.try_iter().map(|b| if let Batch::Lost(n) = b { n } else { u64::MAX }).collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
        tx.send(Batch::Lost(7));
        assert!(matches!(rx.try_recv(), Ok(Batch::Lost(7))));
    }
}
