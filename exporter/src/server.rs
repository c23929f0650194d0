//! The HTTP side of the exporter: a tiny_http server on its own thread answering
//! `GET /metrics` with the segment as it is at that moment, and 503 with the reason once the
//! forwarder is gone (exited, killed, or stopped mid-publish), never its last numbers.

use crate::families::{encode, ForwarderMeta, SnapshotCollector};
use crate::{Error, Result};
use fwd_abi::{Segment, State, COUNTER_NAMES};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
    scrapes: Arc<AtomicU64>,
}

impl Exporter {
    /// Listen on `listen` (HOST:PORT; port 0 picks a free one, see [`Exporter::local_addr`])
    /// and answer scrapes from `source` on a thread of its own.
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
        let addr = listener.local_addr().map_err(|e| err(e.to_string()))?;
        let server = Arc::new(tiny_http::Server::from_listener(listener, None).map_err(|e| err(e.to_string()))?);
        let scrapes = Arc::new(AtomicU64::new(0));
        let (srv, count) = (server.clone(), scrapes.clone());
        let thread = std::thread::Builder::new()
            .name("fwd-metrics".into())
            .spawn(move || serve(&srv, &source, &count))
            .map_err(|e| err(format!("cannot start the exporter thread: {e}")))?;
        Ok(Exporter { server, thread: Some(thread), addr, scrapes })
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
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(server: &tiny_http::Server, source: &SegmentSource, scrapes: &AtomicU64) {
    use tiny_http::{Header, Method, Response};
    let header = |v: &str| Header::from_bytes(&b"Content-Type"[..], v.as_bytes()).ok();
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("").to_string();
        let (status, ctype, body) = match (req.method(), path.as_str()) {
            (Method::Get | Method::Head, "/metrics") => {
                scrapes.fetch_add(1, Ordering::Relaxed);
                match source.answer() {
                    Answer::Metrics(text) => (200, OPENMETRICS, text),
                    Answer::Unavailable(why) => (503, "text/plain; charset=utf-8", format!("{why}\n")),
                }
            }
            (Method::Get | Method::Head, "/") => (
                200,
                "text/plain; charset=utf-8",
                format!(
                    "fwdscope exporter for forwarder {} (stats segment {}): metrics at /metrics\n",
                    source.meta().pid,
                    source.path().display()
                ),
            ),
            (Method::Get | Method::Head, _) => {
                (404, "text/plain; charset=utf-8", format!("{path}: not found; the metrics are at /metrics\n"))
            }
            _ => (405, "text/plain; charset=utf-8", "only GET and HEAD are answered\n".to_string()),
        };
        let mut resp = Response::from_string(body).with_status_code(status);
        if let Some(h) = header(ctype) {
            resp = resp.with_header(h);
        }
        // A scraper that hung up is its own business; the next request is served.
        let _ = req.respond(resp);
    }
}
