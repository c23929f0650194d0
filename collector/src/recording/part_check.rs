//! Structural checks of a Parquet part before polars decodes it.
//!
//! polars trusts the counts in a Parquet file: a corrupt page header that claims 2^61
//! values makes its decoder reserve that much memory, and a failed allocation aborts the
//! process (no panic to catch). A recording is user input, so every count that sizes an
//! allocation is checked here first, against the file itself:
//!
//! - the footer parses with a bounded Thrift reader, and every column chunk's byte range
//!   lies inside the file;
//! - the row groups' rows add up to the footer's total;
//! - every row, column-chunk value and page value count is at most
//!   [`MAX_VALUES_PER_BYTE`] per byte of file (the writer's parts hold a distinct `time`
//!   and `ip` per row, so a real part needs far more than that);
//! - each page header parses, lies inside its chunk and declares at most
//!   [`MAX_PAGE_BYTES`] uncompressed; a chunk's data pages add up to its value count, and a
//!   non-repeated column holds exactly one value per row.
//!
//! The checks read only footers and page headers, never page data (microseconds per part).
//! They also estimate what decoding the file will take in memory, which
//! [`super::decode`] charges to the read's budget.

use polars_parquet_format::thrift::protocol::TCompactInputProtocol;
use polars_parquet_format::{FileMetaData, PageHeader, PageType, Type};
use std::io::Cursor;

/// Largest value count accepted per byte of file (rows, chunk values, page values).
pub const MAX_VALUES_PER_BYTE: u64 = 8;
/// Largest uncompressed page accepted (polars writes pages of about 1 MiB).
pub const MAX_PAGE_BYTES: u64 = 1 << 30;
/// Largest page header accepted.
const MAX_HEADER_BYTES: usize = 1 << 20;
const MAGIC: &[u8; 4] = b"PAR1";

/// Parse the footer with the bounded Thrift reader, whose list lengths are capped by an
/// allocation budget (polars' own footer decoder trusts list lengths, and a corrupt one made
/// it reserve 131 GB).
fn footer(bytes: &[u8]) -> std::result::Result<(FileMetaData, u64), String> {
    let len = bytes.len();
    if len < 12 || &bytes[..4] != MAGIC || &bytes[len - 4..] != MAGIC {
        return Err(format!("not a Parquet file ({len} bytes; expected PAR1 at both ends)"));
    }
    let mut n = [0u8; 4];
    n.copy_from_slice(&bytes[len - 8..len - 4]);
    let flen = u32::from_le_bytes(n) as usize;
    if flen > len - 12 {
        return Err(format!("footer length {flen} larger than the file of {len} bytes"));
    }
    let at = len - 8 - flen;
    // The reader's budget counts allocations (8 per list element, 1 per string byte, 2 per
    // field): 16 per footer byte admits every real footer, and no list longer than the
    // footer could hold.
    let mut prot = TCompactInputProtocol::new(&bytes[at..len - 8], flen.saturating_mul(16).saturating_add(4096));
    let meta = FileMetaData::read_from_in_protocol(&mut prot).map_err(|e| format!("footer at offset {at}: {e}"))?;
    // The column data lies between the leading magic and the footer.
    Ok((meta, at.saturating_sub(4) as u64))
}

/// Bytes one decoded value of a column of physical type `t` takes: its width, or for
/// byte arrays the 16-byte view polars keeps per value (the bytes themselves are counted
/// from the pages).
fn value_width(t: Type) -> u64 {
    match t {
        Type::BOOLEAN => 1,
        Type::INT32 | Type::FLOAT => 4,
        Type::INT64 | Type::DOUBLE => 8,
        Type::INT96 => 12,
        _ => 16,
    }
}

/// Check `bytes` (a whole part file); the error says which row group, column and page
/// failed and at which file offset. On success, the estimated bytes decoding it takes:
/// per column chunk, its values times their decoded width, plus its uncompressed page
/// bytes for byte arrays, plus 8 bytes of offsets per row for a list column.
pub fn check_part(bytes: &[u8]) -> std::result::Result<u64, String> {
    let (meta, data) = footer(bytes)?;
    let len = bytes.len() as u64;
    // Counted against the column data alone: a footer padded with metadata adds bytes to
    // the file, not room for values (a 59 MB file of padding claimed 100M rows).
    let limit = data.saturating_mul(MAX_VALUES_PER_BYTE).saturating_add(1024);
    let count = |what: &str, n: i64| -> std::result::Result<u64, String> {
        let n = u64::try_from(n).map_err(|_| format!("{what}: negative count {n}"))?;
        if n > limit {
            return Err(format!(
                "{what} claims {n} values; a file of {len} bytes with {data} bytes of column data holds at most {limit}"
            ));
        }
        Ok(n)
    };
    let total = count("footer", meta.num_rows)?;
    let mut rows_total = 0u64;
    let mut estimate = 0u64;
    for (g, rg) in meta.row_groups.iter().enumerate() {
        let rows = count(&format!("row group {g}"), rg.num_rows)?;
        rows_total = rows_total.saturating_add(rows);
        for (c, chunk) in rg.columns.iter().enumerate() {
            let Some(cm) = chunk.meta_data.as_ref() else {
                return Err(format!("row group {g}, column {c}: no column metadata"));
            };
            let name = cm.path_in_schema.join(".");
            let at = |what: &str| format!("row group {g}, column `{name}`, {what}");
            let values = count(&at("chunk"), cm.num_values)?;
            // A top-level column holds one value per row; a list's leaf (a longer path) may
            // hold any number.
            if cm.path_in_schema.len() <= 1 && values != rows {
                return Err(at(&format!("{values} values for {rows} rows")));
            }
            let start = cm.dictionary_page_offset.unwrap_or(cm.data_page_offset);
            let (Ok(start), Ok(size)) = (u64::try_from(start), u64::try_from(cm.total_compressed_size)) else {
                return Err(at("negative offset or size"));
            };
            let end = start.saturating_add(size);
            if end > len {
                return Err(at(&format!("byte range {start}..{end} outside the file of {len} bytes")));
            }
            check_pages(bytes, start, end, values, limit).map_err(|e| at(&e))?;
            let mut cost = values.saturating_mul(value_width(cm.type_));
            if !matches!(cm.type_, Type::BOOLEAN | Type::INT32 | Type::FLOAT | Type::INT64 | Type::DOUBLE | Type::INT96)
            {
                cost = cost.saturating_add(u64::try_from(cm.total_uncompressed_size).unwrap_or(u64::MAX));
            }
            if cm.path_in_schema.len() > 1 {
                cost = cost.saturating_add(rows.saturating_mul(8));
            }
            estimate = estimate.saturating_add(cost);
        }
    }
    if rows_total != total {
        return Err(format!("footer: {total} rows, but the row groups hold {rows_total}"));
    }
    Ok(estimate)
}

/// Walk the page headers of one column chunk in `bytes[start..end]`.
fn check_pages(bytes: &[u8], start: u64, end: u64, values: u64, limit: u64) -> std::result::Result<(), String> {
    let mut pos = start;
    let mut seen = 0u64;
    while seen < values {
        if pos >= end {
            return Err(format!("pages hold {seen} of the chunk's {values} values (offset {pos})"));
        }
        let slice = &bytes[pos as usize..end as usize];
        let mut cursor = Cursor::new(slice);
        let header = {
            let mut prot = TCompactInputProtocol::new(&mut cursor, MAX_HEADER_BYTES.min(slice.len()));
            PageHeader::read_from_in_protocol(&mut prot).map_err(|e| format!("page header at offset {pos}: {e}"))?
        };
        let header_len = cursor.position();
        let page_at = pos;
        let bad = |what: &str| format!("page at offset {page_at}: {what}");
        let compressed = u64::try_from(header.compressed_page_size).map_err(|_| bad("negative compressed size"))?;
        let uncompressed =
            u64::try_from(header.uncompressed_page_size).map_err(|_| bad("negative uncompressed size"))?;
        if uncompressed > MAX_PAGE_BYTES {
            return Err(bad(&format!("uncompressed size {uncompressed} over the limit of {MAX_PAGE_BYTES}")));
        }
        let page_values = match header.type_ {
            PageType::DATA_PAGE => header.data_page_header.as_ref().map(|h| h.num_values),
            PageType::DATA_PAGE_V2 => header.data_page_header_v2.as_ref().map(|h| h.num_values),
            PageType::DICTIONARY_PAGE => {
                let n = header
                    .dictionary_page_header
                    .as_ref()
                    .map(|h| h.num_values)
                    .ok_or_else(|| bad("no dictionary header"))?;
                let n = u64::try_from(n).map_err(|_| bad("negative dictionary size"))?;
                // Every dictionary entry takes at least one byte.
                if n > uncompressed.max(1) {
                    return Err(bad(&format!("{n} dictionary entries in {uncompressed} bytes")));
                }
                Some(0)
            }
            _ => Some(0),
        }
        .ok_or_else(|| bad("data page without its header"))?;
        let page_values = u64::try_from(page_values).map_err(|_| bad("negative value count"))?;
        if page_values > limit {
            return Err(bad(&format!("{page_values} values, over the limit of {limit}")));
        }
        seen = seen.saturating_add(page_values);
        if seen > values {
            return Err(bad(&format!("pages hold {seen} values, the chunk only {values}")));
        }
        pos = pos.saturating_add(header_len).saturating_add(compressed);
        if pos > end {
            return Err(bad(&format!("page runs past the chunk's end at offset {end}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use polars::prelude::*;

    fn part(rows: usize) -> Vec<u8> {
        let mut df = df!(
            "time" => (0..rows as u64).collect::<Vec<_>>(),
            "ip" => (0..rows as u64).map(|i| i * 7919).collect::<Vec<_>>(),
        )
        .expect("frame");
        let mut buf = Vec::new();
        ParquetWriter::new(&mut buf).finish(&mut df).expect("write");
        buf
    }

    #[test]
    fn accepts_what_polars_writes() {
        for rows in [0, 1, 1000, 200_000] {
            check_part(&part(rows)).unwrap_or_else(|e| panic!("{rows} rows: {e}"));
        }
    }

    #[test]
    fn refuses_truncations_and_flipped_bytes_without_panicking() {
        let good = part(5000);
        for cut in [0, 4, 8, good.len() / 2, good.len() - 9, good.len() - 1] {
            assert!(check_part(&good[..cut]).is_err(), "cut at {cut} accepted");
        }
        // Every single-byte change is either refused here or decodes without aborting.
        let mut refused = 0;
        for i in (0..good.len()).step_by(7) {
            let mut bad = good.clone();
            bad[i] ^= 0xff;
            if check_part(&bad).is_err() {
                refused += 1;
            } else {
                // Accepted: polars may fail or panic (caught), but must not abort.
                let _ = std::panic::catch_unwind(|| ParquetReader::new(std::io::Cursor::new(bad)).finish());
            }
        }
        assert!(refused > 0);
    }

    /// A hostile finding: a part of millions of rows of one repeated value (a few kB of
    /// column data) with its footer padded by megabytes of metadata, so that rows per byte
    /// of *file* looked plausible; decoded, it took gigabytes.
    #[test]
    fn refuses_a_footer_padded_to_hide_a_decompression_bomb() {
        use polars_parquet_format::thrift::protocol::TCompactOutputProtocol;
        let rows = 2_000_000usize;
        let mut df = df!("time" => vec![7u64; rows]).expect("frame");
        let mut bytes = Vec::new();
        ParquetWriter::new(&mut bytes).finish(&mut df).expect("write");
        let e = check_part(&bytes).expect_err("unpadded: already refused");
        assert!(e.contains("claims 2000000 values"), "{e}");
        // Pad the footer: the same metadata plus 4 MB of key-value padding.
        let (mut meta, data) = footer(&bytes).expect("footer");
        meta.key_value_metadata =
            Some(vec![polars_parquet_format::KeyValue { key: "pad".into(), value: Some("x".repeat(4 << 20)) }]);
        let mut foot = Vec::new();
        meta.write_to_out_protocol(&mut TCompactOutputProtocol::new(&mut foot)).expect("encode");
        let mut padded = bytes[..4 + data as usize].to_vec();
        padded.extend_from_slice(&foot);
        padded.extend_from_slice(&(foot.len() as u32).to_le_bytes());
        padded.extend_from_slice(b"PAR1");
        assert!(padded.len() as u64 * MAX_VALUES_PER_BYTE > rows as u64, "the padding makes the file large enough");
        let e = check_part(&padded).expect_err("padded bomb accepted");
        assert!(e.contains("bytes of column data"), "{e}");
    }

    /// A fuzz finding: a page header claiming ~2^58 values made polars reserve 2^61 bytes
    /// for its validity bitmap and abort.
    #[test]
    fn refuses_the_page_header_that_aborted_polars() {
        let e = check_part(&data("oom-page-header.parquet")).expect_err("accepted");
        assert!(e.contains("row group 0, column"), "{e}");
    }

    /// A fuzz finding: a footer list length made polars' footer decoder reserve 131 GB.
    #[test]
    fn refuses_the_footer_that_aborted_polars() {
        let e = check_part(&data("oom-footer.parquet")).expect_err("accepted");
        assert!(e.starts_with("footer at offset"), "{e}");
    }

    fn data(name: &str) -> Vec<u8> {
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name))
            .expect("test data")
    }
}
