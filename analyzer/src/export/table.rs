//! One row per stack: CSV, JSON and Parquet.

use super::{Profile, Stack};
use crate::{Error, Result};
use serde::Serialize;
use std::io::Write;

impl Profile {
    /// One row per stack as CSV.
    pub fn csv(&self) -> String {
        let q = crate::csv_field;
        let mut s = String::from("thread,stage,leaf,dso,stack,samples,period\n");
        for st in &self.stacks {
            s.push_str(&format!(
                "{},{},{},{},{},{},{}\n",
                q(&st.thread),
                q(&st.stage),
                q(st.frames.last().map_or("", String::as_str)),
                q(&st.dso),
                q(&st.frames.join(";")),
                st.samples,
                st.period
            ));
        }
        s
    }

    /// The stacks as JSON.
    pub fn json(&self) -> Result<String> {
        #[derive(Serialize)]
        struct J<'a> {
            event: &'a str,
            unit: &'a str,
            stacks: &'a [Stack],
        }
        serde_json::to_string_pretty(&J { event: &self.event, unit: &self.unit, stacks: &self.stacks })
            .map_err(|e| Error::Export(e.to_string()))
    }

    /// One row per stack as Parquet (polars).
    pub fn parquet(&self, out: &mut impl Write) -> Result<()> {
        use polars::prelude::*;
        let st = &self.stacks;
        let mut df = DataFrame::new_infer_height(vec![
            Column::new("thread".into(), st.iter().map(|s| s.thread.as_str()).collect::<Vec<_>>()),
            Column::new("stage".into(), st.iter().map(|s| s.stage.as_str()).collect::<Vec<_>>()),
            Column::new(
                "leaf".into(),
                st.iter().map(|s| s.frames.last().map_or("", String::as_str)).collect::<Vec<_>>(),
            ),
            Column::new("dso".into(), st.iter().map(|s| s.dso.as_str()).collect::<Vec<_>>()),
            Column::new("stack".into(), st.iter().map(|s| s.frames.join(";")).collect::<Vec<_>>()),
            Column::new("samples".into(), st.iter().map(|s| s.samples).collect::<Vec<u64>>()),
            Column::new("period".into(), st.iter().map(|s| s.period).collect::<Vec<u64>>()),
        ])
        .map_err(|e| Error::Export(e.to_string()))?;
        ParquetWriter::new(out).finish(&mut df).map_err(|e| Error::Export(e.to_string()))?;
        Ok(())
    }
}
