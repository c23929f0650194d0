//! The running application: terminal set-up and restore (also on panic), the loop that
//! drains the source, ticks the model once per interval and redraws, and the keys. Changes
//! to the forwarder (prefetch depth, cache mode, flush) are written to its stats segment's
//! control block; the workers pick them up and publish the new setting, which the next
//! frame shows.

use crate::model::{Drill, Model};
use crate::source::{self, Notice, Source};
use crate::tty::{Input, Tty};
use crate::view::{self, AbView, Focus, Ui};
use crate::{Error, Result};
use analyzer::rules::Rules;
use analyzer::stages::Attributor;
use analyzer::symbolize::{Kallsyms, Symbolizer};
use collector::session::{RecordOptions, Target};
use compare::live::{AbStatus, LiveChange, LiveSetting};
use fwd_abi::{CacheMode, Prefetch, Segment};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What `top` watches.
#[derive(Debug, Clone)]
pub enum TopTarget {
    /// The bundled forwarder, started with this program and arguments; keys control it.
    Forwarder { program: PathBuf, args: Vec<String> },
    /// A running process: sampling and stages only, no control.
    Pid(i32),
    /// Every CPU, kernel included, with the Linux forwarding rules.
    All,
    /// A recording played back at its own pace.
    Replay(PathBuf),
}

/// Options of `top`.
#[derive(Debug, Clone)]
pub struct TopOptions {
    pub target: TopTarget,
    /// Redraw interval (default 1 s).
    pub interval: Duration,
    /// Samples per second (default 1000).
    pub freq: u64,
    /// Callchains, so shared helpers are charged to their caller's stage (default frame
    /// pointers; DWARF unwinding for programs built without them).
    pub call_graph: collector::perf_abi::CallGraph,
    /// Keep the live recording here (default: a temporary directory, removed at exit).
    pub output: Option<PathBuf>,
    /// Extra stage rules tried before the built-in ones (default none).
    pub stages: Option<PathBuf>,
    /// Quit after this many intervals (default: run until `q`).
    pub iterations: Option<u64>,
    /// Replay speed (default 1.0: as recorded).
    pub speed: f64,
    /// Set from outside (a signal handler) to end the run as `q` does, the terminal
    /// restored (default none).
    pub stop: Option<Arc<AtomicBool>>,
}

impl TopOptions {
    pub fn new(target: TopTarget) -> TopOptions {
        TopOptions {
            target,
            interval: Duration::from_secs(1),
            freq: 1000,
            call_graph: collector::perf_abi::CallGraph::FramePointer,
            output: None,
            stages: None,
            iterations: None,
            speed: 1.0,
            stop: None,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Ending {
    /// `q` (or Ctrl-C as a key).
    #[default]
    Quit,
    /// After the `iterations` asked for.
    Iterations,
    /// The `stop` flag was set (a signal).
    Stopped,
    /// The terminal went away (hang-up, end of file, read or write error): why, in words.
    TerminalGone(String),
}

/// What a run cost, reported after the terminal is restored, and how it ended.
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    pub ended: Ending,
    pub frames: u64,
    pub wall: Duration,
    /// CPU time of the screen thread (attribution, model, drawing).
    pub ui_cpu: Duration,
    /// CPU time of the collector (or replay) thread.
    pub source_cpu: Duration,
    /// From start to the first frame drawn, and to the first frame with data.
    pub first_frame: Option<Duration>,
    pub first_data: Option<Duration>,
}

impl RunStats {
    pub fn summary(&self) -> String {
        let pct = |d: Duration| 100.0 * d.as_secs_f64() / self.wall.as_secs_f64().max(1e-9);
        let ms = |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.0} ms", d.as_secs_f64() * 1e3));
        format!(
            "fwdscope top: {} frames in {:.1} s; screen thread {:.3} s CPU ({:.2}% of one core), collector thread {:.3} s ({:.2}%); first frame after {}, first frame with data after {}",
            self.frames,
            self.wall.as_secs_f64(),
            self.ui_cpu.as_secs_f64(),
            pct(self.ui_cpu),
            self.source_cpu.as_secs_f64(),
            pct(self.source_cpu),
            ms(self.first_frame),
            ms(self.first_data),
        )
    }
}

/// Removes a temporary recording directory at exit.
struct TempDir(Option<PathBuf>);
impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// Everything the loop owns.
struct App {
    model: Model,
    ui: Ui,
    source: Source,
    /// The forwarder's PID and stats segment (control and configuration).
    fwd_pid: Option<i32>,
    segment: Option<Segment>,
    /// The setting before the last change made with a key (prefetch depth, cache mode):
    /// the A of an A/B.
    prev: Option<(Prefetch, CacheMode)>,
    /// The B an A/B left in force: the A of the next change.
    base: Option<(Prefetch, CacheMode)>,
    /// A running A/B comparison.
    ab: Option<AbRun>,
}

/// An A/B comparison running on its own thread (`compare::live::ab_loop`).
struct AbRun {
    stop: Arc<AtomicBool>,
    status: Arc<Mutex<Option<AbStatus>>>,
    view: AbView,
    /// B's prefetch depth and cache mode (left in force at the end).
    b: (Prefetch, CacheMode),
}

/// A/B blocks: 100 ms with 50 ms discarded (the synthetic device on its own thread, as
/// `top` runs it, takes about 40 ms to follow a change of the worker's speed).
const AB_BLOCK: Duration = Duration::from_millis(100);
const AB_DISCARD: Duration = Duration::from_millis(50);

impl App {
    fn drain(&mut self) {
        while let Ok(n) = self.source.notices.try_recv() {
            match n {
                Notice::SamplingUnavailable(why) => self.model.sampling_error = Some(why),
                Notice::ForwarderPid(p) => {
                    self.fwd_pid = Some(p);
                    self.model.target = format!("forwarder pid {p}");
                }
                Notice::ForwarderConfig(p) => {
                    self.model.forwarder = Some(crate::model::ForwarderInfo::from_published(&p))
                }
                Notice::Failed(why) | Notice::Warning(why) => self.ui.message = Some(why),
            }
        }
        // Bounded per call, so keys stay responsive under a flood of samples.
        for _ in 0..512 {
            match self.source.batches.try_recv() {
                Ok(b) => {
                    if let collector::stream::Batch::Started { target_pid: Some(p), .. } = &b {
                        if self.fwd_pid.is_none() && self.ui.control {
                            self.model.target = format!("forwarder pid {p}");
                        }
                        self.fwd_pid.get_or_insert(*p);
                    }
                    self.model.apply(b);
                }
                Err(_) => break,
            }
        }
        self.open_segment();
    }

    fn open_segment(&mut self) {
        if self.segment.is_some() {
            return;
        }
        let Some(pid) = self.fwd_pid else { return };
        let Some(seg) = Segment::find_for(pid as u32) else { return };
        if seg.pid() != pid as u32 {
            return;
        }
        if let Some(p) = fwd_abi::Published::from_json(&seg.config_json()) {
            let mut info = crate::model::ForwarderInfo::from_published(&p);
            if info.tsc_hz == 0 {
                info.tsc_hz = seg.tsc_hz();
            }
            self.model.forwarder = Some(info);
        }
        self.segment = Some(seg);
    }

    /// A key; returns false to quit.
    fn key(&mut self, code: KeyCode, mods: KeyModifiers) -> bool {
        self.ui.message = None;
        match code {
            KeyCode::Char('q') => return false,
            KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return false,
            // Esc closes the help, else backs out of a symbol or a stage; it never quits
            // (only q does).
            KeyCode::Esc if self.ui.help => self.ui.help = false,
            KeyCode::Esc => self.back_out(),
            KeyCode::Enter => self.go_in(),
            KeyCode::Char('p') => {
                self.ui.paused = !self.ui.paused;
                self.source.set_paused(self.ui.paused);
            }
            KeyCode::Char('h') | KeyCode::Char('?') => self.ui.help = !self.ui.help,
            KeyCode::Char('s') => {
                self.model.sort = self.model.sort.next();
                self.model.symbols_resort();
            }
            KeyCode::Char('z') => self.model.toggle_mode(),
            KeyCode::Tab => self.ui.focus = self.ui.focus.next(),
            KeyCode::Down if self.ui.focus == Focus::Symbols => {
                let rows = if matches!(self.model.drill, Drill::Symbol { .. }) {
                    self.model.inside.len()
                } else {
                    self.model.symbols.len()
                };
                self.ui.scroll = (self.ui.scroll + 1).min(rows.saturating_sub(1));
            }
            KeyCode::Up if self.ui.focus == Focus::Symbols => self.ui.scroll = self.ui.scroll.saturating_sub(1),
            KeyCode::Down if self.ui.focus == Focus::Stages => {
                self.ui.stage_sel = (self.ui.stage_sel + 1).min(self.model.stages.len().saturating_sub(1));
            }
            KeyCode::Up if self.ui.focus == Focus::Stages => self.ui.stage_sel = self.ui.stage_sel.saturating_sub(1),
            KeyCode::Char('b') => self.toggle_ab(),
            KeyCode::Char('+') | KeyCode::Char('=') | KeyCode::Char('-') | KeyCode::Char('c') if self.ab.is_some() => {
                self.ui.message = Some("an A/B is running: b stops it first".into());
            }
            // Each press counts from the setting last requested, not from the one the
            // forwarder has confirmed so far: quick presses are never lost.
            KeyCode::Char('+') | KeyCode::Char('=') => self.control(|s, f, ui| {
                let to = ui.requested_prefetch.unwrap_or(f.prefetch).deeper();
                s.set_prefetch(to);
                ui.requested_prefetch = Some(to);
                format!("prefetch {to} requested (running {})", f.prefetch)
            }),
            KeyCode::Char('-') => self.control(|s, f, ui| {
                let to = ui.requested_prefetch.unwrap_or(f.prefetch).shallower();
                s.set_prefetch(to);
                ui.requested_prefetch = Some(to);
                format!("prefetch {to} requested (running {})", f.prefetch)
            }),
            KeyCode::Char('c') => self.control(|s, f, ui| {
                // From the mode last asked for (or running); a name the forwarder published
                // that is no mode of ours starts the cycle at its beginning.
                let to = ui.requested_cache.or_else(|| f.cache_mode()).map_or(CacheMode::ALL[0], CacheMode::next);
                s.set_cache_mode(to.code());
                ui.requested_cache = Some(to);
                format!("cache {to} requested (running {})", f.cache)
            }),
            KeyCode::Char('f') => self.control(|s, _, _| {
                s.request_flush();
                "route-cache flush requested".to_string()
            }),
            _ => {}
        }
        true
    }

    /// Enter: on the stage panel, list the selected stage's symbols; on the symbol panel,
    /// go inside the selected symbol (its hottest source lines, live).
    fn go_in(&mut self) {
        match (self.ui.focus, &self.model.drill) {
            (Focus::Stages, _) => {
                let Some(st) = view::stage_rows(&self.model).get(self.ui.stage_sel).map(|s| s.stage.clone()) else {
                    return;
                };
                self.model.set_drill(Drill::Stage(st.clone()));
                self.ui.focus = Focus::Symbols;
                self.ui.scroll = 0;
                self.ui.message = Some(format!("symbols of {st}: enter goes inside one, esc shows all"));
            }
            (Focus::Symbols, Drill::All | Drill::Stage(_)) => {
                let Some(s) = self.model.symbols.get(self.ui.scroll).cloned() else { return };
                self.model.set_drill(Drill::Symbol { stage: s.stage, symbol: s.symbol.clone(), dso: s.dso });
                self.ui.scroll = 0;
                self.ui.message =
                    Some(format!("inside {}: its hottest source lines, updated each tick; esc backs out", s.symbol));
            }
            _ => {}
        }
    }

    /// Esc (help closed): out of a symbol to its stage's symbols, out of a stage to all.
    fn back_out(&mut self) {
        let to = match &self.model.drill {
            Drill::Symbol { stage, .. } => Drill::Stage(stage.clone()),
            Drill::Stage(_) => Drill::All,
            Drill::All => return,
        };
        self.model.set_drill(to);
        self.ui.scroll = 0;
    }

    fn control(&mut self, act: impl FnOnce(&Segment, &crate::model::ForwarderInfo, &mut Ui) -> String) {
        self.ui.message = Some(if !self.ui.control {
            "no control here: -p, -a and --replay only observe".to_string()
        } else if let (Some(s), Some(f)) = (&self.segment, &self.model.forwarder) {
            // A stopped A/B's figures go with the setting they were about.
            if self.ab.is_none() {
                self.ui.ab = None;
            }
            // The A of an A/B: the setting in force before the first change still pending
            // (after an A/B, its B, which the model may not show yet).
            if let Some(b) = self.base.take() {
                self.prev = Some(b);
            } else if self.ui.requested_prefetch.is_none() && self.ui.requested_cache.is_none() {
                self.prev = f.cache_mode().map(|c| (f.prefetch, c));
            }
            act(s, f, &mut self.ui)
        } else {
            "the forwarder's stats segment is not open yet".to_string()
        });
    }

    /// Forget the requests the forwarder now runs (its workers publish the setting they run).
    fn confirm(&mut self) {
        let Some(f) = &self.model.forwarder else { return };
        if self.ui.requested_prefetch == Some(f.prefetch) {
            self.ui.requested_prefetch = None;
        }
        if self.ui.requested_cache.is_some() && self.ui.requested_cache == f.cache_mode() {
            self.ui.requested_cache = None;
        }
    }
}

impl App {
    /// Key `b`: start an A/B of the previous setting against the current one, or stop it.
    fn toggle_ab(&mut self) {
        if let Some(run) = self.ab.take() {
            run.stop.store(true, Ordering::Relaxed);
            // The last figures stay in the A/B panel, marked stopped.
            let mut view = run.view.clone();
            view.status = run.status.lock().ok().and_then(|s| s.clone());
            view.stopped = true;
            self.ui.message = Some(format!("A/B stopped: {} left in force", view.b));
            // B is left in force: asked for until the forwarder is seen running it, and the
            // setting the next change starts from.
            let (p, c) = run.b;
            self.ui.requested_prefetch = Some(p);
            self.ui.requested_cache = Some(c);
            self.base = Some((p, c));
            self.ui.ab = Some(view);
            return;
        }
        let (Some(pid), Some(f), true) = (self.fwd_pid, &self.model.forwarder, self.ui.control) else {
            self.ui.message = Some("A/B needs the bundled forwarder started by top (control)".into());
            return;
        };
        let Some((p0, c0)) = self.prev else {
            self.ui.message = Some("change a setting first (+, -, c): A/B compares it with the one before".into());
            return;
        };
        let setting = |p: Prefetch, c: CacheMode| {
            LiveSetting::new(
                &format!("prefetch {p} {c}"),
                LiveChange { prefetch: Some(p), cache: Some(c), ..Default::default() },
            )
        };
        // B is the setting last asked for, also when the forwarder has not confirmed it yet.
        let p1 = self.ui.requested_prefetch.unwrap_or(f.prefetch);
        let Some(c1) = self.ui.requested_cache.or_else(|| f.cache_mode()) else {
            self.ui.message = Some(format!("A/B needs a cache mode of the bundled forwarder, not `{}`", f.cache));
            return;
        };
        let (a, b) = (setting(p0, c0), setting(p1, c1));
        let view = AbView { a: a.label.clone(), b: b.label.clone(), status: None, stopped: false };
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(None));
        let (stop2, status2) = (stop.clone(), status.clone());
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let seed = (now ^ (u64::from(pid as u32) << 32)) | 1;
        let spawned = std::thread::Builder::new().name("fwdscope-ab".into()).spawn(move || {
            let Some(seg) = Segment::find_for(pid as u32) else { return };
            let threads = collector::contention::worker_threads(pid as u32).unwrap_or_default();
            let timing = compare::live::AbTiming { block: AB_BLOCK, discard: AB_DISCARD, seed };
            compare::live::ab_loop(&seg, &threads, [a, b], timing, &stop2, |st| {
                if let Ok(mut s) = status2.lock() {
                    *s = Some(st.clone());
                }
            });
        });
        match spawned {
            Ok(_) => {
                // The panel says what runs (an A/A when the two are the same setting).
                self.ui.message = None;
                self.ui.ab = Some(view.clone());
                self.ab = Some(AbRun { stop, status, view, b: (p1, c1) });
            }
            Err(e) => self.ui.message = Some(format!("A/B could not start a thread: {e}")),
        }
    }

    /// The running A/B's figures so far, for its panel.
    fn ab_update(&mut self) {
        let Some(run) = &self.ab else { return };
        let mut view = run.view.clone();
        view.status = run.status.lock().ok().and_then(|s| s.clone());
        self.ui.ab = Some(view);
    }
}

/// Run `top` on the terminal until `q` (or `iterations`); returns what it cost.
pub fn run(opts: &TopOptions) -> Result<RunStats> {
    let t_start = Instant::now();
    let rules = Rules::builtin_with(opts.stages.as_deref())?;
    let (source, model, control, _tmp) = match &opts.target {
        TopTarget::Replay(dir) => {
            let rec = analyzer::input::open(dir)?.into_recording(dir)?;
            let sym = Symbolizer::for_recording(&rec)?;
            let model = Model::new(format!("replay {}", dir.display()), Attributor::new(sym, rules));
            (source::replay(dir.clone(), opts.speed)?, model, false, TempDir(None))
        }
        t => live_source(t, opts, rules),
    };
    let mut app = App {
        model,
        ui: Ui { control, ..Ui::default() },
        source,
        fwd_pid: None,
        segment: None,
        prev: None,
        base: None,
        ab: None,
    };
    if let TopTarget::Pid(p) = opts.target {
        app.fwd_pid = Some(p);
    }
    let tty = Tty::open().map_err(Error::Terminal)?;
    let mut terminal = ratatui::try_init().map_err(Error::Terminal)?;
    let mut stats = RunStats::default();
    let result = event_loop(&mut app, &mut terminal, &tty, opts, &mut stats, t_start);
    // A terminal that went away fails the next draw or read with EIO before a poll sees
    // the hang-up: that is the terminal gone too, not an error of top's.
    let result = match result {
        Err(Error::Terminal(e)) => match tty.wait(Duration::ZERO) {
            Input::Gone(why) => Ok(Ending::TerminalGone(format!("{why} ({e})"))),
            _ => Err(Error::Terminal(e)),
        },
        r => r,
    };
    if let Some(run) = &app.ab {
        run.stop.store(true, Ordering::Relaxed);
    }
    // Restoring a terminal that went away fails at once (EIO), and is not retried.
    ratatui::restore();
    stats.ui_cpu = source::thread_cpu();
    stats.wall = t_start.elapsed();
    stats.source_cpu = app.source.finish();
    result.map(|ended| RunStats { ended, ..stats })
}

/// The live source of target `t` (the collector recording it, into `--output` or a
/// temporary directory), its model, whether the keys control a forwarder, and the
/// temporary directory to remove at exit.
fn live_source(t: &TopTarget, opts: &TopOptions, rules: Rules) -> (Source, Model, bool, TempDir) {
    let (target, what, control) = match t {
        TopTarget::Forwarder { program, args } => {
            (Target::Forwarder { program: program.clone(), args: args.clone() }, "forwarder".to_string(), true)
        }
        // An in-kernel forwarder's process (the lab's XDP forwarder) does its work
        // in every CPU's softirq: its samples are the whole machine's.
        TopTarget::Pid(p)
            if fwd_abi::Segment::find_for(*p as u32).is_some_and(|s| collector::stat::workers_are_cpus(&s)) =>
        {
            (Target::All, format!("pid {p}'s in-kernel forwarder, every CPU"), false)
        }
        TopTarget::Pid(p) => (Target::Pid(*p), format!("pid {p}"), false),
        _ => (Target::All, "system-wide".to_string(), false),
    };
    let (dir, tmp) = match &opts.output {
        Some(d) => (d.clone(), TempDir(None)),
        None => {
            let d = std::env::temp_dir().join(format!("fwdscope-top-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            (d.clone(), TempDir(Some(d)))
        }
    };
    let mut ro = RecordOptions::new(dir, target);
    ro.force = opts.output.is_none();
    ro.freq = Some(opts.freq);
    ro.call_graph = opts.call_graph;
    ro.command = std::env::args().collect();
    let sym = Symbolizer::new(Vec::new(), Kallsyms::current());
    (source::live(ro), Model::new(what, Attributor::new(sym, rules)), control, tmp)
}

/// Draw a frame of `app` and count it.
fn draw(terminal: &mut ratatui::DefaultTerminal, app: &App, stats: &mut RunStats) -> Result<()> {
    terminal.draw(|f| view::draw(f, &app.model, &app.ui))?;
    stats.frames += 1;
    Ok(())
}

/// The loop: keys as they come, the source drained, the model ticked once per interval,
/// a redraw after either; until a quit key, the `stop` flag, `iterations` or the terminal
/// going away.
fn event_loop(
    app: &mut App,
    terminal: &mut ratatui::DefaultTerminal,
    tty: &Tty,
    opts: &TopOptions,
    stats: &mut RunStats,
    t_start: Instant,
) -> Result<Ending> {
    draw(terminal, app, stats)?;
    stats.first_frame = Some(t_start.elapsed());
    let mut next_tick = Instant::now() + opts.interval;
    loop {
        if opts.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Ok(Ending::Stopped);
        }
        let wait = next_tick.saturating_duration_since(Instant::now()).min(Duration::from_millis(50));
        let mut redraw = false;
        match tty.wait(wait) {
            Input::Gone(why) => return Ok(Ending::TerminalGone(why)),
            Input::Timeout => {}
            Input::Ready => match take_keys(app)? {
                ControlFlow::Break(ending) => return Ok(ending),
                ControlFlow::Continue(taken) => redraw |= taken,
            },
        }
        app.drain();
        app.ab_update();
        if Instant::now() >= next_tick {
            next_tick += opts.interval;
            if !app.ui.paused {
                app.model.tick();
                app.confirm();
                if stats.first_data.is_none() && (app.model.interval_samples > 0 || app.model.rates.tx_mpps > 0.0) {
                    stats.first_data = Some(t_start.elapsed());
                }
            }
            redraw = true;
            if opts.iterations.is_some_and(|n| app.model.ticks >= n) {
                draw(terminal, app, stats)?;
                return Ok(Ending::Iterations);
            }
        }
        if redraw {
            draw(terminal, app, stats)?;
        }
    }
}

/// The keys waiting: crossterm reads only when bytes wait (see `tty`); then every event it
/// parsed from them, so keys pressed together are all taken. Breaks at a quit key;
/// otherwise whether a key was taken.
fn take_keys(app: &mut App) -> Result<ControlFlow<Ending, bool>> {
    let mut taken = false;
    for _ in 0..256 {
        if !event::poll(Duration::ZERO)? {
            break;
        }
        if let Event::Key(k) = event::read()? {
            if k.kind != KeyEventKind::Release {
                if !app.key(k.code, k.modifiers) {
                    return Ok(ControlFlow::Break(Ending::Quit));
                }
                taken = true;
            }
        }
    }
    Ok(ControlFlow::Continue(taken))
}
