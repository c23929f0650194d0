//! Event names as perf spells them, and what each one is. Pure data: no system calls here
//! (those are in [`crate::perf_abi`]).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// Which kind of counter an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A hardware PMU event (PERF_TYPE_HARDWARE).
    Hardware,
    /// A hardware cache event (PERF_TYPE_HW_CACHE).
    HwCache,
    /// A software event (PERF_TYPE_SOFTWARE): always available.
    Software,
}

/// An event the collector can open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventId {
    Cycles,
    Instructions,
    CacheReferences,
    CacheMisses,
    Branches,
    BranchMisses,
    LlcLoadMisses,
    DtlbLoadMisses,
    TaskClock,
    CpuClock,
    PageFaults,
    ContextSwitches,
}

/// perf's names for each event (the first is the canonical one).
const NAMES: &[(EventId, &[&str])] = &[
    (EventId::Cycles, &["cycles", "cpu-cycles"]),
    (EventId::Instructions, &["instructions"]),
    (EventId::CacheReferences, &["cache-references"]),
    (EventId::CacheMisses, &["cache-misses"]),
    (EventId::Branches, &["branches", "branch-instructions"]),
    (EventId::BranchMisses, &["branch-misses"]),
    (EventId::LlcLoadMisses, &["LLC-load-misses"]),
    (EventId::DtlbLoadMisses, &["dTLB-load-misses"]),
    (EventId::TaskClock, &["task-clock"]),
    (EventId::CpuClock, &["cpu-clock"]),
    (EventId::PageFaults, &["page-faults", "faults"]),
    (EventId::ContextSwitches, &["context-switches", "cs"]),
];

impl EventId {
    /// Parse a perf event name (`cycles`, `LLC-load-misses`, `cpu-clock`, ...). A `:u` or
    /// `:k` modifier is accepted and ignored here (the target decides user/kernel).
    pub fn parse(name: &str) -> Result<EventId> {
        let base = name.split(':').next().unwrap_or(name);
        NAMES
            .iter()
            .find(|(_, ns)| ns.contains(&base))
            .map(|(id, _)| *id)
            .ok_or_else(|| Error::UnknownEvent(name.to_string(), Self::all_names().join(", ")))
    }

    /// A comma-separated list (`-e cycles,instructions`).
    pub fn parse_list(list: &str) -> Result<Vec<EventId>> {
        list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(EventId::parse).collect()
    }

    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(id, _)| *id == self).map(|(_, ns)| ns[0]).unwrap_or("?")
    }

    pub fn kind(self) -> EventKind {
        match self {
            EventId::Cycles
            | EventId::Instructions
            | EventId::CacheReferences
            | EventId::CacheMisses
            | EventId::Branches
            | EventId::BranchMisses => EventKind::Hardware,
            EventId::LlcLoadMisses | EventId::DtlbLoadMisses => EventKind::HwCache,
            EventId::TaskClock | EventId::CpuClock | EventId::PageFaults | EventId::ContextSwitches => {
                EventKind::Software
            }
        }
    }

    /// Whether the count is nanoseconds (the clock events) rather than occurrences.
    pub fn is_time(self) -> bool {
        matches!(self, EventId::TaskClock | EventId::CpuClock)
    }

    pub fn all_names() -> Vec<&'static str> {
        NAMES.iter().flat_map(|(_, ns)| ns.iter().copied()).collect()
    }

    /// The counting set `stat` and `record` open by default.
    pub const DEFAULT_COUNTING: [EventId; 8] = [
        EventId::Cycles,
        EventId::Instructions,
        EventId::CacheReferences,
        EventId::CacheMisses,
        EventId::BranchMisses,
        EventId::LlcLoadMisses,
        EventId::DtlbLoadMisses,
        EventId::TaskClock,
    ];
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a sampled event (by the name a recording or perf.data gives it, perf's
/// spelling, modifiers allowed) counts time: its periods are nanoseconds (`cpu-clock`,
/// `task-clock`); any other event's periods are counts of that event.
pub fn is_clock(event: &str) -> bool {
    matches!(EventId::parse(event), Ok(EventId::CpuClock | EventId::TaskClock))
}

/// The unit of a sampled event's periods as tables print it: `ns` for clock events, else
/// the event's own name (cycles per packet, instructions per packet...).
pub fn period_unit(event: &str) -> String {
    if is_clock(event) {
        "ns".to_string()
    } else {
        event.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_events_are_in_nanoseconds() {
        assert!(is_clock("cpu-clock") && is_clock("task-clock:u") && !is_clock("cycles") && !is_clock("clock"));
        assert_eq!(period_unit("cpu-clock"), "ns");
        assert_eq!(period_unit("cycles"), "cycles");
    }

    #[test]
    fn perf_names_round_trip() {
        for name in EventId::all_names() {
            let id = EventId::parse(name).unwrap();
            assert_eq!(EventId::parse(id.name()).unwrap(), id);
        }
        assert_eq!(EventId::parse("cpu-cycles").unwrap(), EventId::Cycles);
        assert_eq!(EventId::parse("cycles:u").unwrap(), EventId::Cycles);
        assert_eq!(
            EventId::parse_list("cycles, instructions,task-clock").unwrap(),
            vec![EventId::Cycles, EventId::Instructions, EventId::TaskClock]
        );
    }

    #[test]
    fn unknown_event_lists_known_ones() {
        let e = EventId::parse("cycels").unwrap_err().to_string();
        assert!(e.contains("unknown event `cycels`") && e.contains("cpu-clock"), "{e}");
    }
}
