//! Rendering a [`Model`] with ratatui: the header (target, forwarder settings, the events
//! actually used, Mpps with a one-minute sparkline), the stage panel (sampled cost per
//! packet beside the forwarder's own stage clocks), the rtstat panel (route-cache columns
//! per interval, and per worker), the top symbols, a status line and the help overlay.
//! Terminals under 80x24 get a compact layout; under 40x12 a plain notice.

use crate::model::{Model, StageLine, SymbolMode};
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

/// State of the screen that is not data.
#[derive(Debug, Clone)]
pub struct Ui {
    pub focus: Focus,
    pub paused: bool,
    pub help: bool,
    /// First symbol row shown (the symbols panel scrolls with the arrows when focused).
    pub scroll: usize,
    /// Whether keys can change the forwarder (false for `-p`, `-a`, replays).
    pub control: bool,
    /// The last key's effect, or a refusal, shown on the status line.
    pub message: Option<String>,
    /// A running A/B comparison (key `b`): its ratio so far, on the status line.
    pub ab: Option<String>,
    /// A prefetch depth and a cache mode requested with a key that the forwarder does not
    /// run yet: the header shows "requested 5 (running 3)" until it does.
    pub requested_prefetch: Option<u64>,
    pub requested_cache: Option<String>,
}

impl Default for Ui {
    fn default() -> Ui {
        Ui {
            focus: Focus::Symbols,
            paused: false,
            help: false,
            scroll: 0,
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
    let full = area.width >= FULL.0 && area.height >= FULL.1;
    let n_workers = m.workers.len().min(4) as u16;
    // Stage panel: every stage row (the forwarding stages, then the device and waiting
    // apart), its header and borders; at least 11 rows tall (the rtstat panel beside it),
    // shorter only when the terminal is.
    let stage_rows = (m.stages.len() as u16).max(8);
    let middle_h = (stage_rows + 3).min(area.height.saturating_sub(3 + 1 + 4));
    let [head, middle, workers, symbols, status] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(middle_h),
        Constraint::Length(if full && n_workers > 0 { n_workers + 3 } else { 0 }),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, head, m, ui);
    if full {
        let [left, right] = Layout::horizontal([Constraint::Length(46), Constraint::Min(30)]).areas(middle);
        stages(f, left, m, ui);
        rtstat(f, right, m, ui);
        worker_table(f, workers, m);
    } else {
        stages(f, middle, m, ui);
    }
    symbol_table(f, symbols, m, ui);
    status_line(f, status, m, ui);
    if ui.help {
        help(f, area);
    }
}

fn header(f: &mut Frame, area: Rect, m: &Model, ui: &Ui) {
    let mut title = Vec::new();
    if ui.paused {
        title.push(Span::styled("[paused] ", Style::new().fg(Color::Yellow)));
    }
    title.extend([Span::styled("fwdscope top", Style::new().add_modifier(Modifier::BOLD)), Span::raw(" · ")]);
    title.push(Span::raw(m.target.clone()));
    if let Some(fw) = &m.forwarder {
        // A setting requested and not yet running: both, the request first.
        let cache = match &ui.requested_cache {
            Some(r) => format!("requested {r} (running {})", fw.cache),
            None => fw.cache.clone(),
        };
        let prefetch = match ui.requested_prefetch {
            Some(r) => format!("requested {r} (running {})", fw.prefetch),
            None => fw.prefetch.to_string(),
        };
        title.push(Span::raw(format!(
            " · {} · {} worker{} · cache {cache} · fib {} · prefetch {prefetch}",
            fw.driver,
            fw.workers,
            if fw.workers == 1 { "" } else { "s" },
            fw.fib,
        )));
    }
    let events = Line::from(Span::styled(m.events_line(), Style::new().fg(Color::Gray)));
    let r = m.rates;
    let bound = match &m.clocks {
        Some(c) if c.unsure() => {
            format!("clocks UNSURE (waited to run {:.0}%)  ", 100.0 * c.runq_share.unwrap_or(0.0))
        }
        Some(c) if c.device_bound => format!("device-bound (idle {:.0}%)  ", 100.0 * c.idle_share),
        Some(c) => format!("worker-bound (idle {:.0}%)  ", 100.0 * c.idle_share),
        None => String::new(),
    };
    let rates = format!("rx {:.3} Mpps  tx {:.3} Mpps  dropped {:.3} Mpps  {bound}", r.rx_mpps, r.tx_mpps, r.drop_mpps);
    let [l0, l1, l2] = Layout::vertical([Constraint::Length(1); 3]).areas(area);
    f.render_widget(Paragraph::new(Line::from(title)), l0);
    f.render_widget(Paragraph::new(events), l1);
    let w = (rates.chars().count() as u16).min(l2.width);
    let [text, spark] = Layout::horizontal([Constraint::Length(w), Constraint::Min(0)]).areas(l2);
    f.render_widget(Paragraph::new(rates), text);
    // tx kpps over the last minute, newest on the right.
    let data: Vec<u64> = m.history.iter().map(|h| (h.tx_mpps * 1000.0).round() as u64).collect();
    let skip = data.len().saturating_sub(spark.width as usize);
    f.render_widget(Sparkline::default().data(&data[skip..]).style(Style::new().fg(Color::Green)), spark);
}

fn block(title: String, focused: bool) -> Block<'static> {
    let style = if focused { Style::new().fg(Color::Yellow) } else { Style::new() };
    Block::default().borders(Borders::ALL).border_style(style).title(title)
}

fn stages(f: &mut Frame, area: Rect, m: &Model, ui: &Ui) {
    let unit = m.unit();
    let clocks = m.stages.iter().any(|s| s.clock_ns.is_some());
    let title = format!(" stages, last interval: {} samples ", m.interval_samples);
    let bar_w = 10usize;
    let mut rows = Vec::new();
    let (forwarding, apart): (Vec<&StageLine>, Vec<&StageLine>) = m.stages.iter().partition(|s| s.share.is_some());
    for s in forwarding.iter().chain(&apart) {
        // Bars for the forwarding stages only, by their share of forwarding work; the
        // device and waiting are listed apart, without a bar.
        let bar = match s.share {
            Some(share) => {
                let filled = (((share / 100.0) * bar_w as f64).round() as usize).min(bar_w);
                format!("{}{}", "█".repeat(filled), " ".repeat(bar_w - filled))
            }
            None => format!("{:<bar_w$}", "apart"),
        };
        let pp = s.per_packet.map_or("-".to_string(), |v| format!("{v:.1}"));
        let ck = s.clock_ns.map_or("-".to_string(), |v| format!("{v:.1}"));
        let pts = match (s.share, s.clock_share) {
            (Some(a), Some(b)) => format!("{:+.1}{}", a - b, if s.disagrees { "!" } else { "" }),
            _ => "-".to_string(),
        };
        let shown = s.share.unwrap_or(s.percent);
        rows.push(Row::new(vec![
            Cell::from(s.stage.clone()).style(Style::new().fg(stage_color(&s.stage))),
            Cell::from(bar).style(Style::new().fg(stage_color(&s.stage))),
            Cell::from(format!("{shown:5.1}%")),
            Cell::from(pp),
            Cell::from(ck),
            Cell::from(pts).style(if s.disagrees { Style::new().fg(Color::Red) } else { Style::new() }),
        ]));
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
    let t = Table::new(
        rows,
        [
            Constraint::Length(6),
            Constraint::Length(bar_w as u16),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(6),
        ],
    )
    .header(header)
    .block(block(title, ui.focus == Focus::Stages));
    f.render_widget(t, area);
}

fn rtstat(f: &mut Frame, area: Rect, m: &Model, ui: &Ui) {
    let header = Row::new(["size", "hit/s", "tot/s", "gc/s", "ign/s", "miss/s", "ovrf/s"])
        .style(Style::new().add_modifier(Modifier::BOLD));
    let shown = area.height.saturating_sub(3) as usize;
    let rows: Vec<Row> = m
        .rtstat
        .iter()
        .skip(m.rtstat.len().saturating_sub(shown))
        .map(|r| {
            Row::new(
                [r.size, r.in_hit, r.in_tot, r.gc_tot, r.gc_ignored, r.gc_goal_miss, r.gc_ovrf]
                    .map(|v| Cell::from(human(v as f64))),
            )
        })
        .collect();
    let t = Table::new(rows, [Constraint::Length(6); 7])
        .header(header)
        .block(block(" rtstat: route cache per second ".into(), ui.focus == Focus::Rtstat));
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
    let title = format!(" top symbols ({mode}, by {}) ", m.sort.name());
    let header = Row::new(["samples", "%", "symbol", "stage", "dso"]).style(Style::new().add_modifier(Modifier::BOLD));
    let shown = area.height.saturating_sub(3) as usize;
    let start = if ui.focus == Focus::Symbols { ui.scroll.min(m.symbols.len().saturating_sub(1)) } else { 0 };
    let rows: Vec<Row> = m
        .symbols
        .iter()
        .skip(start)
        .take(shown)
        .map(|s| {
            Row::new(vec![
                Cell::from(format!("{:.0}", s.weight)),
                Cell::from(format!("{:5.2}%", s.percent)),
                Cell::from(s.symbol.clone()),
                Cell::from(s.stage.clone()).style(Style::new().fg(stage_color(&s.stage))),
                Cell::from(s.dso.clone()),
            ])
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

fn status_line(f: &mut Frame, area: Rect, m: &Model, ui: &Ui) {
    let mut spans = Vec::new();
    if let Some(e) = &m.ended {
        spans.push(Span::styled(format!("{e}: showing the last data  "), Style::new().fg(Color::Red)));
    }
    if m.lost > 0 {
        spans.push(Span::styled(format!("{} records lost  ", m.lost), Style::new().fg(Color::Red)));
    }
    // The last key's effect first: the A/B line is long and may run off the right edge.
    if let Some(msg) = &ui.message {
        spans.push(Span::styled(format!("{msg}  "), Style::new().fg(Color::Yellow)));
    }
    if let Some(ab) = &ui.ab {
        spans.push(Span::styled(format!("{ab}  "), Style::new().fg(Color::Cyan)));
    }
    spans.push(Span::styled("h help  q quit", Style::new().fg(Color::Gray)));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The key bindings, as the help overlay lists them.
pub const KEYS: [(&str, &str); 13] = [
    ("q", "quit (the terminal is restored)"),
    ("esc", "close this help (only q quits)"),
    ("p", "pause / resume the display"),
    ("+ / -", "prefetch depth up / down (0..8)"),
    ("c", "cycle cache mode: rtcache, nocache, nhcache"),
    ("f", "flush the route cache"),
    ("b", "live A/B: previous against current setting"),
    ("s", "sort symbols: samples, symbol, stage, dso"),
    ("z", "decaying / cumulative symbols (zeroes)"),
    ("tab", "focus the next panel"),
    ("up / down", "scroll the focused symbol table"),
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
