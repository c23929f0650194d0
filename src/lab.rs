//! `fwdscope lab up|down|status`: the network-namespace lab for real-interface runs.
//!
//! Three namespaces joined by two veth pairs, every address inside 198.18.0.0/15:
//!
//! ```text
//!  NAME-snd                 NAME-fwd                          NAME-sink
//!  NAME-s0 198.18.0.1/30 -- NAME-f0 198.18.0.2/30
//!                           NAME-f1 198.18.0.5/30 -- NAME-k0 198.18.0.6/30
//!                                                             local 198.18.0.0/15 dev lo
//! ```
//!
//! The sender routes the destination range 198.19.0.0/16 to the forwarding namespace; the
//! forwarding namespace forwards with the kernel (net.ipv4.ip_forward=1) over a route table
//! generated (`--routes N`) or loaded (`--table FILE`), every route inside 198.19.0.0/16 via
//! the sink, which owns the whole lab range. `up` is idempotent (an incomplete lab is torn
//! down and rebuilt); `down` deletes whatever namespaces of that name exist, so it also
//! cleans up after a crash. Everything goes through iproute2 (`ip`).

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::process::{Command, Stdio};

#[derive(clap::Subcommand, Debug)]
pub enum LabCmd {
    /// Create the lab (or check it is complete).
    Up(UpArgs),
    /// Remove the lab's namespaces (and with them its veth pairs).
    Down(NameArg),
    /// Namespaces, interfaces and their packet counters.
    Status(NameArg),
}

#[derive(clap::Args, Debug)]
pub struct NameArg {
    /// Lab name: prefix of its namespaces and interfaces (1 to 8 of [a-z0-9]).
    #[arg(long, default_value = "fsl")]
    pub name: String,
}

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// Generate this many routes inside 198.19.0.0/16 for the forwarding namespace
    /// [default: one 198.19.0.0/16 route].
    #[arg(long, conflicts_with = "table")]
    pub routes: Option<u32>,
    /// Load the forwarding namespace's routes from FILE (`PREFIX/LEN` per line, each inside
    /// 198.19.0.0/16; `#` comments).
    #[arg(long)]
    pub table: Option<std::path::PathBuf>,
}

pub fn run(cmd: &LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Up(a) => up(a),
        LabCmd::Down(n) => {
            let lab = Lab::new(&n.name)?;
            let removed = lab.down()?;
            println!("lab {}: down ({} namespaces removed)", lab.name, removed);
            Ok(())
        }
        LabCmd::Status(n) => {
            print!("{}", Lab::new(&n.name)?.status()?);
            Ok(())
        }
    }
}

/// The lab's names.
pub struct Lab {
    pub name: String,
}

fn ip(args: &[&str]) -> Result<String> {
    let out = Command::new("ip").args(args).output().context("running `ip` (iproute2)")?;
    if !out.status.success() {
        bail!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run `ip -n NS -batch -` with `lines`.
fn ip_batch(ns: &str, lines: &str) -> Result<()> {
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running `ip -batch`")?;
    child.stdin.take().context("ip stdin")?.write_all(lines.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("`ip -n {ns} -batch` failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// The lab's destination range: routes must stay inside it.
const DEST: (u32, u8) = (0xC613_0000, 16); // 198.19.0.0/16

fn inside_dest(addr: u32, len: u8) -> bool {
    len >= DEST.1 && (addr >> (32 - DEST.1)) == (DEST.0 >> (32 - DEST.1))
}

/// `n` distinct routes inside 198.19.0.0/16: /24s first, then /25../32 splits of what is
/// left, in a fixed order.
pub fn generate_routes(n: u32) -> Result<Vec<(u32, u8)>> {
    if n == 0 || n > 65_536 {
        bail!("--routes {n}: expected 1 to 65536 routes inside 198.19.0.0/16");
    }
    let mut v = Vec::with_capacity(n as usize);
    for i in 0..n.min(256) {
        v.push((DEST.0 | (i << 8), 24));
    }
    let mut k = 0u32;
    while (v.len() as u32) < n {
        // Host routes 198.19.X.Y (Y odd) inside the /24s; every route goes to the sink.
        let x = k % 256;
        let y = 1 + 2 * (k / 256);
        v.push((DEST.0 | (x << 8) | y, 32));
        k += 1;
    }
    Ok(v)
}

/// Routes of a table file (`PREFIX/LEN` per line).
pub fn load_routes(path: &std::path::Path) -> Result<Vec<(u32, u8)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        let bad = || anyhow::anyhow!("{}:{}: `{t}`: expected PREFIX/LEN inside 198.19.0.0/16", path.display(), i + 1);
        let (p, l) = t.split_once('/').ok_or_else(bad)?;
        let addr: std::net::Ipv4Addr = p.parse().map_err(|_| bad())?;
        let len: u8 = l.parse().map_err(|_| bad())?;
        let a = u32::from(addr);
        if len > 32 || !inside_dest(a, len) {
            return Err(bad());
        }
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        v.push((a & mask, len));
    }
    if v.is_empty() {
        bail!("{}: no routes", path.display());
    }
    Ok(v)
}

impl Lab {
    pub fn new(name: &str) -> Result<Lab> {
        if name.is_empty() || name.len() > 8 || !name.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
            bail!("lab name `{name}`: expected 1 to 8 characters of [a-z0-9] (it prefixes interface names)");
        }
        Ok(Lab { name: name.to_string() })
    }

    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.name)
    }

    fn namespaces(&self) -> [String; 3] {
        [self.ns("snd"), self.ns("fwd"), self.ns("sink")]
    }

    /// Which of the lab's namespaces exist.
    pub fn existing(&self) -> Result<Vec<String>> {
        let list = ip(&["netns", "list"])?;
        let names: Vec<&str> = list.lines().filter_map(|l| l.split_whitespace().next()).collect();
        Ok(self.namespaces().into_iter().filter(|n| names.contains(&n.as_str())).collect())
    }

    /// Delete every namespace of the lab that exists; returns how many.
    pub fn down(&self) -> Result<usize> {
        let existing = self.existing()?;
        for n in &existing {
            ip(&["netns", "del", n])?;
        }
        Ok(existing.len())
    }

    /// Whether the lab is complete: all namespaces, the forwarding sysctl, both veth pairs up.
    pub fn complete(&self) -> Result<bool> {
        if self.existing()?.len() != 3 {
            return Ok(false);
        }
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns("fwd"), "sysctl", "-n", "net.ipv4.ip_forward"])
            .output()?;
        if String::from_utf8_lossy(&out.stdout).trim() != "1" {
            return Ok(false);
        }
        for (ns, ifname) in [("snd", "s0"), ("fwd", "f0"), ("fwd", "f1"), ("sink", "k0")] {
            let link = ip(&["-n", &self.ns(ns), "-br", "link", "show", &format!("{}-{ifname}", self.name)]);
            if !link.is_ok_and(|l| l.contains("UP")) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Build the lab with `routes` in the forwarding namespace.
    pub fn up(&self, routes: &[(u32, u8)]) -> Result<()> {
        let (snd, fwd, sink) = (self.ns("snd"), self.ns("fwd"), self.ns("sink"));
        let n = &self.name;
        for ns in [&snd, &fwd, &sink] {
            ip(&["netns", "add", ns])?;
        }
        ip(&[
            "link",
            "add",
            &format!("{n}-s0"),
            "netns",
            &snd,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{n}-f0"),
            "netns",
            &fwd,
        ])?;
        ip(&[
            "link",
            "add",
            &format!("{n}-f1"),
            "netns",
            &fwd,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{n}-k0"),
            "netns",
            &sink,
        ])?;
        ip_batch(&snd, &format!("addr add 198.18.0.1/30 dev {n}-s0\nlink set lo up\nlink set {n}-s0 up\nroute add 198.19.0.0/16 via 198.18.0.2\n"))?;
        ip_batch(&fwd, &format!("addr add 198.18.0.2/30 dev {n}-f0\naddr add 198.18.0.5/30 dev {n}-f1\nlink set lo up\nlink set {n}-f0 up\nlink set {n}-f1 up\n"))?;
        ip_batch(&sink, &format!("addr add 198.18.0.6/30 dev {n}-k0\nlink set lo up\nlink set {n}-k0 up\nroute add local 198.18.0.0/15 dev lo\n"))?;
        let out =
            Command::new("ip").args(["netns", "exec", &fwd, "sysctl", "-qw", "net.ipv4.ip_forward=1"]).output()?;
        if !out.status.success() {
            bail!("enabling forwarding in {fwd}: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        let mut batch = String::with_capacity(routes.len() * 48);
        for (a, l) in routes {
            batch.push_str(&format!("route replace {}/{l} via 198.18.0.6\n", std::net::Ipv4Addr::from(*a)));
        }
        ip_batch(&fwd, &batch)?;
        Ok(())
    }

    /// Namespaces, interfaces, addresses, state and packet counters, and the route count.
    pub fn status(&self) -> Result<String> {
        let existing = self.existing()?;
        let mut s = format!(
            "lab {}: {}\n",
            self.name,
            if self.complete()? {
                "up"
            } else if existing.is_empty() {
                "down"
            } else {
                "incomplete (run `fwdscope lab down`)"
            }
        );
        for ns in &existing {
            let json = ip(&["-n", ns, "-s", "-j", "link", "show"])?;
            let links: serde_json::Value = serde_json::from_str(&json).context("parsing `ip -j link`")?;
            for l in links.as_array().into_iter().flatten() {
                let name = l["ifname"].as_str().unwrap_or("?");
                if name == "lo" {
                    continue;
                }
                let st = &l["stats64"];
                s.push_str(&format!(
                    "{ns:<12} {name:<12} {:<6} rx {:>12} pkts {:>8} dropped   tx {:>12} pkts {:>8} dropped\n",
                    l["operstate"].as_str().unwrap_or("?"),
                    st["rx"]["packets"].as_u64().unwrap_or(0),
                    st["rx"]["dropped"].as_u64().unwrap_or(0),
                    st["tx"]["packets"].as_u64().unwrap_or(0),
                    st["tx"]["dropped"].as_u64().unwrap_or(0),
                ));
            }
        }
        if existing.contains(&self.ns("fwd")) {
            let routes = ip(&["-n", &self.ns("fwd"), "route", "show"])?;
            let n = routes.lines().filter(|l| l.contains("via 198.18.0.6")).count();
            s.push_str(&format!("{} routes via the sink in {}\n", n, self.ns("fwd")));
        }
        Ok(s)
    }
}

fn up(a: &UpArgs) -> Result<()> {
    let lab = Lab::new(&a.name.name)?;
    let routes = match (&a.table, a.routes) {
        (Some(p), _) => load_routes(p)?,
        (None, Some(n)) => generate_routes(n)?,
        (None, None) => vec![DEST],
    };
    if lab.complete()? {
        println!("lab {}: already up", lab.name);
        return Ok(());
    }
    if !lab.existing()?.is_empty() {
        println!("lab {}: incomplete, rebuilding", lab.name);
        lab.down()?;
    }
    if let Err(e) = lab.up(&routes) {
        let _ = lab.down();
        return Err(e.context(format!("lab {}: could not be built (cleaned up)", lab.name)));
    }
    println!(
        "lab {}: up: {} (198.18.0.1) -> {} (198.18.0.2 | 198.18.0.5, kernel forwarding, {} routes) -> {} (owns 198.18.0.0/15)",
        lab.name,
        lab.ns("snd"),
        lab.ns("fwd"),
        routes.len(),
        lab.ns("sink")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_routes_are_distinct_and_inside_the_destination_range() {
        let r = generate_routes(1000).unwrap();
        assert_eq!(r.len(), 1000);
        let set: std::collections::HashSet<_> = r.iter().collect();
        assert_eq!(set.len(), 1000);
        assert!(r.iter().all(|&(a, l)| inside_dest(a, l)));
        assert_eq!(r[0], (0xC613_0000, 24));
        assert_eq!(r[256], (0xC613_0001, 32));
        assert!(generate_routes(0).is_err() && generate_routes(65_537).is_err());
    }

    #[test]
    fn table_lines_outside_the_range_are_refused_by_line() {
        let p = std::env::temp_dir().join(format!("fwdscope-lab-table-{}", std::process::id()));
        std::fs::write(&p, "# lab table\n198.19.4.0/24\n198.19.5.7/32 # host\n10.0.0.0/8\n").unwrap();
        let e = load_routes(&p).unwrap_err().to_string();
        assert!(e.ends_with(":4: `10.0.0.0/8`: expected PREFIX/LEN inside 198.19.0.0/16"), "{e}");
        std::fs::write(&p, "198.19.4.9/24\n198.19.5.7/32\n").unwrap();
        assert_eq!(load_routes(&p).unwrap(), vec![(0xC613_0400, 24), (0xC613_0507, 32)]);
        std::fs::remove_file(&p).unwrap();
        assert!(Lab::new("Bad_Name").is_err() && Lab::new("toolongname").is_err() && Lab::new("lab1").is_ok());
    }
}
