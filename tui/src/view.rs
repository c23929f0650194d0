//! Rendering a [`Model`] with ratatui: the header (target, forwarder settings, the events
//! actually used, Mpps with a one-minute sparkline), the stage panel (sampled cost per
//! packet beside the forwarder's own stage clocks), the rtstat panel (route-cache columns
//! per interval, and per worker), the top symbols, the A/B panel while one runs, a status
//! line and the help overlay. Terminals under 80x24 get a compact layout; under 40x12 a
//! plain notice.
//!
//! A number is never cut: columns are wide enough for what they hold, a figure too long
//! for its column is written shorter (`1.2M`), and lines of text have shorter forms tried
//! in turn. What does not fit goes whole, in this order: when the height runs short, the
//! workers panel first, then symbol rows down to the top one, then stage rows from the
//! bottom (waiting, then the device), then the symbols panel; when the width runs short,
//! the rtstat panel's columns from the right (ovrf/s, miss/s, ign/s, gc/s), then (under 80
//! columns) the rtstat and workers panels, and the rate sparkline takes what is left.

use crate::model::{Drill, Model, StageLine, SymbolMode};
use compare::live::AbStatus;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Sparkline, Table};
use ratatui::Frame;

/// The panel `tab` moves between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Stages,
    Rtstat,
    Symbols,
}

impl Focus {
    pub fn next(self) -> Focus {
        match self {
            Focus::Stages => Focus::Rtstat,
            Focus::Rtstat => Focus::Symbols,
            Focus::Symbols => Focus::Stages,
        }
    }
}

/// An A/B comparison (key `b`) as its panel shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AbView {
    /// The setting before the last change, and the current one (labels).
    pub a: String,
    pub b: String,
    /// The figures so far (none before the first unit).
    pub status: Option<AbStatus>,
    /// Stopped with `b`: the last figures stay until the next change.
    pub stopped: bool,
}

impl AbView {
    /// An A/A: the two settings are one (a change and its undoing, or `b` pressed before
    /// a change was made).
    pub fn same(&self) -> bool {
        self.a == self.b
    }

    /// The panel's two lines: the figures first (so a narrow terminal cuts words, not
    /// numbers), then the verdict and what is compared.
    pub fn lines(&self) -> [String; 2] {
        let first = match &self.status {
            None => "A/B: first unit running".to_string(),
            Some(st) if st.effect.units == 0 => format!(
                "A/B: no clean unit yet, {} of {} blocks flagged (a worker waited to run, steal, or a late switch)",
                st.flagged, st.blocks
            ),
            Some(st) => format!(
                "A/B ratio {:.4} [{:.4}, {:.4}]  p {:.1e}  {} units  {}/{} blocks flagged",
                st.effect.ratio, st.effect.ci.0, st.effect.ci.1, st.effect.p, st.effect.units, st.flagged, st.blocks
            ),
        };
        let verdict = match &self.status {
            Some(st) if st.effect.units > 0 => format!("{}: ", st.verdict.text(&st.effect)),
            _ => String::new(),
        };
        let what = if self.same() {
            format!("A/A, {} against itself (no change to compare; expect 1.0)", self.a)
        } else {
            format!("B {} against A {}", self.b, self.a)
        };
        let end = if self.stopped { "stopped, b starts again" } else { "b stops it" };
        [first, format!("{verdict}{what} · {end}")]
    }
}

/// State of the screen that is not data.
#[derive(Debug, Clone)]
pub struct Ui {
    pub focus: Focus,
    pub paused: bool,
    pub help: bool,
    /// First symbol row shown (the symbols panel scrolls with the arrows when focused; it
    /// is the row Enter goes into).
    pub scroll: usize,
    /// The stage row selected in the stage panel (arrows when focused; Enter lists its
    /// symbols).
    pub stage_sel: usize,
    /// Whether keys can change the forwarder (false for `-p`, `-a`, replays).
    pub control: bool,
    /// The last key's effect, or a refusal, shown on the status line.
    pub message: Option<String>,
    /// An A/B comparison (key `b`): its panel, while it runs and after it stopped.
    pub ab: Option<AbView>,
    /// A prefetch depth and a cache mode requested with a key that the forwarder does not
    /// run yet: the header shows "requested 5 (running 3)" until it does.
    pub requested_prefetch: Option<fwd_abi::Prefetch>,
    pub requested_cache: Option<fwd_abi::CacheMode>,
}

impl Default for Ui {
    fn default() -> Ui {
        Ui {
            focus: Focus::Symbols,
            paused: false,
            help: false,
            scroll: 0,
            stage_sel: 0,
            control: true,
            message: None,
            ab: None,
            requested_prefetch: None,
            requested_cache: None,
        }
    }
}

/// Smallest terminal drawn in full; below it the compact layout.
pub const FULL: (u16, u16) = (80, 24);
/// Smallest terminal drawn at all.
pub const MIN: (u16, u16) = (40, 12);

const STAGE_COLORS: [(&str, Color); 8] = [
    ("lookup", Color::Yellow),
    ("gc", Color::Red),
    ("slab", Color::Magenta),
    ("driver", Color::Blue),
    ("ip", Color::Cyan),
    ("nic", Color::Gray),
    ("other", Color::White),
    ("idle", Color::DarkGray),
];

fn stage_color(s: &str) -> Color {
    STAGE_COLORS.iter().find(|(n, _)| *n == s).map_or(Color::White, |(_, c)| *c)
}

/// Compact count: 1234 -> 1234, 123456 -> 123k, 12345678 -> 12.3M.
pub fn human(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e7 {
        format!("{:.0}M", v / 1e6)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e5 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Width of the stage panel: its columns, their spacing and borders.
const STAGE_COLUMNS: [u16; 6] = [6, 8, 6, 8, 8, 6];
const STAGE_PANEL_W: u16 = 6 + 8 + 6 + 8 + 8 + 6 + 5 + 2;
/// The rtstat columns, in the order they give way from the right.
const RTSTAT_HEADERS: [&str; 7] = ["size", "hit/s", "tot/s", "gc/s", "ign/s", "miss/s", "ovrf/s"];
const RTSTAT_COL_W: u16 = 6;
/// Fewer rtstat columns than this and the panel goes.
const RTSTAT_MIN_COLS: usize = 3;

/// How the screen is divided (rows of each panel, 0 = not shown; rtstat columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub stages: u16,
    pub workers: u16,
    pub symbols: u16,
    pub ab: u16,
    pub rtstat_cols: usize,
}

/// Lay out a `w` x `h` screen (see the module's notes for the order panels give way in).
pub fn plan(w: u16, h: u16, m: &Model, ui: &Ui) -> Plan {
    let full = w >= FULL.0 && h >= FULL.1;
    let ab = if ui.ab.is_some() { 2 } else { 0 };
    let avail = h.saturating_sub(3 + 1 + ab);
    // Every stage row (the forwarding stages, then the device and waiting apart), the
    // header and borders; at least 11 rows (the rtstat panel beside it).
    let stages_want = (m.stages.len() as u16).max(8) + 3;
    let n_workers = m.workers.len().min(4) as u16;
    let workers_want = if full && n_workers > 0 { n_workers + 3 } else { 0 };
    // The symbols panel with three rows; with one, the least kept.
    let (symbols_want, symbols_least) = (6, 4);
    let (stages, workers, symbols) = if avail >= stages_want + workers_want + symbols_want {
        (stages_want, workers_want, avail - stages_want - workers_want)
    } else if avail >= stages_want + symbols_least {
        (stages_want, 0, avail - stages_want)
    } else if avail >= 5 + symbols_least {
        (avail - symbols_least, 0, symbols_least)
    } else {
        (avail, 0, 0)
    };
    let rtstat_cols = if full {
        let room = w.saturating_sub(STAGE_PANEL_W + 2) + 1;
        ((room / (RTSTAT_COL_W + 1)) as usize).min(RTSTAT_HEADERS.len())
    } else {
        0
    };
    let rtstat_cols = if rtstat_cols >= RTSTAT_MIN_COLS { rtstat_cols } else { 0 };
    Plan { stages, workers, symbols, ab, rtstat_cols }
}

/// Draw the whole screen.
pub fn draw(f: &mut Frame, m: &Model, ui: &Ui) {
    let area = f.area();
    if area.width < MIN.0 || area.height < MIN.1 {
        let text = format!(
            "terminal too small: {}x{} (fwdscope top needs {}x{}, {}x{} for every panel); q quits",
            area.width, area.height, MIN.0, MIN.1, FULL.0, FULL.1
        );
        f.render_widget(Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: true }), area);
        return;
    }
    let p = plan(area.width, area.height, m, ui);
    let [head, middle, workers, symbols, ab, status] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(p.stages),
        Constraint::Length(p.workers),
        Constraint::Length(p.symbols),
        Constraint::Length(p.ab),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, head, m, ui);
    if p.rtstat_cols > 0 {
        let [left, right] = Layout::horizontal([Constraint::Length(STAGE_PANEL_W), Constraint::Min(0)]).areas(middle);
        stages(f, left, m, ui);
        rtstat(f, right, m, ui, p.rtstat_cols);
    } else {
        stages(f, middle, m, ui);
    }
    if p.workers > 0 {
        worker_table(f, workers, m);
    }
    if p.symbols > 0 {
        symbol_table(f, symbols, m, ui);
    }
    if let Some(v) = &ui.ab {
        ab_panel(f, ab, v);
    }
    status_line(f, status, m, ui);
    if ui.help {
        help(f, area);
    }
}

/// The first of `forms` that fits `width` columns, else the last (the shortest).
fn fit_line(forms: &[String], width: u16) -> String {
    forms.iter().find(|s| s.chars().count() <= width as usize).or(forms.last()).cloned().unwrap_or_default()
}

/// A figure in at most `width` columns: one decimal, else none, else compact (`1.2M`).
pub fn fit(v: f64, width: usize) -> String {
    let one = format!("{v:.1}");
    if one.len() <= width {
        return one;
    }
    let none = format!("{v:.0}");
    if none.len() <= width {
        return none;
    }
    human(v)
}

/// The header: the target and the forwarder's settings, the events sampled, the rates with
/// what bounds them, and the rate sparkline.
fn header(f: &mut Frame, area: Rect, m: &Model, ui: &Ui) {
    let paused = if ui.paused { "[paused] " } else { "" };
    let width = area.width.saturating_sub(paused.len() as u16);
    let title = Line::from(vec![
        Span::styled(paused, Style::new().fg(Color::Yellow)),
        Span::styled(fit_line(&title_forms(m, ui), width), Style::new().add_modifier(Modifier::BOLD)),
    ]);
    let events = fit_line(&[m.events_line(), m.events_line_short()], area.width);
    let events = Line::from(Span::styled(events, Style::new().fg(Color::Gray)));
    let rates = fit_line(&rate_forms(m), area.width);
    let [l0, l1, l2] = Layout::vertical([Constraint::Length(1); 3]).areas(area);
    f.render_widget(Paragraph::new(title), l0);
    f.render_widget(Paragraph::new(events), l1);
    let w = (rates.chars().count() as u16).min(l2.width);
    let [text, spark] = Layout::horizontal([Constraint::Length(w), Constraint::Min(0)]).areas(l2);
    f.render_widget(Paragraph::new(rates), text);
    // tx kpps over the last minute, newest on the right.
    let data: Vec<u64> = m.history.iter().map(|h| (h.tx_mpps * 1000.0).round() as u64).collect();
    let skip = data.len().saturating_sub(spark.width as usize);
    f.render_widget(Sparkline::default().data(&data[skip..]).style(Style::new().fg(Color::Green)), spark);
}

/// The header's title line, longest form first: the target and, with a forwarder, its
/// driver, workers, cache mode, FIB and prefetch depth.
fn title_forms(m: &Model, ui: &Ui) -> Vec<String> {
    // The target: a replay's directory by its last name when space is short.
    let short_target = match m.target.strip_prefix("replay ") {
        Some(dir) => format!(
            "replay {}",
            std::path::Path::new(dir).file_name().map_or(dir.into(), |n| n.to_string_lossy().into_owned())
        ),
        None => m.target.clone(),
    };
    let Some(fw) = &m.forwarder else {
        return vec![format!("fwdscope top · {}", m.target), format!("top · {short_target}")];
    };
    // A setting requested and not yet running: both, the request first.
    let (cache, cache_short) = match &ui.requested_cache {
        Some(r) => (format!("requested {r} (running {})", fw.cache), format!("{r} (running {})", fw.cache)),
        None => (fw.cache.clone(), fw.cache.clone()),
    };
    let (pf, pf_short) = match ui.requested_prefetch {
        Some(r) => (format!("requested {r} (running {})", fw.prefetch), format!("{r} (running {})", fw.prefetch)),
        None => (fw.prefetch.to_string(), fw.prefetch.to_string()),
    };
    let workers = format!("{} worker{}", fw.workers, if fw.workers == 1 { "" } else { "s" });
    vec![
        format!(
            "fwdscope top · {} · {} · {workers} · cache {cache} · fib {} · prefetch {pf}",
            m.target, fw.driver, fw.fib
        ),
        format!("top · {short_target} · {} · {workers} · cache {cache} · fib {} · prefetch {pf}", fw.driver, fw.fib),
        format!(
            "prefetch {pf_short} · cache {cache_short} · fib {} · {} {}w · {short_target}",
            fw.fib, fw.driver, fw.workers
        ),
        format!("pf {pf_short} · {cache_short} · {} · {}w · {short_target}", fw.fib, fw.workers),
    ]
}

/// The header's rates line, longest form first: rx, tx and dropped Mpps, and what the
/// stage clocks say bounds the forwarder.
fn rate_forms(m: &Model) -> [String; 3] {
    let r = m.rates;
    let (bound, bound_short) = match &m.clocks {
        Some(c) if c.unsure() => {
            let q = 100.0 * c.runq_share.unwrap_or(0.0);
            (format!("clocks UNSURE (waited to run {q:.0}%)"), format!("clocks UNSURE (runq {q:.0}%)"))
        }
        Some(c) if c.device_bound => {
            let i = 100.0 * c.idle_share;
            (format!("device-bound (idle {i:.0}%)"), format!("device-bound idle {i:.0}%"))
        }
        Some(c) => {
            let i = 100.0 * c.idle_share;
            (format!("worker-bound (idle {i:.0}%)"), format!("worker-bound idle {i:.0}%"))
        }
        None => (String::new(), String::new()),
    };
    if !m.has_counters() {
        return match m.forwarder {
            Some(_) => [
                "rx/tx: waiting for the forwarder's counters".into(),
                "rx/tx: waiting for counters".into(),
                "waiting for counters".into(),
            ],
            None => [
                "no packet counters: this target publishes none (rates unknown; samples only)".into(),
                "no packet counters (samples only)".into(),
                "no counters".into(),
            ],
        };
    }
    [
        format!("rx {:.3} Mpps  tx {:.3} Mpps  dropped {:.3} Mpps  {bound}  ", r.rx_mpps, r.tx_mpps, r.drop_mpps),
        format!("rx {:.3}  tx {:.3}  drop {:.3} Mpps  {bound_short} ", r.rx_mpps, r.tx_mpps, r.drop_mpps),
        format!("rx {:.3} tx {:.3} drop {:.3} Mpps {bound_short}", r.rx_mpps, r.tx_mpps, r.drop_mpps),
    ]
}

fn block(title: String, focused: bool) -> Block<'static> {
    let style = if focused { Style::new().fg(Color::Yellow) } else { Style::new() };
    Block::default().borders(Borders::ALL).border_style(style).title(title)
}

/// A stage's name in the stage panel's first column ([`STAGE_COLUMNS`]\[0\] wide): the
/// longer names written shorter rather than cut (`startup` is `start`, `binary-unknown`
/// `bin?`, `kernel-unknown` `kern?`; docs/top.md lists them).
pub fn stage_label(stage: &str) -> String {
    match stage {
        analyzer::rules::STARTUP => "start".into(),
        analyzer::rules::BINARY_UNKNOWN => "bin?".into(),
        analyzer::rules::KERNEL_UNKNOWN => "kern?".into(),
        s => s.to_string(),
    }
}

/// The stage panel's rows in the order drawn: the forwarding stages, then those apart (the
/// device, waiting, start-up).
pub fn stage_rows(m: &Model) -> Vec<&StageLine> {
    let (forwarding, apart): (Vec<&StageLine>, Vec<&StageLine>) = m.stages.iter().partition(|s| s.share.is_some());
    forwarding.into_iter().chain(apart).collect()
}

fn stages(f: &mut Frame, area: Rect, m: &Model, ui: &Ui) {
    let unit = m.unit();
    let clocks = m.stages.iter().any(|s| s.clock_ns.is_some());
    let title = format!(" stages, last interval: {} samples ", m.interval_samples);
    let bar_w = STAGE_COLUMNS[1] as usize;
    let mut rows = Vec::new();
    let focused = ui.focus == Focus::Stages;
    for (i, s) in stage_rows(m).into_iter().enumerate() {
        // Bars for the forwarding stages only, by their share of forwarding work; the
        // device and waiting are listed apart, without a bar.
        let bar = match s.share {
            Some(share) => {
                let filled = (((share / 100.0) * bar_w as f64).round() as usize).min(bar_w);
                format!("{}{}", "█".repeat(filled), " ".repeat(bar_w - filled))
            }
            None => format!("{:<bar_w$}", "apart"),
        };
        let pp = s.per_packet.map_or("-".to_string(), |v| fit(v, STAGE_COLUMNS[3] as usize));
        let ck = s.clock_ns.map_or("-".to_string(), |v| fit(v, STAGE_COLUMNS[4] as usize));
        let pts = match (s.share, s.clock_share) {
            (Some(a), Some(b)) => {
                let mark = if s.disagrees { "!" } else { "" };
                let d = format!("{:+.1}{mark}", a - b);
                if d.len() <= STAGE_COLUMNS[5] as usize {
                    d
                } else {
                    format!("{:+.0}{mark}", a - b)
                }
            }
            _ => "-".to_string(),
        };
        let shown = s.share.unwrap_or(s.percent);
        let row = Row::new(vec![
            Cell::from(stage_label(&s.stage)).style(Style::new().fg(stage_color(&s.stage))),
            Cell::from(bar).style(Style::new().fg(stage_color(&s.stage))),
            Cell::from(format!("{shown:5.1}%")),
            Cell::from(pp),
            Cell::from(ck),
            Cell::from(pts).style(if s.disagrees { Style::new().fg(Color::Red) } else { Style::new() }),
        ]);
        rows.push(if focused && i == ui.stage_sel {
            row.style(Style::new().add_modifier(Modifier::REVERSED))
        } else {
            row
        });
    }
    let header = Row::new(vec![
        "stage".to_string(),
        String::new(),
        "%".to_string(),
        format!("{unit}/pkt"),
        if clocks { "clock".into() } else { "clk off".into() },
        "pts".to_string(),
    ])
    .style(Style::new().add_modifier(Modifier::BOLD));
    let t = Table::new(rows, STAGE_COLUMNS.map(Constraint::Length))
        .header(header)
        .block(block(title, ui.focus == Focus::Stages));
    f.render_widget(t, area);
}

fn rtstat(f: &mut Frame, area: Rect, m: &Model, ui: &Ui, cols: usize) {
    let header = Row::new(RTSTAT_HEADERS[..cols].to_vec()).style(Style::new().add_modifier(Modifier::BOLD));
    let shown = area.height.saturating_sub(3) as usize;
    let rows: Vec<Row> = m
        .rtstat
        .iter()
        .skip(m.rtstat.len().saturating_sub(shown))
        .map(|r| {
            let all = [r.size, r.in_hit, r.in_tot, r.gc_tot, r.gc_ignored, r.gc_goal_miss, r.gc_ovrf];
            Row::new(all[..cols].iter().map(|v| Cell::from(human(*v as f64))).collect::<Vec<_>>())
        })
        .collect();
    let title = if area.width >= 36 { " rtstat: route cache per second " } else { " rtstat per second " };
    let t = Table::new(rows, vec![Constraint::Length(RTSTAT_COL_W); cols])
        .header(header)
        .block(block(title.into(), ui.focus == Focus::Rtstat));
    f.render_widget(t, area);
}

fn worker_table(f: &mut Frame, area: Rect, m: &Model) {
    if area.height == 0 {
        return;
    }
    let header =
        Row::new(["worker", "rx Mpps", "tx Mpps", "drop/s", "rt size", "hit/s", "tot/s", "gc/s", "pf", "cache"])
            .style(Style::new().add_modifier(Modifier::BOLD));
    let rows: Vec<Row> = m
        .workers
        .iter()
        .map(|w| {
            Row::new(vec![
                Cell::from(w.worker.to_string()),
                Cell::from(format!("{:.3}", w.rx_mpps)),
                Cell::from(format!("{:.3}", w.tx_mpps)),
                Cell::from(human(w.drops_per_s)),
                Cell::from(human(w.rt_size as f64)),
                Cell::from(human(w.in_hit)),
                Cell::from(human(w.in_tot)),
                Cell::from(human(w.gc_tot)),
                Cell::from(w.prefetch.to_string()),
                Cell::from(w.cache.clone()),
            ])
        })
        .collect();
    let widths = [6, 8, 8, 7, 7, 7, 7, 6, 3, 8].map(Constraint::Length);
    f.render_widget(Table::new(rows, widths).header(header).block(block(" workers ".into(), false)), area);
}

fn symbol_table(f: &mut Frame, area: Rect, m: &Model, ui: &Ui) {
    let mode = match m.mode {
        SymbolMode::Decaying => "decaying",
        SymbolMode::Cumulative => "cumulative",
    };
    if let Drill::Symbol { symbol, .. } = &m.drill {
        return inside_table(f, area, m, ui, symbol, mode);
    }
    let title = match &m.drill {
        Drill::Stage(st) => format!(" symbols of {st} ({mode}, by {}) · esc: all ", m.sort.name()),
        _ => format!(" top symbols ({mode}, by {}) ", m.sort.name()),
    };
    let header = Row::new(["samples", "%", "symbol", "stage", "dso"]).style(Style::new().add_modifier(Modifier::BOLD));
    let shown = area.height.saturating_sub(3) as usize;
    let focused = ui.focus == Focus::Symbols;
    let start = if focused { ui.scroll.min(m.symbols.len().saturating_sub(1)) } else { 0 };
    let rows: Vec<Row> = m
        .symbols
        .iter()
        .skip(start)
        .take(shown)
        .enumerate()
        .map(|(i, s)| {
            let row = Row::new(vec![
                Cell::from(format!("{:.0}", s.weight)),
                Cell::from(format!("{:5.2}%", s.percent)),
                Cell::from(s.symbol.clone()),
                Cell::from(s.stage.clone()).style(Style::new().fg(stage_color(&s.stage))),
                Cell::from(s.dso.clone()),
            ]);
            // The first row shown is the one Enter goes into.
            if focused && i == 0 && !m.symbols.is_empty() {
                row.style(Style::new().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        })
        .collect();
    let widths = [
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Min(20),
        Constraint::Length(7),
        Constraint::Length(18),
    ];
    f.render_widget(Table::new(rows, widths).header(header).block(block(title, ui.focus == Focus::Symbols)), area);
}

/// Inside one function: its hottest source lines (with the inlined function at each),
/// updated at every tick.
fn inside_table(f: &mut Frame, area: Rect, m: &Model, ui: &Ui, symbol: &str, mode: &str) {
    let title = format!(" inside {symbol} ({mode}): hottest source lines · esc: back ");
    let header = Row::new(["samples", "%", "source line", "function"]).style(Style::new().add_modifier(Modifier::BOLD));
    let shown = area.height.saturating_sub(3) as usize;
    let start = if ui.focus == Focus::Symbols { ui.scroll.min(m.inside.len().saturating_sub(1)) } else { 0 };
    let mut rows: Vec<Row> = m
        .inside
        .iter()
        .skip(start)
        .take(shown)
        .map(|l| {
            Row::new(vec![
                Cell::from(format!("{:.0}", l.weight)),
                Cell::from(format!("{:5.2}%", l.percent)),
                Cell::from(l.location.clone()),
                Cell::from(l.function.clone()),
            ])
        })
        .collect();
    if m.inside.is_empty() {
        rows.push(Row::new(vec![
            Cell::from(""),
            Cell::from(""),
            Cell::from("no samples of it since it was entered (the next tick shows them)"),
        ]));
    }
    let widths = [Constraint::Length(8), Constraint::Length(7), Constraint::Length(24), Constraint::Min(20)];
    f.render_widget(Table::new(rows, widths).header(header).block(block(title, ui.focus == Focus::Symbols)), area);
}

fn status_line(f: &mut Frame, area: Rect, m: &Model, ui: &Ui) {
    let mut spans = Vec::new();
    if let Some(e) = &m.ended {
        spans.push(Span::styled(format!("{e}: showing the last data  "), Style::new().fg(Color::Red)));
    }
    if m.lost > 0 {
        spans.push(Span::styled(format!("{} records lost  ", m.lost), Style::new().fg(Color::Red)));
    }
    if let Some(msg) = &ui.message {
        spans.push(Span::styled(format!("{msg}  "), Style::new().fg(Color::Yellow)));
    }
    spans.push(Span::styled("h help  q quit", Style::new().fg(Color::Gray)));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The A/B panel: two lines, the figures first.
fn ab_panel(f: &mut Frame, area: Rect, v: &AbView) {
    let [first, second] = v.lines();
    let style = if v.stopped { Style::new().fg(Color::Gray) } else { Style::new().fg(Color::Cyan) };
    let lines = vec![
        Line::from(Span::styled(first, style.add_modifier(Modifier::BOLD))),
        Line::from(Span::styled(second, style)),
    ];
    f.render_widget(Paragraph::new(lines), area);
}

/// The key bindings, as the help overlay lists them.
pub const KEYS: [(&str, &str); 14] = [
    ("q", "quit (the terminal is restored)"),
    ("esc", "close help; back out of a stage or symbol"),
    ("enter", "stage: its symbols; symbol: its hottest lines"),
    ("p", "pause / resume the display"),
    ("+ / -", "prefetch depth up / down (0..8)"),
    ("c", "cycle cache mode: rtcache, nocache, nhcache"),
    ("f", "flush the route cache"),
    ("b", "live A/B: previous against current setting"),
    ("s", "sort symbols: samples, symbol, stage, dso"),
    ("z", "decaying / cumulative symbols (zeroes)"),
    ("tab", "focus the next panel"),
    ("up / down", "select in the focused stage or symbol panel"),
    ("h", "this help"),
    ("", "keys act through the forwarder's control block"),
];

fn help(f: &mut Frame, area: Rect) {
    let w = 60.min(area.width);
    let h = (KEYS.len() as u16 + 2).min(area.height);
    let r = Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h };
    let lines: Vec<Line> = KEYS.iter().map(|(k, d)| Line::from(format!(" {k:<10} {d}"))).collect();
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" keys ")), r);
}
