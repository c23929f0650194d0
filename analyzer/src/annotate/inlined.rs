//! Functions inlined into others: a name `annotate` is asked for is also looked for in
//! DWARF's inline chains at the sampled addresses (a function without a symbol of its own,
//! inlined everywhere it runs, is found only there). Its samples are those whose chain
//! holds it, split by the function each was inlined into, and each such function is
//! annotated with only the instructions DWARF places in the inlined copy (the rest of the
//! function left out, said in a note).

use super::{nearest_names, Hit, InstructionRow, Key, Sampled};
use crate::stages::Attributor;
use crate::Error;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The samples of `wants` (names no symbol has) where DWARF says they were inlined: per
/// (name, function it was inlined into), the hits whose inline chain holds the name, most
/// samples first; plus every inlined function's name seen, for the nearest names.
pub(super) fn inlined_samples(
    table: &HashMap<Key, Sampled>,
    wants: &[&str],
    at: &mut Attributor,
) -> (Vec<(String, Key, Sampled)>, BTreeSet<String>) {
    let mut found: BTreeMap<(String, Key), Sampled> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut chains: HashMap<(u32, u64), Vec<String>> = HashMap::new();
    for (key, s) in table {
        // Kernel names come from kallsyms (no inline chains, even with --vmlinux: it is
        // read for the chosen functions only); unnamed addresses have none.
        if s.kernel || s.unnamed || s.binary_unknown {
            continue;
        }
        for h in &s.hits {
            let chain = match chains.entry((h.pid, h.ip)) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(v) => {
                    let frames = at.frames(h.pid, h.ip, false);
                    // Innermost first; the last frame is the function itself.
                    let chain: Vec<String> =
                        frames.iter().take(frames.len().saturating_sub(1)).map(|f| f.function.clone()).collect();
                    seen.extend(chain.iter().cloned());
                    v.insert(chain)
                }
            };
            // A function inlined into itself (recursion) is its own symbol's samples already.
            let copy_of = |w: &&&str| **w != key.0 && chain.iter().any(|f| f == **w);
            for want in wants.iter().filter(copy_of) {
                add_hit(found.entry((want.to_string(), key.clone())).or_default(), h);
            }
        }
    }
    let mut out: Vec<(String, Key, Sampled)> = found.into_iter().map(|((w, k), s)| (w, k, s)).collect();
    out.sort_by(|a, b| b.2.samples.cmp(&a.2.samples).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
    (out, seen)
}

fn add_hit(s: &mut Sampled, h: &Hit) {
    s.samples += h.samples;
    *s.by_stage.entry(h.stage.clone()).or_default() += h.samples;
    s.hits.push(h.clone());
}

/// The error for a name that neither a sampled symbol nor an inlined function at a
/// sampled address has: the nearest of both, inlined ones marked.
pub(super) fn no_such_symbol(want: &str, table: &HashMap<Key, Sampled>, inlined: &BTreeSet<String>) -> Error {
    let symbols: BTreeSet<&str> = table.keys().map(|k| k.0.as_str()).collect();
    let mut names: Vec<&str> = symbols.iter().copied().collect();
    names.extend(inlined.iter().map(String::as_str).filter(|n| !symbols.contains(n)));
    let near = nearest_names(want, &names, 5);
    let shown: Vec<String> = near
        .iter()
        .map(|n| {
            let mark = if symbols.contains(n.as_str()) { "" } else { " (inlined)" };
            format!("`{}`{mark}", crate::printable(n.to_string()))
        })
        .collect();
    let inlined = match names.len() - symbols.len() {
        0 => "; no inline information names another function at their addresses".to_string(),
        n => format!(", and {n} more functions are inlined at their addresses"),
    };
    Error::Annotate(format!(
        "symbol `{}` has no samples in this input ({} symbols do{inlined}); nearest names: {}",
        crate::printable(want.to_string()),
        symbols.len(),
        if shown.is_empty() { "none".to_string() } else { shown.join(", ") }
    ))
}

/// Keep the rows of `inlined`'s copy in `into` (those whose inline chain holds it), each
/// after left-out instructions marked as after a gap; said in `notes`, with any samples at
/// rows DWARF does not place in the copy (none are expected: they were chosen by it).
pub(super) fn keep_inlined_rows(
    rows: &mut Vec<InstructionRow>,
    inlined: &str,
    into: &str,
    start: Option<u64>,
    notes: &mut Vec<String>,
) {
    if rows.iter().all(|r| r.frames.is_empty()) {
        // Addresses only: the function's bytes are not at hand (the notes before say why).
        notes.push(format!("`{inlined}` as inlined into `{into}`: the sampled addresses of that copy only"));
        return;
    }
    let is_copy =
        |r: &InstructionRow| r.frames.iter().take(r.frames.len().saturating_sub(1)).any(|f| f.function == inlined);
    let lost: u64 = rows.iter().filter(|r| !is_copy(r)).map(|r| r.samples).sum();
    rows.retain(is_copy);
    let mut prev_end = start;
    for r in rows.iter_mut() {
        r.after_gap |= prev_end.is_some_and(|e| e != r.address);
        prev_end = Some(r.address + r.length as u64);
    }
    notes.push(format!(
        "`{inlined}` as inlined into `{into}` (DWARF's inline chains): shown are the {} \
         instructions of that copy (`...` marks instructions of `{into}` left out), with the samples \
         whose inline chain holds it",
        rows.len()
    ));
    if lost > 0 {
        notes.push(format!("{lost} of those samples sit at instructions DWARF places outside the copy: not shown"));
    }
}
