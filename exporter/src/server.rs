//! The HTTP side of the exporter: answers `GET /metrics` with the segment as it is at that
//! moment, and 503 with the reason once the forwarder is gone (exited, killed, or stopped
//! mid-publish), never its last numbers.
//!
//! Bounded whatever the clients do: one accepting thread and [`WORKERS`] answering threads
//! (a fixed pool, not a thread per connection). The accepting thread reads every request
//! head itself, non-blocking, polling all connections at once: a client has
//! [`REQUEST_DEADLINE`] to send its head (at most [`MAX_HEAD`] bytes, parsed with
//! httparse), at most [`PENDING`] connections wait for theirs (a new one closes the oldest),
//! and only a complete request goes to a worker. So idle or slow connections never hold a
//! worker, and a scraper's request is answered while they wait. At most [`QUEUE`] complete
//! requests wait for a worker; past it a request gets a 503 at once. Each answer closes the
//! connection. (An async server was the other way: tokio and hyper are
//! in the build through polars, but their server features would rebuild polars.)

use crate::families::{encode, ForwarderMeta, SnapshotCollector};
use crate::{Error, Result};
use fwd_abi::{Segment, State, COUNTER_NAMES};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Threads answering requests.
pub const WORKERS: usize = 2;
/// Complete requests waiting for a worker, at most; past it a request gets 503.
pub const QUEUE: usize = 32;
/// Connections whose request head has not arrived yet, at most; a new connection past it
/// closes the oldest of them.
pub const PENDING: usize = 256;
/// Connections the kernel queues for the accepting thread (listen's backlog; Linux caps
/// it at net.core.somaxconn, 4096 by default).
pub const BACKLOG: i32 = 1024;
/// How long a client has to send its whole request head.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// The longest request head read (bytes).
pub const MAX_HEAD: usize = 8192;

/// The content type of OpenMetrics text, which Prometheus asks for first.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a scrape waits for a worker's counter block to be whole before answering 503
/// (a worker publishes in well under a microsecond; a block mid-write for this long has a
/// stopped or dead writer).
const PATIENCE: Duration = Duration::from_millis(100);

/// A forwarder's stats segment as the exporter reads it.
pub struct SegmentSource {
    seg: Segment,
    meta: ForwarderMeta,
    index: Vec<Option<usize>>,
}

/// What a scrape gets.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The OpenMetrics text of the segment now.
    Metrics(String),
    /// Why there are no current numbers (served as 503).
    Unavailable(String),
}

impl SegmentSource {
    /// Read an opened segment (this build's counters are looked up by the names the
    /// segment publishes, so a forwarder of another build is read by name).
    pub fn new(seg: Segment) -> SegmentSource {
        let names = seg.counter_names();
        let index = COUNTER_NAMES.iter().map(|n| names.iter().position(|m| m == n)).collect();
        SegmentSource { meta: ForwarderMeta::from_segment(&seg), seg, index }
    }

    /// The segment of the running forwarder `pid`.
    pub fn for_pid(pid: u32) -> Result<SegmentSource> {
        if !fwd_abi::segment::process_runs(pid) {
            return Err(Error::NoForwarder(format!("process {pid} is not running")));
        }
        Segment::find_for(pid).map(SegmentSource::new).ok_or_else(|| {
            Error::NoForwarder(format!(
                "process {pid} has no fwdscope stats segment mapped: is it a fwdscope forwarder (still starting?) and are we allowed to read its /proc/{pid}/maps?"
            ))
        })
    }

    /// The segment file at `path`.
    pub fn open(path: &std::path::Path) -> Result<SegmentSource> {
        Ok(SegmentSource::new(Segment::open(path)?))
    }

    pub fn meta(&self) -> &ForwarderMeta {
        &self.meta
    }
    pub fn path(&self) -> &std::path::Path {
        self.seg.path()
    }

    /// The forwarder's counters now, or why not.
    pub fn answer(&self) -> Answer {
        let pid = self.meta.pid;
        match self.seg.state() {
            State::Initializing => return Answer::Unavailable(format!("forwarder {pid} is still starting")),
            State::Exited => {
                return Answer::Unavailable(format!(
                    "forwarder {pid} has exited: its last counters are final and no longer current"
                ))
            }
            State::Running => {}
        }
        if !fwd_abi::segment::process_runs(pid) {
            return Answer::Unavailable(format!(
                "forwarder {pid} is gone without marking its stats segment exited (killed?)"
            ));
        }
        let Some(snapshot) = self.seg.snapshot_within(PATIENCE) else {
            return Answer::Unavailable(format!(
                "forwarder {pid}: a worker's counters stayed mid-write for {} ms (the process is stopped or hung)",
                PATIENCE.as_millis()
            ));
        };
        let collector = SnapshotCollector { meta: self.meta.clone(), snapshot, index: self.index.clone() };
        match encode(collector) {
            Ok(text) => Answer::Metrics(text),
            Err(_) => Answer::Unavailable("the metrics could not be encoded".into()),
        }
    }
}

/// A running exporter: stops (and frees its port) when dropped.
pub struct Exporter {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    addr: SocketAddr,
    scrapes: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
}

impl Exporter {
    /// Listen on `listen` (HOST:PORT; port 0 picks a free one, see [`Exporter::local_addr`])
    /// and answer scrapes from `source` on threads of its own.
    pub fn start(listen: &str, source: SegmentSource) -> Result<Exporter> {
        let err = |msg: String| Error::Listen { addr: listen.to_string(), msg };
        let addrs: Vec<SocketAddr> = listen
            .to_socket_addrs()
            .map_err(|e| err(format!("{e}: expected HOST:PORT, for example 127.0.0.1:9469")))?
            .collect();
        let listener = TcpListener::bind(&addrs[..]).map_err(|e| {
            err(match e.kind() {
                std::io::ErrorKind::AddrInUse => {
                    "the port is in use by another process: choose another port (or stop the other exporter)".into()
                }
                std::io::ErrorKind::PermissionDenied => format!("{e}: ports below 1024 need root"),
                std::io::ErrorKind::AddrNotAvailable => format!("{e}: no interface of this machine has that address"),
                _ => e.to_string(),
            })
        })?;
        // The kernel's queue of connections not yet accepted: std listens with 128, so a
        // burst of more (a flood of idle connections, many scrapers at once) overflowed it
        // and the kernel dropped their handshakes, to be retried a second or more later,
        // while the accepting thread was merely late. Linux takes a second listen() as a
        // new backlog (capped by net.core.somaxconn).
        // SAFETY: listen(2) on the socket this function owns.
        if unsafe { libc::listen(listener.as_raw_fd(), BACKLOG) } != 0 {
            return Err(err(format!("listen: {}", std::io::Error::last_os_error())));
        }
        let addr = listener.local_addr().map_err(|e| err(e.to_string()))?;
        let (stop, scrapes, refused) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (tx, rx) = mpsc::sync_channel::<Request>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let source = Arc::new(source);
        let mut threads = Vec::new();
        for i in 0..WORKERS {
            let (rx, source, scrapes) = (rx.clone(), source.clone(), scrapes.clone());
            let t = std::thread::Builder::new()
                .name(format!("fwd-metrics-{i}"))
                .spawn(move || loop {
                    // The channel closes when the accepting thread ends.
                    let next = match rx.lock() {
                        Ok(r) => r.recv(),
                        Err(_) => return,
                    };
                    let Ok(request) = next else { return };
                    serve(request, &source, &scrapes);
                })
                .map_err(|e| err(format!("cannot start the exporter's threads: {e}")))?;
            threads.push(t);
        }
        let (flag, count) = (stop.clone(), refused.clone());
        let t = std::thread::Builder::new()
            .name("fwd-metrics".into())
            .spawn(move || accept(&listener, &tx, &flag, &count))
            .map_err(|e| err(format!("cannot start the exporter's threads: {e}")))?;
        threads.push(t);
        Ok(Exporter { stop, threads, addr, scrapes, refused })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    /// `http://ADDR/metrics`.
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }
    /// Scrapes of `/metrics` answered so far (200 or 503).
    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(Ordering::Relaxed)
    }
    /// Connections turned away: closed while waiting for their head because [`PENDING`]
    /// newer ones came, or answered 503 because [`QUEUE`] requests were already waiting.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A complete request head, for a worker to answer.
struct Request {
    stream: TcpStream,
    method: String,
    path: String,
}

/// A connection whose request head is still arriving.
struct Pending {
    stream: TcpStream,
    buf: Vec<u8>,
    deadline: Instant,
}

/// What more bytes of a request head make of it.
enum Head {
    Complete(String, String),
    Partial,
    Bad,
}

fn parse_head(buf: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => match (req.method, req.path) {
            (Some(m), Some(p)) => Head::Complete(m.to_string(), p.to_string()),
            _ => Head::Bad,
        },
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => Head::Partial,
        _ => Head::Bad,
    }
}

/// Accept and read request heads until `stop`, polling the listener and every pending
/// connection at once (so `stop` is seen within 100 ms): a complete request is queued for
/// a worker (or answered 503 when [`QUEUE`] are waiting); a connection that closes, sends
/// no HTTP, or misses [`REQUEST_DEADLINE`] is closed without an answer.
fn accept(listener: &TcpListener, queue: &mpsc::SyncSender<Request>, stop: &AtomicBool, refused: &AtomicU64) {
    let _ = listener.set_nonblocking(true);
    let mut pending: Vec<Pending> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
            .chain(pending.iter().map(|p| p.stream.as_raw_fd()))
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: poll reads and writes the pollfds of the vector it is given, whose
        // length it is told.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        let now = Instant::now();
        let mut keep: Vec<Pending> = Vec::with_capacity(pending.len());
        for (mut p, fd) in pending.drain(..).zip(fds.iter().skip(1)) {
            if n > 0 && fd.revents != 0 {
                let mut chunk = [0u8; 1024];
                match p.stream.read(&mut chunk) {
                    Ok(0) => continue,
                    Ok(k) => p.buf.extend_from_slice(&chunk[..k]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => continue,
                }
                match parse_head(&p.buf) {
                    Head::Complete(method, path) => {
                        let _ = p.stream.set_nonblocking(false);
                        let _ = p.stream.set_write_timeout(Some(REQUEST_DEADLINE));
                        match queue.try_send(Request { stream: p.stream, method, path }) {
                            Ok(()) => {}
                            Err(mpsc::TrySendError::Full(mut r)) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                                let _ = respond(
                                    &mut r.stream,
                                    503,
                                    "text/plain; charset=utf-8",
                                    "busy: too many requests waiting\n",
                                    false,
                                );
                            }
                            Err(mpsc::TrySendError::Disconnected(_)) => return,
                        }
                        continue;
                    }
                    Head::Bad => continue,
                    Head::Partial => {}
                }
            }
            if now < p.deadline {
                keep.push(p);
            }
        }
        pending = keep;
        if n > 0 && fds[0].revents != 0 {
            while let Ok((stream, _)) = listener.accept() {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if pending.len() >= PENDING {
                    // The oldest waiting connection makes room: a flood of idle
                    // connections cannot keep a scraper out.
                    pending.remove(0);
                    refused.fetch_add(1, Ordering::Relaxed);
                }
                pending.push(Pending { stream, buf: Vec::new(), deadline: Instant::now() + REQUEST_DEADLINE });
            }
        }
    }
}

/// Write one response and close: `Connection: close`, no body for HEAD.
fn respond(stream: &mut TcpStream, status: u16, ctype: &str, body: &str, head_only: bool) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !head_only {
        out.push_str(body);
    }
    stream.write_all(out.as_bytes())?;
    stream.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Ok(())
}

/// Answer one connection's request.
fn serve(request: Request, source: &SegmentSource, scrapes: &AtomicU64) {
    let Request { mut stream, method, path: url } = request;
    let path = url.split('?').next().unwrap_or("").to_string();
    let get = method == "GET" || method == "HEAD";
    let (status, ctype, body) = match (get, path.as_str()) {
        (true, "/metrics") => {
            scrapes.fetch_add(1, Ordering::Relaxed);
            match source.answer() {
                Answer::Metrics(text) => (200, OPENMETRICS, text),
                Answer::Unavailable(why) => (503, "text/plain; charset=utf-8", format!("{why}\n")),
            }
        }
        (true, "/") => (
            200,
            "text/plain; charset=utf-8",
            format!(
                "fwdscope exporter for forwarder {} (stats segment {}): metrics at /metrics\n",
                source.meta().pid,
                source.path().display()
            ),
        ),
        (true, _) => (404, "text/plain; charset=utf-8", format!("{path}: not found; the metrics are at /metrics\n")),
        _ => (405, "text/plain; charset=utf-8", "only GET and HEAD are answered\n".to_string()),
    };
    // A scraper that hung up is its own business; the next request is served.
    let _ = respond(&mut stream, status, ctype, &body, method == "HEAD");
}
