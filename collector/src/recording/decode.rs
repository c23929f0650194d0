//! Decoding a Parquet file fwdscope did not necessarily write (a recording's part, a
//! sweep's results.parquet, a dataset's stacks.parquet) within a memory budget.
//!
//! [`super::part_check`] bounds what one file may claim against its own size; that does not
//! bound memory, because a file's values may be legitimately dense (a steady forwarder's
//! callchains repeat and compress tens of times) and because a recording has any number of
//! parts. So every read of such files runs under one [`DecodeBudget`]: each file is charged
//! what decoding it will take, estimated from its footer before a byte of it is decoded,
//! and a text column is charged again for the strings made from it, each checked against a
//! length limit. A read that would pass the budget is refused, naming the file and the
//! figures, instead of growing until the machine runs out of memory.

use polars::prelude::*;

const MIB: u64 = 1 << 20;

/// Smallest budget [`DecodeBudget::from_env`] sets: 256 MiB.
pub const MIN_BUDGET: u64 = 256 * MIB;

/// The environment variable that sets the budget in bytes (a `K`, `M` or `G` suffix
/// accepted, powers of 1024).
pub const BUDGET_VAR: &str = "FWDSCOPE_MEMORY_BUDGET";

/// How much memory one read (of a recording's samples or counters, of a sweep's results,
/// of a dataset's stack tables) may spend on decoded data.
#[derive(Debug, Clone)]
pub struct DecodeBudget {
    /// The most bytes the read may decode.
    pub limit: u64,
    /// Where the limit came from, in words.
    pub source: String,
    used: u64,
}

impl DecodeBudget {
    /// The budget of one read: `FWDSCOPE_MEMORY_BUDGET` when set (an unparsable value is
    /// ignored and said so in [`DecodeBudget::source`]); otherwise a quarter of the memory
    /// available (MemAvailable in /proc/meminfo) when the read begins; never below
    /// [`MIN_BUDGET`]. A quarter, because what the reader makes of the decoded columns
    /// (samples with their callchains, tables) takes about as much again.
    pub fn from_env() -> DecodeBudget {
        let mut note = String::new();
        if let Ok(v) = std::env::var(BUDGET_VAR) {
            match parse_bytes(&v) {
                Some(n) => return DecodeBudget::with_limit(n, format!("{BUDGET_VAR}={v}")),
                None => note = format!("; {BUDGET_VAR}={v:?} is no size (expected bytes, or a number with K, M or G)"),
            }
        }
        match mem_available() {
            Some(avail) => DecodeBudget::with_limit(
                (avail / 4).max(MIN_BUDGET),
                format!("a quarter of the {} available, at least {}{note}", human(avail), human(MIN_BUDGET)),
            ),
            None => DecodeBudget::with_limit(MIN_BUDGET, format!("/proc/meminfo unreadable, so the minimum{note}")),
        }
    }

    /// A budget of `limit` bytes; `source` says where it came from.
    pub fn with_limit(limit: u64, source: impl Into<String>) -> DecodeBudget {
        DecodeBudget { limit, source: source.into(), used: 0 }
    }

    /// Bytes charged so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Charge `bytes` for `what`; refused (nothing charged) when that passes the limit.
    pub fn charge(&mut self, bytes: u64, what: &str) -> std::result::Result<(), String> {
        let total = self.used.saturating_add(bytes);
        if total > self.limit {
            return Err(format!(
                "{what} would take about {}, bringing this read to {}: over its memory budget of {} ({}); set {BUDGET_VAR} \
                 (bytes, or with K, M or G) to allow more, or read less of it",
                human(bytes),
                human(total),
                human(self.limit),
                self.source
            ));
        }
        self.used = total;
        Ok(())
    }
}

/// `bytes` as B, KiB, MiB or GiB.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else if bytes >= MIB {
        format!("{:.1} MiB", b / MIB as f64)
    } else if bytes >= 1024 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

fn parse_bytes(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mul) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&v[..i], 1 << 20),
        (i, 'g' | 'G') => (&v[..i], 1 << 30),
        _ => (v, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul).filter(|n| *n > 0)
}

fn mem_available() -> Option<u64> {
    // /proc/meminfo is the kernel's, not input: read directly (the checked opener refuses
    // procfs for files named by a recording).
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Check `bytes` (a whole Parquet file) with [`super::part_check::check_part`], charge
/// `budget` its estimated decoded size, then decode it (only `columns`, when given). A
/// reader panic on malformed metadata becomes an error too. Errors say what failed,
/// without the file's name (the caller has it).
pub fn decode(
    bytes: Vec<u8>,
    columns: Option<&[&str]>,
    budget: &mut DecodeBudget,
) -> std::result::Result<DataFrame, DecodeError> {
    let estimate = super::part_check::check_part(&bytes).map_err(|e| DecodeError::Corrupt(format!("corrupt: {e}")))?;
    budget.charge(estimate, "decoding it").map_err(DecodeError::Budget)?;
    let cols = columns.map(|c| c.iter().map(|c| c.to_string()).collect::<Vec<_>>());
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ParquetReader::new(std::io::Cursor::new(bytes)).with_columns(cols).finish()
    }))
    .map_err(|_| DecodeError::Corrupt("malformed Parquet: the reader failed on its metadata".into()))?
    .map_err(|e| DecodeError::Corrupt(e.to_string()))
}

/// Why [`decode`] or [`texts`] refused a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The file is malformed (or a text value too long): this file cannot be read.
    Corrupt(String),
    /// Reading it would pass the read's memory budget: the read as a whole stops.
    Budget(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Corrupt(m) | DecodeError::Budget(m) => f.write_str(m),
        }
    }
}

/// Text column `name` of `df` as strings, each at most `max_len` bytes (a longer one is
/// refused naming its row), their bytes charged to `budget`. One long value repeated by a
/// dictionary costs the file a few bytes and every copy made of it its full length: a
/// 1 MiB setting label repeated in each row of a 500 KB results file once took gigabytes.
pub fn texts(
    df: &DataFrame,
    name: &str,
    max_len: usize,
    budget: &mut DecodeBudget,
) -> std::result::Result<Vec<String>, DecodeError> {
    let col = df.column(name).map_err(|_| DecodeError::Corrupt(format!("no column `{name}`")))?;
    let ca = col.str().map_err(|_| DecodeError::Corrupt(format!("column `{name}` is not text")))?;
    let mut total = 0u64;
    for (row, v) in ca.iter().enumerate() {
        let len = v.map_or(0, str::len);
        if len > max_len {
            return Err(DecodeError::Corrupt(format!(
                "column `{name}`, row {row}: a value of {len} bytes, expected at most {max_len}"
            )));
        }
        total = total.saturating_add(len as u64 + std::mem::size_of::<String>() as u64);
    }
    budget.charge(total, &format!("the text of column `{name}`")).map_err(DecodeError::Budget)?;
    Ok(ca.iter().map(|v| v.unwrap_or("").to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parquet(df: &mut DataFrame) -> Vec<u8> {
        let mut buf = Vec::new();
        ParquetWriter::new(&mut buf).finish(df).expect("write");
        buf
    }

    #[test]
    fn sizes_parse_with_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_bytes("1048576"), Some(1 << 20));
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("2g"), Some(2 << 30));
        assert_eq!(parse_bytes(" 64 K "), Some(64 << 10));
        for bad in ["", "0", "-1", "1.5G", "lots", "99999999999999999999G"] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_budget_refuses_what_passes_it_and_charges_nothing_then() {
        let mut b = DecodeBudget::with_limit(1000, "a test");
        b.charge(600, "part 1").expect("fits");
        let e = b.charge(500, "part 2").expect_err("passes");
        assert!(e.starts_with("part 2 would take about 500 B, bringing this read to 1.1 KiB"), "{e}");
        assert!(e.contains("memory budget of 1000 B (a test)") && e.contains(BUDGET_VAR), "{e}");
        assert_eq!(b.used(), 600);
        b.charge(400, "part 3").expect("fits exactly");
    }

    /// The estimate is at least the decoded column bytes: 100k rows of two u64 columns and
    /// a list of 4 u64 per row decode to 100k * (8 + 8) + 400k * 8 bytes of values.
    #[test]
    fn a_files_estimate_covers_its_decoded_values() {
        let rows = 100_000u64;
        let mut df = df!(
            "time" => (0..rows).collect::<Vec<_>>(),
            "ip" => (0..rows).map(|i| i % 7).collect::<Vec<_>>(),
        )
        .expect("frame");
        let chains: Vec<Series> = (0..rows).map(|i| Series::new("".into(), vec![i, i + 1, i + 2, i + 3])).collect();
        df.with_column(Series::new("callchain".into(), chains).into()).expect("list");
        let bytes = parquet(&mut df);
        let est = crate::recording::part_check::check_part(&bytes).expect("sound");
        assert!(est >= rows * 16 + rows * 4 * 8, "estimate {est}");
        // And it is charged before decoding: a budget below it refuses.
        let mut small = DecodeBudget::with_limit(est - 1, "a test");
        assert!(matches!(decode(bytes.clone(), None, &mut small), Err(DecodeError::Budget(_))));
        assert_eq!(small.used(), 0);
        let mut enough = DecodeBudget::with_limit(est, "a test");
        assert_eq!(decode(bytes, None, &mut enough).expect("decodes").height(), rows as usize);
    }

    /// The hostile results file: one long label, dictionary-encoded in every row.
    #[test]
    fn a_long_text_value_is_refused_before_it_is_copied() {
        let rows = 2000;
        let mut df = df!("setting" => vec!["x".repeat(1 << 20); rows]).expect("frame");
        let bytes = parquet(&mut df);
        assert!(bytes.len() < 200_000, "dictionary-encoded: {} bytes", bytes.len());
        let mut b = DecodeBudget::with_limit(1 << 30, "a test");
        let df = decode(bytes, None, &mut b).expect("decodes (views of one dictionary entry)");
        let e = texts(&df, "setting", 4096, &mut b).expect_err("refused");
        assert_eq!(
            e,
            DecodeError::Corrupt("column `setting`, row 0: a value of 1048576 bytes, expected at most 4096".into())
        );
        // Short values within the budget come back as they were.
        let mut df = df!("setting" => ["a", "bb", ""]).expect("frame");
        let df = decode(parquet(&mut df), None, &mut b).expect("decodes");
        assert_eq!(texts(&df, "setting", 4096, &mut b).expect("read"), ["a", "bb", ""]);
    }
}
