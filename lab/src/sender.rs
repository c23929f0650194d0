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
    let lab = Lab::new(&a.name)?;
    check_lab(&lab)?;
    let mut gen = flow_generator(a, &lab)?;
    enter_netns(&lab.ns("snd"))?;
    let s0 = format!("{}-s0", lab.name);
    let macs = macs(&s0)?;
    let (tx, via) = open_port(a, &s0)?;
    let s0_c = std::ffi::CString::new(s0.clone()).context("interface name")?;
    let mut buf = vec![0u8; forwarder::nic::BUF_SIZE];
    let out = Sent {
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
    };
    let limit = a.duration.map(std::time::Duration::from_secs_f64);
    let mut t = Transmit { a, tx, out, t0: std::time::Instant::now(), limit, s0, s0_c };
    let count = a.count.unwrap_or(if a.duration.is_some() { u64::MAX } else { DEFAULT_COUNT });
    t.run(count, &mut gen, &mut buf, macs);
    Ok(t.finish(&lab))
}

/// A lab to send through: its forwarder alive, nothing of it missing (sending through a
/// lab whose forwarder died, or that lacks a namespace, a link or its forwarding setting,
/// would "succeed" with nothing arriving); routes deleted by hand are said, not refused.
fn check_lab(lab: &Lab) -> Result<()> {
    if let Some(dead) = lab.dead_forwarder() {
        bail!("lab {}: {dead}", lab.name);
    }
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
    Ok(())
}

/// The traffic generator `a` asks for over the lab's route table; the calling thread is
/// pinned to `a.cpu` (when given) before the generator's destination table is built.
fn flow_generator(a: &SendOptions, lab: &Lab) -> Result<forwarder::traffic::FlowGen> {
    use forwarder::traffic::{DstChooser, FlowGen, TrafficProfile};
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
    Ok(FlowGen::new(&profile, chooser, 0, 1))
}

/// The frames' source and destination MACs: the sender interface `s0`'s own, and its
/// neighbour's, the forwarding namespace's 198.18.0.2.
fn macs(s0: &str) -> Result<([u8; 6], [u8; 6])> {
    use forwarder::nic::afpacket::{arp_table, if_mac, neighbour_mac};
    let src = if_mac(s0)?;
    let dst = neighbour_mac(&arp_table()?, std::net::Ipv4Addr::new(198, 18, 0, 2), s0)
        .context("no neighbour entry for 198.18.0.2 in the sender namespace (rebuild the lab)")?;
    Ok((src, dst))
}

/// The port on interface `s0` that `a.via` asks for (default: afxdp where it works), and
/// which it is.
fn open_port(a: &SendOptions, s0: &str) -> Result<(Port, Via)> {
    // With several queues (an afxdp lab with several workers) the flows must spread over
    // them, as a NIC's RSS would: the device's queue selection hashes each flow; with one,
    // the qdisc is bypassed (PACKET_QDISC_BYPASS picks the sending CPU's queue).
    let queues = forwarder::nic::afxdp::queue_counts(s0).1;
    let via = a.via.unwrap_or_else(|| match crate::netns::default_driver().0 {
        crate::netns::LabDriver::Afxdp => Via::Afxdp,
        crate::netns::LabDriver::Afpacket => Via::Afpacket,
    });
    let tx = match via {
        Via::Afpacket => Port::Afp(forwarder::nic::afpacket::AfpTx::open_with(s0, queues <= 1)?),
        Via::Afxdp => Port::Xdp(forwarder::nic::afxdp::XskTx::open(s0)?),
    };
    Ok((tx, via))
}

/// The generator's next frame into `buf`, addressed from `src` to `dst` and kept off the
/// lab's links; its length.
fn next_frame(gen: &mut forwarder::traffic::FlowGen, buf: &mut [u8], (src, dst): ([u8; 6], [u8; 6])) -> usize {
    let len = usize::from(gen.next_frame(buf));
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    keep_off_lab_links(buf);
    len
}

/// A send in progress: the port, what was sent so far, and when it is to end.
struct Transmit<'a> {
    a: &'a SendOptions,
    tx: Port,
    out: Sent,
    t0: std::time::Instant,
    limit: Option<std::time::Duration>,
    /// The sender's interface, by name and as the C string the kernel is asked about.
    s0: String,
    s0_c: std::ffi::CString,
}

impl Transmit<'_> {
    /// Whether the duration asked for is up.
    fn expired(&self) -> bool {
        self.limit.is_some_and(|l| self.t0.elapsed() >= l)
    }

    /// Whether a signal asked the sending to end.
    fn stopped(&self) -> bool {
        self.a.stop.as_ref().is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Why the interface cannot send anymore, if it cannot: gone when the lab is taken down
    /// (or changed) under the sender, set down, or without carrier when it lost its peer.
    fn gone(&self) -> Option<String> {
        let s0 = &self.s0;
        // SAFETY: if_nametoindex reads the NUL-terminated name it is given.
        if unsafe { libc::if_nametoindex(self.s0_c.as_ptr()) } == 0 {
            return Some(format!("interface {s0} went away (the lab was taken down or changed)"));
        }
        match if_flags(&self.s0_c) {
            Some(f) if f & libc::IFF_UP == 0 => Some(format!("interface {s0} was set down")),
            Some(f) if f & libc::IFF_RUNNING == 0 => {
                Some(format!("interface {s0} lost its carrier (its peer in the forwarding namespace is down or gone)"))
            }
            _ => None,
        }
    }

    /// Count what the kernel reports done.
    fn account(&mut self, d: forwarder::nic::afpacket::TxDone) {
        self.out.packets += d.sent;
        self.out.bytes += d.bytes;
        self.out.refused += d.refused;
    }

    /// Let the kernel send what is queued, and count what it sent.
    fn kick_and_count(&mut self) {
        self.tx.kick();
        let d = self.tx.reclaim();
        self.account(d);
    }

    /// Send up to `count` frames of `gen` (through `buf`, addressed by `macs`): paced by
    /// `--rate` if given, until the duration is up, a signal comes or the interface goes.
    /// The clock is read every 64 frames at full speed (reading it per frame cost the
    /// sender about 4% of its CPU), every frame when paced.
    fn run(&mut self, count: u64, gen: &mut forwarder::traffic::FlowGen, buf: &mut [u8], macs: ([u8; 6], [u8; 6])) {
        let mut done = self.expired();
        let mut queued = 0u64;
        while queued < count && !done {
            if self.ahead_of_pace(queued) {
                done = self.expired();
                continue;
            }
            let len = next_frame(gen, buf, macs);
            self.push_waiting(&buf[..len], &mut done);
            if done || self.out.ended.is_some() {
                break;
            }
            queued += 1;
            if queued.is_multiple_of(64) {
                self.kick_and_count();
                done = self.expired();
                if self.stopped() {
                    self.out.ended = Some("stopped by a signal".into());
                    break;
                }
            } else if self.a.rate.is_some() {
                done = self.expired();
            }
        }
    }

    /// Paced: whether `queued` frames are ahead of rate x elapsed; then the kernel is let
    /// send and the sender waits 50 µs.
    fn ahead_of_pace(&mut self, queued: u64) -> bool {
        let Some(r) = self.a.rate else { return false };
        let due = (self.t0.elapsed().as_secs_f64() * r) as u64;
        if queued < due {
            return false;
        }
        self.kick_and_count();
        std::thread::sleep(std::time::Duration::from_micros(50));
        true
    }

    /// Queue `frame`, waiting while every slot is with the kernel (back-pressure, no loss);
    /// a ring that stays full is checked every 1024 tries: the time up (`done`), a signal
    /// or the interface gone (`ended`) end the wait with the frame unsent.
    fn push_waiting(&mut self, frame: &[u8], done: &mut bool) {
        let mut spins = 0u32;
        while !self.tx.push(frame) {
            // Every slot with the kernel: let it send, then retry.
            self.kick_and_count();
            std::thread::yield_now();
            spins += 1;
            if spins.is_multiple_of(1024) {
                *done = self.expired();
                if self.stopped() {
                    self.out.ended = Some("stopped by a signal".into());
                } else if let Some(why) = self.gone() {
                    self.out.ended = Some(why);
                }
                if *done || self.out.ended.is_some() {
                    break;
                }
            }
        }
    }

    /// The send's end: what the kernel still holds is waited for (briefly when the
    /// interface is gone) and counted, the rate computed, and why it ended early said (the
    /// interface gone or stuck, the lab changed under it).
    fn finish(mut self, lab: &Lab) -> Sent {
        if self.out.ended.is_none() {
            if let Some(why) = self.gone() {
                self.out.ended = Some(why);
            }
        }
        let d = self.tx.drain(if self.out.ended.is_some() { 200 } else { 2000 });
        self.account(d);
        let out = &mut self.out;
        out.seconds = self.t0.elapsed().as_secs_f64();
        out.pps = out.packets as f64 / out.seconds.max(1e-9);
        if self.tx.in_flight() > 0 && out.ended.is_none() {
            out.ended = Some(format!(
                "{} frames were still with the kernel after 2 s (interface {} stopped sending)",
                self.tx.in_flight(),
                self.s0
            ));
        }
        // A lab changed under the send (a link of the forwarding namespace or the sink
        // deleted or set down): what was sent after that went nowhere.
        if out.ended.is_none() && !lab.complete().unwrap_or(false) {
            out.ended = Some(
                "the lab is incomplete after the send (a namespace, a link or its forwarding setting went away \
                 during it): the packets sent after that were not forwarded"
                    .into(),
            );
        }
        self.out
    }
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
