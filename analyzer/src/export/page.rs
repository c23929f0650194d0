//! The building blocks every HTML page of fwdscope shares, free of any chart library: the
//! style sheet ([`STYLE`]), text escaping, SI axis labels and the HTML legends drawn under
//! charts. The sweep and recording pages (compare) and the lab's bench page use them, so
//! they look alike.

/// An axis label in SI form: 7000000 -> `7.0M`, 1500 -> `1.5k`, 0.25 -> `0.25`, 10.2 -> `10.2`.
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        // Two decimals at most, trailing zeros dropped: the ticks of 9.5..10.3 read 9.6, 9.8,
        // 10, 10.2 (never 10 three times).
        let t = format!("{v:.2}");
        return t.trim_end_matches('0').trim_end_matches('.').to_string();
    };
    format!("{x:.1}{unit}")
}

/// `s` with the characters HTML gives meaning to (`&`, `<`, `>`, `"`) escaped.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The style every page shares: body text at 16 px and tables at 14 px whatever the window
/// (no viewport-scaled type), charts scaled down to the column, notes wrapped inside their
/// box, legends in HTML under each chart (never on its data).
pub const STYLE: &str = "body{font-family:sans-serif;font-size:16px;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em}\
pre{background:#f6f6f6;padding:.8em;font-size:13px;white-space:pre-wrap;overflow-wrap:anywhere}\
.chart{margin:1em 0}.chart svg{display:block;max-width:100%;height:auto}\
.legend{display:flex;flex-wrap:wrap;gap:.3em 1.4em;font-size:14px;margin:.3em 0 0 60px}\
.key{display:inline-flex;align-items:center;gap:.4em}.key i{display:inline-block;width:14px;height:14px;box-sizing:border-box}\
.key i.line{height:3px}.key i.dot{border-radius:50%}.key i.hollow{border-radius:50%;border:2px solid;background:none!important}\
table.data{border-collapse:collapse;font-size:14px;margin:.5em 0;max-width:100%;display:block;overflow-x:auto}\
table.data th,table.data td{padding:.2em .6em;white-space:nowrap;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}\
table.data th{background:#f0f0f0;white-space:normal;vertical-align:bottom}table.data td.l,table.data th.l{text-align:left;white-space:normal;overflow-wrap:anywhere;min-width:9em}table.data td.s{white-space:nowrap}\
tr.out td{color:#999}.missing{border:2px solid #b60;padding:.5em;background:#fff8ee}.src{color:#555;font-size:14px}\
img.flame{width:100%;box-sizing:border-box;border:1px solid #ddd}summary.out{color:#999}\
details.ann{margin:.3em 0 .3em 1em}details.ann summary{cursor:pointer}table.ann td.code{font-family:monospace;font-size:13px}";

/// How a legend key is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Box,
    Line,
    Dot,
    Hollow,
}

/// A chart's legend, in HTML under it: one key per (label, CSS colour, shape).
pub fn legend(items: &[(String, String, Key)]) -> String {
    let mut out = String::from("<div class=\"legend\">");
    for (label, colour, key) in items {
        let class = match key {
            Key::Box => "",
            Key::Line => "line",
            Key::Dot => "dot",
            Key::Hollow => "hollow",
        };
        out.push_str(&format!(
            "<span class=\"key\"><i class=\"{class}\" style=\"background:{colour};border-color:{colour}\"></i>{}</span>",
            escape(label)
        ));
    }
    out.push_str("</div>");
    out
}
