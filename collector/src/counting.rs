//! Counting events (the stat set by default) on a set of scopes: each event is probed alone
//! first, so one the machine cannot count is reported rather than fatal, then the countable
//! ones are opened as one group per scope (scheduled together, read in one call, scaled by
//! the group's time enabled over time running). Used by `record` (counter rows) and `stat`.

use crate::events::EventId;
use crate::perf_abi::{CountingEvent, CountingGroup, Scope};
use crate::recording::CountingInfo;
pub use crate::recording::COUNTED;
use crate::{Error, Result};

/// Counting groups opened, one per scope.
pub type OpenCounting = Vec<CountingGroup>;

/// Probe each counting event alone (events the machine cannot count are reported, not
/// fatal), then open the countable ones as one group per scope.
pub fn open_counting(events: &[EventId], scopes: &[Scope]) -> Result<(OpenCounting, Vec<CountingInfo>)> {
    let mut info = Vec::new();
    let mut ok = Vec::new();
    let probe = scopes.first().copied().ok_or_else(|| Error::Config("nothing to count on".into()))?;
    for &ev in events {
        match CountingEvent::open(ev, &probe) {
            Ok(_) => {
                info.push(CountingInfo { event: ev.name().into(), status: COUNTED.into() });
                ok.push(ev);
            }
            Err(Error::Unsupported { .. }) => {
                info.push(CountingInfo { event: ev.name().into(), status: "not supported".into() })
            }
            Err(e) => return Err(e),
        }
    }
    if ok.is_empty() {
        return Ok((Vec::new(), info));
    }
    let groups = scopes.iter().map(|s| CountingGroup::open(&ok, s)).collect::<Result<Vec<_>>>()?;
    Ok((groups, info))
}

/// Each counted event summed over the groups (scopes).
pub fn read_counting(open: &mut [CountingGroup]) -> Result<Vec<(EventId, u64)>> {
    let mut sums: Vec<(EventId, u64)> = Vec::new();
    for g in open.iter_mut() {
        for (ev, v) in g.read_scaled()? {
            match sums.iter_mut().find(|(e, _)| *e == ev) {
                Some(slot) => slot.1 += v,
                None => sums.push((ev, v)),
            }
        }
    }
    Ok(sums)
}

/// Enable every group.
pub fn enable(open: &mut [CountingGroup]) -> Result<()> {
    open.iter_mut().try_for_each(|g| g.enable())
}
