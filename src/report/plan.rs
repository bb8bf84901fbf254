//! `gpuenv plan`'s report: the estimate term by term with its assumptions, the GPUs it fits
//! on with their stacks, the machine, the time and cost, the offers, and the order.
//!
//! Owns: how a plan reads, on a terminal and as JSON ([`super::doc::PlanDoc`]). Must not:
//! compute anything about memory, fit or stacks (the plan holds it).

use std::io::{self, Write};

use super::doc::{PlanDoc, PlanMemory};
use super::{SCHEMA_VERSION, Styles, write_json};
use crate::model::PartialDate;
use crate::plan::offers::money;
use crate::plan::run::{Options, Plan};

/// How many fitting GPUs the terminal report lists without `--all`.
const SHOWN: usize = 12;

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn signed_gib(bytes: i64) -> String {
    format!("{:+.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Writes the plan.
pub fn plan(
    out: &mut dyn Write,
    p: &Plan,
    o: &Options,
    all: bool,
    json: bool,
    db_date: Option<PartialDate>,
    styles: Styles,
) -> io::Result<()> {
    let order = crate::plan::run::order(p);
    if json {
        let mut assumptions = p.estimate.assumptions.clone();
        assumptions.extend(p.assumptions.iter().cloned());
        return write_json(
            out,
            &PlanDoc {
                schema_version: SCHEMA_VERSION,
                db_date,
                params: p.model.params,
                model: p.model.clone(),
                settings: p.settings.clone(),
                memory: PlanMemory {
                    per_gpu: p.estimate.per_gpu,
                },
                fits: p.fits.clone(),
                machine: p.machine.clone(),
                assumptions,
                offers: p.offers.clone(),
                offers_note: crate::plan::offers::currencies_note(&p.offers),
                pick: p.pick.clone(),
                order,
            },
        );
    }
    let s = &p.settings;
    writeln!(
        out,
        "model:      {} parameters ({}){}",
        p.model.params,
        p.model.source,
        if p.model.active_params != p.model.params && p.model.active_params > 0 {
            format!(", {} active per token", p.model.active_params)
        } else {
            String::new()
        }
    )?;
    let word = |v: &dyn std::fmt::Debug| format!("{v:?}").to_lowercase();
    writeln!(
        out,
        "settings:   {}, {}{}, seq-len {}, batch {}, attention {}{}, {}, shard {}",
        word(&s.method),
        word(&s.precision),
        if s.method == crate::plan::Method::Inference {
            format!(", engine {}", word(&s.engine))
        } else {
            format!(
                ", {}, trainer {}, {}",
                word(&s.optimizer),
                word(&s.trainer),
                if s.checkpointing {
                    "checkpointing"
                } else {
                    "no checkpointing"
                }
            )
        },
        s.seq_len,
        s.batch,
        word(&s.attention),
        if s.tp > 1 || s.pp > 1 {
            format!(", tensor parallel {} x pipeline {}", s.tp, s.pp)
        } else {
            String::new()
        },
        if o.gpus.is_some() {
            format!("{} GPU(s)", s.gpus)
        } else {
            "the fewest GPUs of each kind that hold it (memory below at 1)".to_string()
        },
        word(&s.shard)
    )?;
    let m = &p.estimate.per_gpu;
    writeln!(out)?;
    writeln!(out, "memory per GPU (estimate):")?;
    for (name, v) in [
        ("weights", m.weights),
        ("gradients", m.gradients),
        ("optimizer", m.optimizer),
        ("activations", m.activations),
        ("kv cache", m.kv_cache),
        ("overhead", m.overhead),
    ] {
        writeln!(out, "  {name:<12} {:>12}", gib(v))?;
    }
    writeln!(out, "  {:<12} {:>12}", "total", gib(m.total))?;
    writeln!(
        out,
        "  (activations and overhead are estimates; the assumptions are listed below)"
    )?;

    writeln!(out)?;
    writeln!(out, "GPUs:")?;
    let fitting = p.fits.iter().filter(|f| f.fits).count();
    let shown: Vec<_> = p
        .fits
        .iter()
        .filter(|f| all || f.fits)
        .take(if all { usize::MAX } else { SHOWN })
        .collect();
    if shown.is_empty() {
        writeln!(out, "  none of compat-db's GPUs holds it (--all lists them)")?;
    }
    let more = if all {
        0
    } else {
        fitting.saturating_sub(shown.len())
    };
    for f in shown {
        write!(out, "  ")?;
        styles.paint(out, if f.fits { "fits" } else { "no  " })?;
        write!(
            out,
            "  {}x {}: {} per GPU of {}, headroom {}",
            f.count,
            f.gpu,
            gib(f.per_gpu_bytes),
            gib(f.memory_bytes),
            signed_gib(f.headroom_bytes)
        )?;
        if f.count > 1 {
            write!(out, ", {}", f.parallelism_text)?;
        }
        if let Some(t) = f.decode_tokens_per_s {
            write!(out, ", {t:.0} tokens/s")?;
        }
        if let Some(h) = f.hours {
            write!(out, ", {h:.1} h")?;
            if let Some(price) = o.price_per_gpu_hour {
                write!(
                    out,
                    ", {} at {}/GPU-hour",
                    money(o.currency, h * price * f64::from(f.count)),
                    money(o.currency, price)
                )?;
            }
        }
        writeln!(out)?;
        if let Some(st) = &f.stack {
            match (&st.torch, &st.why) {
                (Some(t), _) => writeln!(
                    out,
                    "          stack: torch {t} on Python {} ({}){}",
                    st.python.as_deref().unwrap_or("?"),
                    st.status,
                    st.min_driver
                        .as_deref()
                        .map(|d| format!(", driver >= {d}"))
                        .unwrap_or_default()
                )?,
                (None, why) => writeln!(
                    out,
                    "          stack: none runs: {}",
                    why.as_deref().unwrap_or("?")
                )?,
            }
        }
        if let Some(i) = &f.interconnect {
            writeln!(out, "          links: {i}")?;
        }
        if !f.unverified_figures.is_empty() {
            writeln!(
                out,
                "          speed: {}",
                crate::plan::run::unverified_speed_note(&f.gpu, &f.unverified_figures)
            )?;
        }
    }
    if more > 0 {
        writeln!(
            out,
            "  ... {more} more that fit (--all lists every GPU, --json has them all)"
        )?;
    }
    if let Some(mc) = &p.machine {
        writeln!(out)?;
        writeln!(
            out,
            "machine:    {} CPU cores, {} GiB RAM, {} GB disk at least",
            mc.cpu_cores, mc.ram_gib, mc.disk_gb
        )?;
    }
    if !p.offers.is_empty() {
        writeln!(out)?;
        writeln!(out, "offers, best first:")?;
        for (i, r) in p.offers.iter().enumerate() {
            let price = match (r.price_per_machine_hour, r.price_per_gpu_hour) {
                (Some(m), Some(g)) if r.count > 1 => format!(
                    ", {}/machine-hour ({}/GPU-hour)",
                    money(r.currency, m),
                    money(r.currency, g)
                ),
                (Some(m), _) => format!(", {}/hour", money(r.currency, m)),
                _ => String::new(),
            };
            let run = match (r.hours, r.cost) {
                (Some(h), Some(c)) => format!(", run {h:.1} h, {}", money(r.currency, c)),
                (Some(h), None) => format!(", run {h:.1} h"),
                _ if r.unranked_on_time => ", unranked on time".to_string(),
                _ => String::new(),
            };
            writeln!(
                out,
                "  {}. {}: {}x {}{price}{run}{}",
                i + 1,
                r.offer.name,
                r.count,
                r.gpu.as_deref().unwrap_or(&r.offer.gpu),
                if r.reasons.is_empty() { "" } else { ": falls short" }
            )?;
            for why in &r.reasons {
                writeln!(out, "       - {why}")?;
            }
            for note in &r.notes {
                writeln!(out, "       note: {note}")?;
            }
        }
        if let Some(note) = crate::plan::offers::currencies_note(&p.offers) {
            writeln!(out, "  ({note})")?;
        }
    }
    writeln!(out)?;
    writeln!(out, "assumptions:")?;
    for a in p.estimate.assumptions.iter().chain(&p.assumptions) {
        writeln!(out, "  {}: {} [{}]", a.what, a.value, a.source)?;
    }
    match order {
        Some(text) => {
            writeln!(out)?;
            writeln!(out, "order to accept on delivery (--order-out FILE writes it):")?;
            for l in text.lines().filter(|l| !l.starts_with('#')) {
                writeln!(out, "  {l}")?;
            }
        }
        None => {
            writeln!(out)?;
            writeln!(out, "no order: no GPU fits")?;
        }
    }
    Ok(())
}
