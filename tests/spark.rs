//! The Spark query docs/datasets.md shows, run with pyspark on the fixture dataset: per-host stage
//! samples equal `fwdscope report --by host`. Skips, saying why, without Java or pyspark.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn spark_reads_the_dataset_as_fwdscope_reports_it() {
    if Command::new("java").arg("-version").output().map_or(true, |o| !o.status.success()) {
        println!("SKIP: no Java runtime, so no Spark: the Spark query of docs/datasets.md is not run");
        return;
    }
    if Command::new("python3").args(["-c", "import pyspark"]).output().map_or(true, |o| !o.status.success()) {
        println!(
            "SKIP: pyspark is not installed (pip install pyspark): the Spark query of docs/datasets.md is not run"
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ds = root.join("fixtures/notebooks/dataset");
    let out = Command::new("python3").arg(root.join("scripts/spark-dataset.py")).arg(&ds).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut spark: Vec<(String, String, u64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            (v["host"].as_str().unwrap().into(), v["stage"].as_str().unwrap().into(), v["samples"].as_u64().unwrap())
        })
        .collect();
    spark.sort();
    let rep = common::run(&["report", "--by", "host", "--format", "json", "-i", &ds.display().to_string()]);
    let v: serde_json::Value = serde_json::from_slice(&rep.stdout).unwrap();
    let mut want = Vec::new();
    for g in v["groups"].as_array().unwrap() {
        for (s, c) in v["stages"].as_array().unwrap().iter().zip(g["shares"].as_array().unwrap()) {
            if c[0].as_u64().unwrap() > 0 {
                want.push((
                    g["key"].as_str().unwrap().to_string(),
                    s.as_str().unwrap().to_string(),
                    c[0].as_u64().unwrap(),
                ));
            }
        }
    }
    want.sort();
    assert_eq!(spark, want);
}
