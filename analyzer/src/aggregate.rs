//! Sample aggregation in polars: samples (a recording's `samples.parquet` parts, or samples
//! imported from perf.data) are grouped by (pid, tid, kernel, ip, callchain) with their
//! sample count and period sum, so symbolization and stage rules run once per distinct
//! stack rather than once per sample.

use crate::{Error, Result};
use polars::prelude::*;

/// One distinct stack and what it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub pid: u32,
    pub tid: u32,
    pub kernel: bool,
    pub ip: u64,
    /// Return addresses, innermost first (perf's first entry is the sample IP itself).
    pub callchain: Vec<u64>,
    pub samples: u64,
    pub period: u64,
}

fn err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Aggregate(format!("{what}: {e}"))
}

/// Group a samples frame (the columns of `samples.parquet`).
pub fn group(df: DataFrame) -> Result<Vec<Group>> {
    Ok(group_keyed(df, None)?.into_iter().map(|(_, g)| g).collect())
}

/// Group a samples frame that carries a `window` column (u32) as well: distinct stacks per
/// window, with the window each belongs to.
pub fn group_by_window(df: DataFrame) -> Result<Vec<(u32, Group)>> {
    group_keyed(df, Some("window"))
}

fn group_keyed(df: DataFrame, extra: Option<&str>) -> Result<Vec<(u32, Group)>> {
    let mut keys = vec![col("pid"), col("tid"), col("kernel"), col("ip"), col("callchain")];
    if let Some(k) = extra {
        keys.push(col(k));
    }
    let out = df
        .lazy()
        .group_by(keys)
        .agg([len().cast(DataType::UInt64).alias("samples"), col("period").sum().alias("period")])
        .collect()
        .map_err(|e| err("grouping samples", e))?;
    let u64s = |name: &str| -> Result<Vec<u64>> {
        Ok(out
            .column(name)
            .and_then(|c| c.u64().cloned())
            .map_err(|e| err(name, e))?
            .iter()
            .map(|v| v.unwrap_or(0))
            .collect())
    };
    let u32s = |name: &str| -> Result<Vec<u32>> {
        Ok(out
            .column(name)
            .and_then(|c| c.u32().cloned())
            .map_err(|e| err(name, e))?
            .iter()
            .map(|v| v.unwrap_or(0))
            .collect())
    };
    let (ip, samples, period) = (u64s("ip")?, u64s("samples")?, u64s("period")?);
    let (pid, tid) = (u32s("pid")?, u32s("tid")?);
    let keyed = match extra {
        Some(k) => u32s(k)?,
        None => vec![0; ip.len()],
    };
    let kernel: Vec<bool> = out
        .column("kernel")
        .and_then(|c| c.bool().cloned())
        .map_err(|e| err("kernel", e))?
        .iter()
        .map(|v| v.unwrap_or(false))
        .collect();
    let chains = out.column("callchain").and_then(|c| c.list().cloned()).map_err(|e| err("callchain", e))?;
    let mut groups = Vec::with_capacity(ip.len());
    for (i, chain) in chains.amortized_iter().enumerate() {
        let callchain = match chain {
            Some(s) => s.as_ref().u64().map(|c| c.iter().flatten().collect()).unwrap_or_default(),
            None => Vec::new(),
        };
        let g = Group {
            pid: pid[i],
            tid: tid[i],
            kernel: kernel[i],
            ip: ip[i],
            callchain,
            samples: samples[i],
            period: period[i],
        };
        groups.push((keyed[i], g));
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use collector::records::Sample;

    fn s(tid: u32, ip: u64, period: u64, chain: &[u64]) -> Sample {
        Sample { time: 0, pid: 1, tid, cpu: 0, ip, period, kernel: false, callchain: chain.to_vec() }
    }

    #[test]
    fn groups_by_stack_and_sums_periods() {
        let samples = vec![
            s(1, 0x10, 5, &[0x10, 0x20]),
            s(1, 0x10, 7, &[0x10, 0x20]),
            s(1, 0x10, 1, &[0x10, 0x30]), // same ip, other caller
            s(2, 0x10, 2, &[0x10, 0x20]), // other thread
            s(1, 0x40, 3, &[]),
        ];
        let df = collector::recording::samples_frame(&samples).unwrap();
        let mut g = group(df).unwrap();
        g.sort_by(|a, b| (a.tid, a.ip, &a.callchain).cmp(&(b.tid, b.ip, &b.callchain)));
        let got: Vec<(u32, u64, Vec<u64>, u64, u64)> =
            g.into_iter().map(|g| (g.tid, g.ip, g.callchain, g.samples, g.period)).collect();
        assert_eq!(
            got,
            vec![
                (1, 0x10, vec![0x10, 0x20], 2, 12),
                (1, 0x10, vec![0x10, 0x30], 1, 1),
                (1, 0x40, vec![], 1, 3),
                (2, 0x10, vec![0x10, 0x20], 1, 2),
            ]
        );
    }
}
