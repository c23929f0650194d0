//! Headless Chromium as a person's browser for the page tests: a page or SVG is loaded at a
//! given window width, a script measures what the reader sees after layout (text wider than
//! its box, type size, legend boxes against the plotted marks, flame-graph labels against
//! their frames) and writes its findings into the DOM, which `--dump-dom` returns; and a
//! screenshot for the checks only pixels can make. Tests skip the browser part, saying why,
//! where no chromium is installed (CI has it).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The installed Chromium, if any.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// Measures an HTML page once it has loaded: every element (outside the SVG charts) whose
/// content is wider than its box, the smallest type that holds text, elements reaching past
/// the window, and per chart (`div.chart`) its marks (circles, rectangles, lines, paths,
/// the background excepted), its legends and how many legend-mark pairs intersect.
const PAGE_SCRIPT: &str = r#"<script>
(function(){
function box(e){const r=e.getBoundingClientRect();return {x:r.left,y:r.top,w:r.width,h:r.height};}
function meet(a,b){return a.x<b.x+b.w && b.x<a.x+a.w && a.y<b.y+b.h && b.y<a.y+a.h;}
function name(e){return e.tagName.toLowerCase()+(e.id?'#'+e.id:'')+(typeof e.className==='string'&&e.className?'.'+e.className.split(' ').join('.'):'');}
window.addEventListener('load',function(){
 const out={overflow:[],minFont:1000,tinyText:[],charts:{},wide:[],vw:window.innerWidth,docW:document.documentElement.scrollWidth,greyRows:0,text:''};
 for(const e of document.body.querySelectorAll('*')){
   if(e.closest('svg')) continue;
   if(e.clientWidth>0 && e.scrollWidth>e.clientWidth+1) out.overflow.push(name(e)+' '+e.scrollWidth+'>'+e.clientWidth+': '+(e.textContent||'').slice(0,80));
   const hasText=[...e.childNodes].some(n=>n.nodeType===3&&n.textContent.trim());
   if(hasText && e.getClientRects().length){const f=parseFloat(getComputedStyle(e).fontSize); if(f<out.minFont) out.minFont=f; if(f<12) out.tinyText.push(name(e)+' '+f);}
   const b=box(e); if(b.w>0 && b.x+b.w>window.innerWidth+1) out.wide.push(name(e)+' right '+(b.x+b.w));
 }
 for(const r of document.querySelectorAll('#runs tr.out td')){ if(getComputedStyle(r).color==='rgb(153, 153, 153)') out.greyRows++; }
 for(const c of document.querySelectorAll('.chart')){
   const svg=c.querySelector('svg'); if(!svg) continue;
   const sb=box(svg);
   const marks=[...svg.querySelectorAll('circle,rect,polyline,path,line')].map(box).filter(b=>!(b.w>=sb.w-1&&b.h>=sb.h-1));
   const legends=[...c.querySelectorAll('.legend')].map(box);
   let hits=0; for(const k of legends) for(const m of marks) if(meet(k,m)) hits++;
   out.charts[c.id]={marks:marks.length,circles:svg.querySelectorAll('circle').length,legends:legends.length,keys:c.querySelectorAll('.legend .key').length,hits:hits,
     svg:sb,keyColours:[...c.querySelectorAll('.legend .key i')].map(i=>getComputedStyle(i).borderTopColor)};
 }
 out.text=document.body.innerText;
 const p=document.createElement('pre'); p.id='layout-check';
 p.textContent=btoa(unescape(encodeURIComponent(JSON.stringify(out)))); document.body.appendChild(p);
});})();
</script>"#;

/// Measures an inferno flame graph once its own script has fitted the labels: frames,
/// labels wider than their frame, text reaching past the drawing.
const SVG_SCRIPT: &str = r#"<script><![CDATA[
window.addEventListener('load',function(){setTimeout(function(){
 const svg=document.documentElement; const W=svg.getBoundingClientRect().width;
 const out={width:W,frames:0,labelled:0,overflowText:[],outside:[]};
 for(const g of svg.querySelectorAll('g')){
   const r=g.querySelector(':scope > rect'), t=g.querySelector(':scope > text'); if(!r||!t) continue; out.frames++;
   const rb=r.getBoundingClientRect(), tb=t.getBoundingClientRect();
   if(t.textContent.trim().length && tb.width>0){ out.labelled++;
     if(tb.left<rb.left-1 || tb.right>rb.right+1) out.overflowText.push(t.textContent.slice(0,60)+' '+tb.width.toFixed(1)+'>'+rb.width.toFixed(1)); }
 }
 for(const t of svg.querySelectorAll('text')){const b=t.getBoundingClientRect(); if(b.width>0&&(b.left<-1||b.right>W+1)) out.outside.push(t.textContent.slice(0,60)+' '+b.left.toFixed(0)+'..'+b.right.toFixed(0));}
 svg.setAttribute('data-check', btoa(unescape(encodeURIComponent(JSON.stringify(out)))));
},0);});
]]></script>"#;

fn run(chromium: &str, args: &[String]) -> String {
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=3000"])
        .args(args)
        .output()
        .expect("chromium runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn decode(b64: &str) -> serde_json::Value {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64.trim()).expect("base64 from the page script");
    serde_json::from_slice(&bytes).expect("JSON from the page script")
}

/// `page` (HTML) as Chromium lays it out `width` px wide: the page script's findings.
pub fn check_page(chromium: &str, page: &str, dir: &Path, name: &str, width: u32) -> serde_json::Value {
    let at = page.rfind("</body>").expect("a </body>");
    let html = dir.join(format!("{name}.check.html"));
    std::fs::write(&html, format!("{}{PAGE_SCRIPT}{}", &page[..at], &page[at..])).unwrap();
    let dom = run(
        chromium,
        &[format!("--window-size={width},900"), "--dump-dom".into(), format!("file://{}", html.display())],
    );
    let start =
        dom.find("<pre id=\"layout-check\">").unwrap_or_else(|| panic!("no findings in the DOM of {name}")) + 23;
    let end = start + dom[start..].find("</pre>").unwrap();
    decode(&dom[start..end])
}

/// An SVG flame graph as Chromium draws it: the SVG script's findings.
pub fn check_svg(chromium: &str, svg: &[u8], dir: &Path, name: &str) -> serde_json::Value {
    let text = String::from_utf8_lossy(svg);
    let at = text.rfind("</svg>").expect("an </svg>");
    let path = dir.join(format!("{name}.check.svg"));
    std::fs::write(&path, format!("{}{SVG_SCRIPT}{}", &text[..at], &text[at..])).unwrap();
    let dom =
        run(chromium, &["--window-size=1600,900".into(), "--dump-dom".into(), format!("file://{}", path.display())]);
    let start =
        dom.find("data-check=\"").unwrap_or_else(|| panic!("no findings in the DOM of {name}: {dom:.300}")) + 12;
    let end = start + dom[start..].find('"').unwrap();
    decode(&dom[start..end])
}

/// A screenshot of `file` at `width` x `height`: RGB rows.
pub struct Shot {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<[u8; 3]>,
    pub path: PathBuf,
}

impl Shot {
    pub fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.width + x]
    }
}

pub fn screenshot(chromium: &str, file: &Path, width: u32, height: u32) -> Shot {
    let png = file.with_extension("png");
    let _ = std::fs::remove_file(&png);
    run(
        chromium,
        &[
            format!("--window-size={width},{height}"),
            format!("--screenshot={}", png.display()),
            format!("file://{}", file.display()),
        ],
    );
    let decoder = png::Decoder::new(std::fs::File::open(&png).expect("a screenshot"));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let rgb = buf[..info.buffer_size()].chunks(px).map(|p| [p[0], p[1], p[2]]).collect();
    Shot { width: info.width as usize, height: info.height as usize, rgb, path: png }
}

/// A CSS `rgb(r, g, b)` colour.
pub fn rgb_of(css: &str) -> [u8; 3] {
    let v: Vec<u8> = css
        .trim_start_matches("rgba(")
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect();
    [v[0], v[1], v[2]]
}

/// The common checks of a page: no text wider than its box, nothing past the window, type
/// of 12 px or more, no legend on a plotted mark.
pub fn assert_readable(name: &str, c: &serde_json::Value) {
    assert_eq!(c["overflow"].as_array().map_or(0, Vec::len), 0, "{name}: text wider than its box: {}", c["overflow"]);
    assert_eq!(c["wide"].as_array().map_or(0, Vec::len), 0, "{name}: past the window: {}", c["wide"]);
    assert!(c["minFont"].as_f64().unwrap() >= 12.0, "{name}: type under 12 px: {}", c["tinyText"]);
    for (id, ch) in c["charts"].as_object().unwrap() {
        assert_eq!(ch["hits"], 0, "{name}: chart {id}: a legend lies on the data: {ch}");
    }
}
