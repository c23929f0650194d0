//! Route tables: loading from files, generating realistic synthetic tables, adding
//! covering aggregates, and the next-hop / neighbour table.
//!
//! File formats, detected per line (blank lines and `#` comments are skipped; `.gz` files
//! are decompressed):
//! - `PREFIX/LEN NEXTHOP`: NEXTHOP an IPv4 gateway address.
//! - `PREFIX/LEN ASN`: the shared real-world data; origin ASNs are mapped onto
//!   [`LoadOptions::nexthops`] next hops by a hash of the ASN.
//! - `ip route` lines: `198.18.4.0/24 via 198.19.1.2 dev f1`, `default via A`, `P/L dev f0`,
//!   with `proto`, `metric`, `scope`, `src`, `table` and `onlink` accepted and ignored.

use crate::fib::{mask, normalize, Route};
use crate::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// A next hop: gateway (0 for a connected route, where the destination is the neighbour)
/// and output port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NextHop {
    pub gateway: Ipv4Addr,
    pub port: u16,
    pub dev: String,
}

/// A loaded or generated table: normalized routes plus the next hops they point at.
#[derive(Debug, Clone, Serialize)]
pub struct RouteTable {
    #[serde(skip)]
    pub routes: Vec<Route>,
    pub nexthops: Vec<NextHop>,
    /// Where the table came from (file path or generator parameters).
    pub source: String,
    /// Lines whose prefix repeated an earlier one (the first kept).
    pub duplicates: usize,
    /// Of the duplicates, those whose next hop differed from the kept line's.
    pub conflicts: usize,
    /// Aggregates added by [`RouteTable::add_aggregates`].
    pub aggregates_added: usize,
}

/// How to read a table file.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Next hops that origin ASNs are mapped onto (default 16).
    pub nexthops: usize,
    /// Output ports that gateways without a `dev` are spread over (default 2).
    pub ports: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { nexthops: 16, ports: 2 }
    }
}

/// Prefix-length mix of the real table in fixtures/tables (564,580 prefixes), /8 to /32.
pub const REAL_LENGTH_MIX: [(u8, u32); 25] = [
    (8, 8),
    (9, 6),
    (10, 31),
    (11, 95),
    (12, 257),
    (13, 493),
    (14, 1120),
    (15, 2455),
    (16, 9332),
    (17, 6735),
    (18, 11825),
    (19, 22075),
    (20, 33264),
    (21, 46064),
    (22, 103676),
    (23, 103717),
    (24, 218667),
    (25, 1350),
    (26, 1447),
    (27, 1595),
    (28, 141),
    (29, 164),
    (30, 53),
    (31, 3),
    (32, 7),
];

/// `A.B.C.D/LEN` (a bare address is a /32) as (address, length), host bits as written.
pub fn parse_address_and_length(s: &str) -> std::result::Result<(u32, u8), String> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: Ipv4Addr = a.parse().map_err(|_| format!("`{s}`: expected an IPv4 prefix A.B.C.D/LEN"))?;
    let len: u8 = match l {
        Some(l) => {
            l.parse().ok().filter(|&x| x <= 32).ok_or_else(|| format!("`{s}`: prefix length must be 0 to 32"))?
        }
        None => 32,
    };
    Ok((u32::from(addr), len))
}

/// A route's prefix, `A.B.C.D/LEN`; host bits set are an error naming the prefix meant.
fn parse_prefix(s: &str) -> std::result::Result<(u32, u8), String> {
    let (a, len) = parse_address_and_length(s)?;
    if a & !mask(len) != 0 {
        return Err(format!("`{s}` has host bits set: expected {}/{len}", Ipv4Addr::from(a & mask(len))));
    }
    Ok((a, len))
}

struct Loader {
    opts: LoadOptions,
    nexthops: Vec<NextHop>,
    index: HashMap<(Ipv4Addr, String), u32>,
    asn_base: Option<u32>,
}

impl Loader {
    fn intern(&mut self, gateway: Ipv4Addr, dev: Option<&str>) -> u32 {
        let dev_s = dev.map(str::to_string).unwrap_or_default();
        if let Some(&id) = self.index.get(&(gateway, dev_s.clone())) {
            return id;
        }
        let id = self.nexthops.len() as u32;
        let (port, name) = match dev {
            Some(d) => {
                // Ports are numbered in order of first appearance of each device name.
                let known: Vec<&str> = {
                    let mut v: Vec<&str> = Vec::new();
                    for n in &self.nexthops {
                        if !n.dev.is_empty() && !v.contains(&n.dev.as_str()) {
                            v.push(&n.dev);
                        }
                    }
                    v
                };
                let p = known.iter().position(|k| *k == d).unwrap_or(known.len());
                (p as u16, d.to_string())
            }
            None => {
                let p = (id as usize % self.opts.ports.max(1)) as u16;
                (p, format!("port{p}"))
            }
        };
        self.nexthops.push(NextHop { gateway, port, dev: name });
        self.index.insert((gateway, dev_s), id);
        id
    }

    fn asn_nexthop(&mut self, asn: u32) -> u32 {
        let base = match self.asn_base {
            Some(b) => b,
            None => {
                let b = self.nexthops.len() as u32;
                for i in 0..self.opts.nexthops.max(1) as u32 {
                    // Gateways inside the lab range 198.19.0.0/16.
                    let gw = Ipv4Addr::from(0xC613_0000u32 | (i + 1));
                    self.intern(gw, None);
                }
                self.asn_base = Some(b);
                b
            }
        };
        // Fibonacci hash of the ASN spreads origins evenly over the next hops.
        let h = (u64::from(asn).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32;
        base + h % self.opts.nexthops.max(1) as u32
    }

    fn parse_line(&mut self, line: &str) -> std::result::Result<Option<Route>, String> {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            return Ok(None);
        }
        let toks: Vec<&str> = line.split_whitespace().collect();
        let ip_route = toks[0] == "default" || toks.iter().skip(1).any(|t| matches!(*t, "via" | "dev"));
        if ip_route {
            return self.parse_ip_route(&toks).map(Some);
        }
        if toks.len() != 2 {
            return Err(format!(
                "expected `PREFIX/LEN NEXTHOP`, `PREFIX/LEN ASN` or an `ip route` line, found {} fields",
                toks.len()
            ));
        }
        let (p, l) = parse_prefix(toks[0])?;
        let nh = if let Ok(gw) = toks[1].parse::<Ipv4Addr>() {
            self.intern(gw, None)
        } else if let Ok(asn) = toks[1].parse::<u32>() {
            self.asn_nexthop(asn)
        } else {
            return Err(format!("`{}`: expected a next hop (IPv4 address) or an origin ASN (integer)", toks[1]));
        };
        Ok(Some(Route::new(p, l, nh)))
    }

    fn parse_ip_route(&mut self, toks: &[&str]) -> std::result::Result<Route, String> {
        if matches!(
            toks[0],
            "blackhole"
                | "unreachable"
                | "prohibit"
                | "throw"
                | "local"
                | "broadcast"
                | "multicast"
                | "nat"
                | "anycast"
        ) {
            return Err(format!("route type `{}` is not supported: expected a unicast route", toks[0]));
        }
        let (p, l) = if toks[0] == "default" { (0, 0) } else { parse_prefix(toks[0])? };
        let mut via: Option<Ipv4Addr> = None;
        let mut dev: Option<&str> = None;
        let mut i = 1;
        while i < toks.len() {
            let key = toks[i];
            let val = || toks.get(i + 1).copied().ok_or_else(|| format!("`{key}` needs a value"));
            match key {
                "via" => {
                    let v = val()?;
                    let v = v.strip_prefix("inet ").unwrap_or(v);
                    via = Some(v.parse().map_err(|_| format!("`via {v}`: expected an IPv4 gateway address"))?);
                    i += 2;
                }
                "dev" => {
                    dev = Some(val()?);
                    i += 2;
                }
                "proto" | "metric" | "scope" | "src" | "table" | "realm" | "mtu" | "advmss" => {
                    val()?;
                    i += 2;
                }
                "onlink" | "linkdown" | "dead" => i += 1,
                other => {
                    return Err(format!(
                        "unexpected `{other}`: expected via, dev, proto, metric, scope, src, table or onlink"
                    ))
                }
            }
        }
        if via.is_none() && dev.is_none() {
            return Err("an `ip route` line needs `via GATEWAY` or `dev NAME`".into());
        }
        let nh = self.intern(via.unwrap_or(Ipv4Addr::UNSPECIFIED), dev);
        Ok(Route::new(p, l, nh))
    }
}

/// Largest route table accepted, as stored and (gzipped) as text: 256 MiB. The real table
/// of 564,580 prefixes is about 11 MB, so this is twenty full Internet tables.
pub const MAX_TABLE_BYTES: u64 = 256 << 20;

/// Longest line of a route table: 4 KiB.
pub const MAX_TABLE_LINE: usize = 4096;

/// A reader that gives at most `left` bytes and then fails, naming the limit (a gzip
/// member that expands without end, a file growing while read).
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other(format!(
                    "the table is longer than {} MiB (as text): not a route table this tool reads",
                    MAX_TABLE_BYTES >> 20
                ))),
            };
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Open a table file: a regular file only (a FIFO or a device is refused by name, never
/// waited on or read to the end; the open itself does not block), not on a kernel
/// pseudo-filesystem (a link to /proc/kmsg is refused before a byte is read), at most
/// [`MAX_TABLE_BYTES`] stored and as text; gzip recognized by its magic bytes.
fn open_maybe_gz(path: &Path) -> Result<Box<dyn BufRead>> {
    use std::io::Seek;
    use std::os::unix::fs::OpenOptionsExt;
    let refuse = |msg: String| Error::Parse { path: path.into(), line: 0, msg };
    let kind = fwd_abi::file_kind::not_regular;
    if let Some(what) = std::fs::metadata(path).ok().and_then(|m| kind(m.file_type())) {
        return Err(refuse(format!("is {what}, expected a route table file (a regular file); not read")));
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let md = f.metadata().map_err(|e| Error::io(path, e))?;
    if let Some(what) = kind(md.file_type()) {
        return Err(refuse(format!("is {what}, expected a route table file (a regular file); not read")));
    }
    if let Some(fs) = fwd_abi::file_kind::pseudo_filesystem(&f) {
        // Its size says nothing of what a read gives, and a read may block or consume it
        // (/proc/kmsg drains the kernel's log).
        return Err(refuse(format!(
            "is a file of the kernel's {fs}, expected a route table file (a regular file on a filesystem that \
             stores files); not read"
        )));
    }
    if md.len() > MAX_TABLE_BYTES {
        return Err(refuse(format!(
            "is {} MiB, more than the {} MiB a route table may be (the full Internet table is about 11 MB)",
            md.len() >> 20,
            MAX_TABLE_BYTES >> 20
        )));
    }
    let mut magic = [0u8; 2];
    let n = f.read(&mut magic).map_err(|e| Error::io(path, e))?;
    f.rewind().map_err(|e| Error::io(path, e))?;
    let f = Capped { inner: f, left: MAX_TABLE_BYTES };
    if n == 2 && magic == [0x1f, 0x8b] {
        let text = Capped { inner: flate2::read::MultiGzDecoder::new(f), left: MAX_TABLE_BYTES };
        Ok(Box::new(BufReader::new(text)))
    } else {
        Ok(Box::new(BufReader::new(f)))
    }
}

impl RouteTable {
    /// Load a table file (any of the formats above, optionally gzipped).
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<RouteTable> {
        let reader = open_maybe_gz(path)?;
        Self::parse(reader, path, opts)
    }

    /// Parse table text from any reader; `path` names it in errors.
    pub fn parse(reader: impl BufRead, path: &Path, opts: &LoadOptions) -> Result<RouteTable> {
        let mut ld = Loader { opts: opts.clone(), nexthops: Vec::new(), index: HashMap::new(), asn_base: None };
        let mut routes = Vec::new();
        let mut reader = reader;
        let mut buf = Vec::new();
        for i in 0.. {
            // Lines are read up to a cap: a file without newlines is never held whole.
            buf.clear();
            let n = (&mut reader)
                .take(MAX_TABLE_LINE as u64 + 1)
                .read_until(b'\n', &mut buf)
                .map_err(|e| Error::Parse { path: path.into(), line: i + 1, msg: format!("unreadable: {e}") })?;
            if n == 0 {
                break;
            }
            if buf.len() > MAX_TABLE_LINE && buf.last() != Some(&b'\n') {
                return Err(Error::Parse {
                    path: path.into(),
                    line: i + 1,
                    msg: format!("longer than {MAX_TABLE_LINE} bytes: expected one route per line"),
                });
            }
            while matches!(buf.last(), Some(b'\n' | b'\r')) {
                buf.pop();
            }
            let line = std::str::from_utf8(&buf).map_err(|e| Error::Parse {
                path: path.into(),
                line: i + 1,
                msg: format!("not UTF-8 text (byte {} of the line): expected text lines", e.valid_up_to() + 1),
            })?;
            // A control character (a NUL of a binary file, an escape sequence) is named by
            // its code and column, never printed raw into the message.
            if let Some((col, c)) = line.chars().enumerate().find(|(_, c)| c.is_control() && *c != '\t' && *c != '\r') {
                let what =
                    if c == '\0' { "a NUL byte".to_string() } else { format!("control character {:#04x}", c as u32) };
                return Err(Error::Parse {
                    path: PathBuf::from(path),
                    line: i + 1,
                    msg: format!("{what} at column {}: expected text lines (is this a binary file?)", col + 1),
                });
            }
            match ld.parse_line(line) {
                Ok(Some(r)) => routes.push(r),
                Ok(None) => {}
                Err(msg) => return Err(Error::Parse { path: PathBuf::from(path), line: i + 1, msg }),
            }
        }
        if routes.is_empty() {
            return Err(Error::Parse { path: path.into(), line: 0, msg: "no routes in file".into() });
        }
        let dedup = crate::fib::normalize_counted(&mut routes);
        Ok(RouteTable {
            routes,
            nexthops: ld.nexthops,
            source: path.display().to_string(),
            duplicates: dedup.duplicates,
            conflicts: dedup.conflicts,
            aggregates_added: 0,
        })
    }

    /// A realistic synthetic table of `n` routes: prefix lengths drawn from the real table's
    /// mix, about a tenth of them more-specifics of another route (nesting), a default
    /// route, spread over `nexthops` next hops. Deterministic for a seed.
    pub fn generate(n: usize, nexthops: usize, seed: u64) -> RouteTable {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let k = nexthops.max(1) as u32;
        let total: u32 = REAL_LENGTH_MIX.iter().map(|x| x.1).sum();
        let pick_len = |rng: &mut Xoshiro256PlusPlus| {
            let mut x = rng.gen_range(0..total);
            for &(l, c) in &REAL_LENGTH_MIX {
                if x < c {
                    return l;
                }
                x -= c;
            }
            24
        };
        let mut routes: Vec<Route> = vec![Route::new(0, 0, 0)];
        let mut seen: std::collections::HashSet<(u32, u8)> = std::collections::HashSet::new();
        seen.insert((0, 0));
        let mut guard = 0usize;
        while routes.len() < n.max(1) && guard < n * 20 + 1000 {
            guard += 1;
            let r = if routes.len() > 16 && rng.gen_ratio(1, 10) {
                // A more-specific inside an existing shorter route.
                let parent = routes[rng.gen_range(1..routes.len())];
                if parent.len >= 30 {
                    continue;
                }
                let len = rng.gen_range(parent.len + 1..=(parent.len + 8).min(32));
                let host: u32 = rng.gen::<u32>() & !mask(parent.len);
                Route::new(parent.prefix | host, len, rng.gen_range(0..k))
            } else {
                let len = pick_len(&mut rng);
                // Unicast space 1.0.0.0 - 223.255.255.255.
                let a = rng.gen_range(0x0100_0000u32..0xE000_0000);
                Route::new(a, len, rng.gen_range(0..k))
            };
            // Never route 0/8, loopback or class D/E space (martians, as real tables don't).
            let first = r.prefix >> 24;
            if first == 0 || first == 127 || first >= 224 || r.len < 8 {
                continue;
            }
            if seen.insert((r.prefix, r.len)) {
                routes.push(r);
            }
        }
        normalize(&mut routes);
        let nexthops = (0..k)
            .map(|i| NextHop {
                gateway: Ipv4Addr::from(0xC613_0000u32 | (i + 1)),
                port: (i % 2) as u16,
                dev: format!("port{}", i % 2),
            })
            .collect();
        RouteTable {
            routes,
            nexthops,
            source: format!("generated: {n} routes, {k} next hops, seed {seed}"),
            duplicates: 0,
            conflicts: 0,
            aggregates_added: 0,
        }
    }

    /// Add what a real BGP table has and the flat prefix set lacks: a default route (unless
    /// present) and, for each /16 and each /8 that holds two or more longer routes and no
    /// route of its own, a covering aggregate towards the next hop of its first route.
    pub fn add_aggregates(&mut self) -> usize {
        let mut have: std::collections::HashSet<(u32, u8)> = self.routes.iter().map(|r| (r.prefix, r.len)).collect();
        let mut added = Vec::new();
        for agg_len in [16u8, 8] {
            let mut counts: HashMap<u32, (usize, u32)> = HashMap::new();
            for r in self.routes.iter().filter(|r| r.len > agg_len) {
                let e = counts.entry(r.prefix & mask(agg_len)).or_insert((0, r.nh));
                e.0 += 1;
            }
            let mut keys: Vec<_> = counts.into_iter().filter(|(_, (c, _))| *c >= 2).collect();
            keys.sort_unstable();
            for (p, (_, nh)) in keys {
                if have.insert((p, agg_len)) {
                    added.push(Route::new(p, agg_len, nh));
                }
            }
        }
        if have.insert((0, 0)) {
            added.push(Route::new(0, 0, 0));
        }
        let n = added.len();
        self.routes.extend(added);
        normalize(&mut self.routes);
        self.aggregates_added += n;
        n
    }

    /// Number of routes per prefix length (index = length).
    pub fn length_histogram(&self) -> [usize; 33] {
        let mut h = [0; 33];
        for r in &self.routes {
            h[r.len as usize] += 1;
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capped reader gives its bytes up to the cap and fails past it, naming the cap;
    /// exactly the cap is fine.
    #[test]
    fn a_capped_reader_fails_past_its_cap_only() {
        let mut out = Vec::new();
        Capped { inner: &b"0123456789"[..], left: 10 }.read_to_end(&mut out).expect("exactly the cap");
        assert_eq!(out, b"0123456789");
        let e = Capped { inner: &b"0123456789"[..], left: 9 }.read_to_end(&mut Vec::new()).expect_err("past it");
        assert!(e.to_string().contains("longer than 256 MiB"), "{e}");
    }

    /// Special files are refused by name before anything is read (a FIFO without a writer
    /// would block an ordinary open); a gzip that expands to one endless line is refused at
    /// the line cap, not read whole.
    #[test]
    fn special_files_and_endless_lines_are_refused() {
        let d = std::env::temp_dir().join(format!("fwdscope-table-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let opts = LoadOptions::default();
        // A link into /proc (a link to /proc/kmsg would drain the kernel's log if read).
        let proc_link = d.join("km");
        std::os::unix::fs::symlink("/proc/self/status", &proc_link).unwrap();
        for (p, want) in [
            (fifo.clone(), "is a FIFO"),
            (PathBuf::from("/dev/zero"), "is a character device"),
            (proc_link, "is a file of the kernel's procfs"),
        ] {
            let e = RouteTable::load(&p, &opts).expect_err("refused").to_string();
            assert!(e.contains(want) && e.contains("expected a route table file"), "{e}");
        }
        let gz = d.join("line.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &vec![b'1'; 1 << 20]).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let e = RouteTable::load(&gz, &opts).expect_err("refused").to_string();
        assert!(e.contains("line.gz:1") && e.contains("longer than 4096 bytes"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn parse(text: &str) -> Result<RouteTable> {
        RouteTable::parse(text.as_bytes(), Path::new("t.txt"), &LoadOptions::default())
    }

    #[test]
    fn three_formats() {
        let t = parse("# c\n198.18.0.0/16 198.19.0.1\n198.18.4.0/24 via 198.19.1.2 dev f1\ndefault via 198.19.0.9\n1.0.0.0/24 13335\n").unwrap();
        assert_eq!(t.routes.len(), 4);
        let r = t.routes.iter().find(|r| r.len == 24 && r.prefix == 0xC612_0400).unwrap();
        assert_eq!(t.nexthops[r.nh as usize].gateway, Ipv4Addr::new(198, 19, 1, 2));
        assert_eq!(t.nexthops[r.nh as usize].dev, "f1");
        let d = t.routes.iter().find(|r| r.len == 0).unwrap();
        assert_eq!(t.nexthops[d.nh as usize].gateway, Ipv4Addr::new(198, 19, 0, 9));
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse("198.18.0.0/16 198.19.0.1\n198.18.0.0/33 198.19.0.1\n").unwrap_err().to_string();
        assert!(e.starts_with("t.txt:2: "), "{e}");
        assert!(e.contains("prefix length must be 0 to 32"), "{e}");
        let e = parse("198.18.4.1/24 198.19.0.1\n").unwrap_err().to_string();
        assert!(e.contains("t.txt:1:") && e.contains("expected 198.18.4.0/24"), "{e}");
        let e = parse("198.18.4.0/24 via banana\n").unwrap_err().to_string();
        assert!(e.contains("expected an IPv4 gateway"), "{e}");
        let e = parse("198.18.4.0/24 x y\n").unwrap_err().to_string();
        assert!(e.contains("found 3 fields"), "{e}");
        let e = parse("198.18.4.0/24 via 198.19.0.1 frob 3\n").unwrap_err().to_string();
        assert!(e.contains("unexpected `frob`"), "{e}");
        assert!(parse("# nothing\n").unwrap_err().to_string().contains("no routes"));
    }

    #[test]
    fn asn_maps_onto_k_nexthops() {
        let text: String = (0..200).map(|i| format!("10.{}.{}.0/24 {}\n", i / 256, i % 256, 64512 + i)).collect();
        let t = RouteTable::parse(text.as_bytes(), Path::new("a"), &LoadOptions { nexthops: 4, ports: 2 }).unwrap();
        assert_eq!(t.nexthops.len(), 4);
        let used: std::collections::HashSet<u32> = t.routes.iter().map(|r| r.nh).collect();
        assert_eq!(used.len(), 4);
    }

    #[test]
    fn generator_is_deterministic_and_nested() {
        let a = RouteTable::generate(5000, 8, 7);
        let b = RouteTable::generate(5000, 8, 7);
        assert_eq!(a.routes, b.routes);
        assert_eq!(a.routes.len(), 5000);
        assert!(a.routes.iter().any(|r| r.len == 0));
        let h = a.length_histogram();
        // /24 dominates, as in the real mix (38.7%).
        assert!(h[24] > 1200 && h[24] < 2600, "{:?}", h);
        // Some routes nest inside others.
        let set: std::collections::HashSet<(u32, u8)> = a.routes.iter().map(|r| (r.prefix, r.len)).collect();
        let nested = a.routes.iter().filter(|r| (1..r.len).any(|l| set.contains(&(r.prefix & mask(l), l)))).count();
        assert!(nested > 200, "nested {nested}");
    }

    #[test]
    fn aggregates_cover_groups() {
        let mut t = parse("10.1.1.0/24 1.1.1.1\n10.1.2.0/24 1.1.1.1\n10.2.0.0/24 1.1.1.1\n").unwrap();
        let n = t.add_aggregates();
        // 10.1/16, 10/8, default.
        assert_eq!(n, 3);
        assert!(t.routes.iter().any(|r| r.prefix == 0x0a01_0000 && r.len == 16));
        assert!(t.routes.iter().any(|r| r.prefix == 0x0a00_0000 && r.len == 8));
        assert!(t.routes.iter().any(|r| r.len == 0));
    }
}
