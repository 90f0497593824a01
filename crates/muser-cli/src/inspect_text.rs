//! Human rendering of `muser inspect` (tables on stdout).

use std::fmt::Write as _;
use std::path::Path;

use muser_gguf::Gguf;

use crate::inspect::{human_bytes, TensorRow as Row, Totals as TotalsRow};

pub struct TextReport<'a> {
    pub path: &'a Path,
    pub g: &'a Gguf,
    pub sha: Option<&'a str>,
    pub hyper: Option<serde_json::Value>,
    pub tok: Option<serde_json::Value>,
    pub tensors: &'a [Row],
    pub totals: &'a TotalsRow,
    pub verdict_valid: bool,
    pub verdict_runnable: bool,
    pub problems: &'a [String],
    pub all: bool,
}

fn kv_lines(o: &mut String, v: &serde_json::Value) {
    if let Some(m) = v.as_object() {
        for (k, x) in m {
            let s = match x {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let _ = writeln!(o, "  {k:<24} {s}");
        }
    }
}

pub fn render(r: TextReport<'_>) -> String {
    let mut out = String::new();
    let o = &mut out;
    let g = r.g;
    let _ = writeln!(o, "file          {}", r.path.display());
    let _ = writeln!(
        o,
        "size          {} ({} bytes)",
        human_bytes(g.file_size()),
        g.file_size()
    );
    if let Some(s) = r.sha {
        let _ = writeln!(o, "sha256        {s}");
    }
    let _ = writeln!(
        o,
        "gguf          v{}, alignment {}, data at offset {}, {} keys, {} tensors",
        g.version(),
        g.alignment(),
        g.data_offset(),
        g.metadata().len(),
        g.tensors().len()
    );
    let _ = writeln!(o, "architecture  {}", g.architecture().unwrap_or("(none)"));
    if let Some(h) = &r.hyper {
        let _ = writeln!(o, "\nhyperparameters");
        kv_lines(o, h);
    }
    if let Some(t) = &r.tok {
        let _ = writeln!(o, "\ntokenizer");
        kv_lines(o, t);
    }
    let _ = writeln!(o, "\nmetadata");
    for (k, v) in g.metadata() {
        let s = v.to_string();
        let s = if s.chars().count() > 100 {
            let cut: String = s.chars().take(97).collect();
            format!("{cut}...")
        } else {
            s
        };
        let _ = writeln!(o, "  {k:<44} {}", s.replace('\n', "\\n"));
    }
    let _ = writeln!(o, "\ntensors");
    let _ = writeln!(
        o,
        "  {:<40} {:<6} {:>22} {:>14}",
        "name", "type", "shape", "bytes"
    );
    let n = r.tensors.len();
    for (i, t) in r.tensors.iter().enumerate() {
        if !r.all && n > 40 && (20..n - 10).contains(&i) {
            if i == 20 {
                let _ = writeln!(o, "  ... {} more (use --all) ...", n - 30);
            }
            continue;
        }
        let shape = t
            .shape
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" x ");
        let _ = writeln!(
            o,
            "  {:<40} {:<6} {:>22} {:>14}",
            t.name, t.ty, shape, t.bytes
        );
    }
    let tt = r.totals;
    let _ = writeln!(o, "\ntotals");
    let _ = writeln!(
        o,
        "  {} tensors, {} parameters, {} ({} bytes), {:.3} bits/weight",
        tt.tensors,
        tt.parameters,
        human_bytes(tt.bytes),
        tt.bytes,
        tt.bits_per_weight
    );
    for (ty, x) in &tt.by_type {
        let _ = writeln!(
            o,
            "  {:<6} {:>5} tensors {:>15} params {:>12}",
            ty,
            x.tensors,
            x.parameters,
            human_bytes(x.bytes)
        );
    }
    o.push('\n');
    if r.verdict_valid && r.verdict_runnable {
        let _ = writeln!(o, "verdict       VALID, runnable by Muser");
    } else {
        let _ = writeln!(o, "verdict       VALID GGUF, not runnable by Muser:");
        for p in r.problems {
            let _ = writeln!(o, "  - {p}");
        }
    }
    out
}
