//! The lab's traffic sender: the bundled traffic generator (flows, packets per flow,
//! destination pattern, size, rate) transmitting through an AF_PACKET tx ring, or AF_XDP tx
//! sockets (`--via afxdp`), from inside the sender namespace.

use crate::error::{bail, Context};
use crate::netns::{check_cpu, Lab};
use crate::Result;

/// Packets sent when neither a count nor a duration is given.
pub const DEFAULT_COUNT: u64 = 10_000;

/// What to send: the `lab send` flags, defaults as shown there.
#[derive(Debug, Clone, clap::Args)]
pub struct SendOptions {
    /// Lab name: prefix of its namespaces and interfaces.
    #[arg(long, default_value = "fsl")]
    pub name: String,
    /// Concurrent flows.
    #[arg(long, default_value_t = 1024)]
    pub flows: usize,
    /// Packets per flow before it is replaced by a new one.
    #[arg(long, default_value_t = 10)]
    pub pkts_per_flow: u32,
    /// Destination pattern over the lab's routes.
    #[arg(long, value_enum, default_value_t = forwarder::traffic::DstPattern::Random)]
    pub dst: forwarder::traffic::DstPattern,
    /// Frame size in bytes (64 to 1514).
    #[arg(long, default_value_t = 64)]
    pub size: u16,
    /// Packets per second (250000, 250k, 1.5M) [default: as fast as the ring takes them].
    #[arg(long, value_parser = forwarder::cli::parse_rate)]
    pub rate: Option<f64>,
    /// Stop after this many packets [default: 10000 without --duration, else none].
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this many seconds (or at --count, if earlier).
    #[arg(long, value_parser = forwarder::cli::parse_seconds)]
    pub duration: Option<f64>,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the sender on this CPU only [default: any CPU].
    #[arg(long)]
    pub cpu: Option<usize>,
    /// How frames leave: AF_XDP tx sockets (copy mode on veth; a socket per tx queue, each
    /// flow on one) or an AF_PACKET tx ring [default: afxdp where libxdp and AF_XDP work
    /// (about 20% more packets per second from one CPU here), else afpacket].
    #[arg(long, value_enum)]
    pub via: Option<Via>,
    /// Set (by a signal handler) to end the sending early, with the count so far (default
    /// none).
    #[arg(skip)]
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// The sender's transmit path.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Afpacket,
    Afxdp,
}

/// The sender's port: an AF_PACKET tx ring or AF_XDP tx sockets, used alike.
enum Port {
    Afp(forwarder::nic::afpacket::AfpTx),
    Xdp(forwarder::nic::afxdp::XskTx),
}

impl Port {
    fn push(&mut self, frame: &[u8]) -> bool {
        match self {
            Port::Afp(p) => p.push(frame),
            Port::Xdp(p) => p.push(frame, flow_hash(frame)),
        }
    }
    fn kick(&mut self) {
        match self {
            Port::Afp(p) => p.kick(),
            Port::Xdp(p) => p.kick(),
        }
    }
    fn reclaim(&mut self) -> forwarder::nic::afpacket::TxDone {
        match self {
            Port::Afp(p) => p.reclaim(),
            Port::Xdp(p) => p.reclaim(),
        }
    }
    fn drain(&mut self, ms: u64) -> forwarder::nic::afpacket::TxDone {
        match self {
            Port::Afp(p) => p.drain(ms),
            Port::Xdp(p) => p.drain(ms),
        }
    }
    fn in_flight(&self) -> u64 {
        match self {
            Port::Afp(p) => p.in_flight(),
            Port::Xdp(p) => p.in_flight(),
        }
    }
}

/// A flow's hash for picking its tx queue: the IPv4 addresses and the ports (bytes 26..38
/// of an Ethernet + IPv4 + UDP frame), FNV-1a.
fn flow_hash(frame: &[u8]) -> u32 {
    frame.get(26..38).unwrap_or(&[]).iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// What `lab send` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sent {
    pub packets: u64,
    pub bytes: u64,
    /// Frames the kernel refused (malformed): not sent.
    pub refused: u64,
    pub seconds: f64,
    pub pps: f64,
    pub flows: usize,
    pub pkts_per_flow: u32,
    pub dst: String,
    pub size: u16,
    pub via: Via,
    /// Why the sending ended before its count or duration (a signal, the lab's interface
    /// gone), if it did: the figures above are what was sent until then.
    pub ended: Option<String>,
}

impl Sent {
    /// What was sent, in one line for the user.
    pub fn line(&self, lab: &str) -> String {
        format!(
            "lab {lab}: sent {} packets ({} bytes) in {:.2} s = {:.0} pps from {lab}-s0 via {}: {} flows x {} packets, dst {}, {} bytes{}",
            self.packets,
            self.bytes,
            self.seconds,
            self.pps,
            match self.via {
                Via::Afpacket => "AF_PACKET",
                Via::Afxdp => "AF_XDP",
            },
            self.flows,
            self.pkts_per_flow,
            self.dst,
            self.size,
            if self.refused > 0 { format!("; {} refused by the kernel", self.refused) } else { String::new() }
        ) + &self.ended.as_ref().map_or(String::new(), |why| format!("; ENDED EARLY: {why}"))
    }
}

/// The generator draws sources from 198.18.0.0/16; 198.18.0.0/24 holds the lab's own
/// links, where a source would be a martian (the forwarding namespace's own address or a
/// link broadcast) and be dropped. Such a source moves to 198.18.128.0/24 (checksum redone).
fn keep_off_lab_links(frame: &mut [u8]) {
    use forwarder::packet::{checksum, off, put_u16, ETH_HLEN, IP_HLEN};
    if frame[off::SADDR..off::SADDR + 3] == [198, 18, 0] {
        frame[off::SADDR + 2] = 128;
        put_u16(frame, off::CSUM, 0);
        let c = checksum(&frame[ETH_HLEN..ETH_HLEN + IP_HLEN]);
        put_u16(frame, off::CSUM, c);
    }
}

/// Enter the network namespace `ns` (this thread only: a network namespace is per thread).
fn enter_netns(ns: &str) -> Result<()> {
    let path = format!("/run/netns/{ns}");
    let f = std::fs::File::open(&path).with_context(|| format!("opening {path} (is the lab up?)"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: setns on a namespace file descriptor we hold open.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("setns into {ns}"));
    }
    Ok(())
}

/// Send what `a` asks from the lab's sender namespace. Enters that namespace on the
/// calling thread (and pins it with `cpu`): call it from a thread of its own when the
/// caller must stay where it is.
pub fn send(a: &SendOptions) -> Result<Sent> {
    use forwarder::nic::afpacket::{arp_table, if_mac, neighbour_mac, AfpTx};
    use forwarder::traffic::{DstChooser, FlowGen, TrafficProfile};
    let lab = Lab::new(&a.name)?;
    // Sending through a lab whose forwarder died would "succeed" with nothing arriving.
    if let Some(dead) = lab.dead_forwarder() {
        bail!("lab {}: {dead}", lab.name);
    }
    // Likewise a lab missing a namespace, a link or its forwarding setting.
    if !lab.complete()? {
        bail!(
            "lab {}: incomplete (a namespace, a link or its forwarding setting is missing); `fwdscope lab up --name {}` \
             rebuilds it",
            lab.name,
            lab.name
        );
    }
    // Routes deleted by hand: the send goes on (their drops may be the point), said first.
    if let Some(note) = lab.routes_missing_note() {
        eprintln!("fwdscope lab send: {note}");
    }
    let routes_path = lab.state_dir().join("routes.txt");
    let table = forwarder::table::RouteTable::load(&routes_path, &forwarder::table::LoadOptions::default())
        .with_context(|| format!("lab {}: is it up? (no route table)", lab.name))?;
    let profile = TrafficProfile {
        flows: a.flows,
        pkts_per_flow: a.pkts_per_flow,
        dst: a.dst,
        size: usize::from(a.size),
        seed: a.seed,
        rate: None,
        ttl: 64,
    };
    profile.validate()?;
    if let Some(c) = a.cpu {
        check_cpu("--cpu", c)?;
        if !forwarder::cpu::pin_to_cpu(c) {
            bail!("--cpu {c}: sched_setaffinity failed: {}", std::io::Error::last_os_error());
        }
    }
    let chooser = std::sync::Arc::new(DstChooser::new(&table.routes, a.dst, a.seed)?);
    let mut gen = FlowGen::new(&profile, chooser, 0, 1);
    enter_netns(&lab.ns("snd"))?;
    let s0 = format!("{}-s0", lab.name);
    let src = if_mac(&s0)?;
    let dst = neighbour_mac(&arp_table()?, std::net::Ipv4Addr::new(198, 18, 0, 2), &s0)
        .context("no neighbour entry for 198.18.0.2 in the sender namespace (rebuild the lab)")?;
    // With several queues (an afxdp lab with several workers) the flows must spread over
    // them, as a NIC's RSS would: the device's queue selection hashes each flow; with one,
    // the qdisc is bypassed (PACKET_QDISC_BYPASS picks the sending CPU's queue).
    let queues = forwarder::nic::afxdp::queue_counts(&s0).1;
    let via = a.via.unwrap_or_else(|| match crate::netns::default_driver().0 {
        crate::netns::LabDriver::Afxdp => Via::Afxdp,
        crate::netns::LabDriver::Afpacket => Via::Afpacket,
    });
    let mut tx = match via {
        Via::Afpacket => Port::Afp(AfpTx::open_with(&s0, queues <= 1)?),
        Via::Afxdp => Port::Xdp(forwarder::nic::afxdp::XskTx::open(&s0)?),
    };
    let mut buf = vec![0u8; forwarder::nic::BUF_SIZE];
    let t0 = std::time::Instant::now();
    let limit = a.duration.map(std::time::Duration::from_secs_f64);
    let (mut queued, mut out) = (
        0u64,
        Sent {
            packets: 0,
            bytes: 0,
            refused: 0,
            seconds: 0.0,
            pps: 0.0,
            flows: a.flows,
            pkts_per_flow: a.pkts_per_flow,
            dst: format!("{:?}", a.dst).to_lowercase(),
            size: a.size,
            via,
            ended: None,
        },
    );
    let account = |d: forwarder::nic::afpacket::TxDone, out: &mut Sent| {
        out.packets += d.sent;
        out.bytes += d.bytes;
        out.refused += d.refused;
    };
    // The clock is read every 64 frames at full speed (reading it per frame cost the
    // sender about 4% of its CPU), every frame when paced.
    let expired = |t0: std::time::Instant| limit.is_some_and(|l| t0.elapsed() >= l);
    let mut done = expired(t0);
    let count = a.count.unwrap_or(if a.duration.is_some() { u64::MAX } else { DEFAULT_COUNT });
    let s0_c = std::ffi::CString::new(s0.clone()).context("interface name")?;
    // The interface is gone when the lab is taken down (or changed) under the sender, or
    // cannot send when it was set down or lost its peer (no carrier).
    let gone = || {
        // SAFETY: if_nametoindex reads the NUL-terminated name it is given.
        if unsafe { libc::if_nametoindex(s0_c.as_ptr()) } == 0 {
            return Some(format!("interface {s0} went away (the lab was taken down or changed)"));
        }
        match if_flags(&s0_c) {
            Some(f) if f & libc::IFF_UP as i32 == 0 => Some(format!("interface {s0} was set down")),
            Some(f) if f & libc::IFF_RUNNING as i32 == 0 => {
                Some(format!("interface {s0} lost its carrier (its peer in the forwarding namespace is down or gone)"))
            }
            _ => None,
        }
    };
    let stopped = || a.stop.as_ref().is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed));
    while queued < count && !done {
        if let Some(r) = a.rate {
            // Paced: never ahead of rate x elapsed.
            let due = (t0.elapsed().as_secs_f64() * r) as u64;
            if queued >= due {
                tx.kick();
                account(tx.reclaim(), &mut out);
                std::thread::sleep(std::time::Duration::from_micros(50));
                done = expired(t0);
                continue;
            }
        }
        let len = usize::from(gen.next_frame(&mut buf));
        buf[0..6].copy_from_slice(&dst);
        buf[6..12].copy_from_slice(&src);
        keep_off_lab_links(&mut buf);
        let mut spins = 0u32;
        while !tx.push(&buf[..len]) {
            // Every slot with the kernel: let it send, then retry (back-pressure, no loss).
            tx.kick();
            account(tx.reclaim(), &mut out);
            std::thread::yield_now();
            spins += 1;
            // A ring that stays full: the time is up, a signal came, or the interface went.
            if spins % 1024 == 0 {
                done = expired(t0);
                if stopped() {
                    out.ended = Some("stopped by a signal".into());
                } else if let Some(why) = gone() {
                    out.ended = Some(why);
                }
                if done || out.ended.is_some() {
                    break;
                }
            }
        }
        if done || out.ended.is_some() {
            break;
        }
        queued += 1;
        if queued % 64 == 0 {
            tx.kick();
            account(tx.reclaim(), &mut out);
            done = expired(t0);
            if stopped() {
                out.ended = Some("stopped by a signal".into());
                break;
            }
        } else if a.rate.is_some() {
            done = expired(t0);
        }
    }
    if out.ended.is_none() {
        if let Some(why) = gone() {
            out.ended = Some(why);
        }
    }
    // What the kernel still holds is waited for (briefly when the interface is gone).
    account(tx.drain(if out.ended.is_some() { 200 } else { 2000 }), &mut out);
    out.seconds = t0.elapsed().as_secs_f64();
    out.pps = out.packets as f64 / out.seconds.max(1e-9);
    if tx.in_flight() > 0 && out.ended.is_none() {
        out.ended = Some(format!(
            "{} frames were still with the kernel after 2 s (interface {s0} stopped sending)",
            tx.in_flight()
        ));
    }
    // A lab changed under the send (a link of the forwarding namespace or the sink deleted
    // or set down): what was sent after that went nowhere.
    if out.ended.is_none() && !lab.complete().unwrap_or(false) {
        out.ended = Some(
            "the lab is incomplete after the send (a namespace, a link or its forwarding setting went away during \
             it): the packets sent after that were not forwarded"
                .into(),
        );
    }
    Ok(out)
}

/// The flags of interface `name` in this network namespace (SIOCGIFFLAGS), or None.
fn if_flags(name: &std::ffi::CStr) -> Option<i32> {
    // SAFETY: a datagram socket only to ask the kernel; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: ifreq is plain data; all zeros is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.to_bytes();
    if bytes.len() >= ifr.ifr_name.len() {
        // SAFETY: fd is the socket made above.
        unsafe { libc::close(fd) };
        return None;
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name and writes the flags of the ifreq it is given.
    let r = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr) };
    // SAFETY: fd is the socket made above.
    unsafe { libc::close(fd) };
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    (r == 0).then(|| i32::from(unsafe { ifr.ifr_ifru.ifru_flags }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_stay_off_the_lab_links() {
        use forwarder::packet::{build_frame, checksum, ETH_HLEN, IP_HLEN};
        let mut f = vec![0u8; 64];
        let flow = |saddr| forwarder::packet::FlowKey { saddr, daddr: 0xC613_0101, sport: 1, dport: 2, tos: 0 };
        build_frame(&mut f, &flow(0xC612_0005), 64, 64, [0; 6], [0; 6]);
        keep_off_lab_links(&mut f);
        assert_eq!(&f[26..30], &[198, 18, 128, 5]);
        assert_eq!(checksum(&f[ETH_HLEN..ETH_HLEN + IP_HLEN]), 0, "header checksum still valid");
        build_frame(&mut f, &flow(0xC612_0305), 64, 64, [0; 6], [0; 6]);
        keep_off_lab_links(&mut f);
        assert_eq!(&f[26..30], &[198, 18, 3, 5], "other sources untouched");
    }
}
