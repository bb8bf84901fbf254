//! Suggestions: the smallest single changes that make something fit, found by relaxing one
//! constraint at a time and asking the resolver again.

use super::{Catalog, Query, Stack, Status, Suggestion, rules};
use crate::model::DriverVersion;

fn best(cat: &dyn Catalog, q: &Query) -> Option<Stack> {
    rules::search(cat, q, None).ok()?.into_iter().next()
}

fn build(s: &Stack) -> String {
    format!("torch {}+{}", s.torch, s.variant)
}

fn on_gpus(q: &Query) -> String {
    let names: Vec<String> = q.gpus.iter().map(|g| g.gpu.name.clone()).collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(" on {}", names.join(" + "))
    }
}

/// Suggestions for an answer whose best verdict is `verdict`.
pub(crate) fn suggest(cat: &dyn Catalog, q: &Query, verdict: Status) -> Vec<Suggestion> {
    let mut out: Vec<Suggestion> = Vec::new();
    let target = if verdict == Status::Incompatible {
        Status::Conditional
    } else {
        Status::Compatible
    };
    let mut push = |s: Suggestion| {
        if !out.contains(&s) {
            out.push(s);
        }
    };

    // A newer driver: the usual fix on a rented machine.
    if let Some(d) = &q.driver {
        let relaxed = Query {
            driver: None,
            ..q.clone()
        };
        if let Ok(stacks) = rules::search(cat, &relaxed, None) {
            if let Some(s) = stacks.iter().find(|s| s.status == Status::Compatible) {
                if let Some(need) = s
                    .needs
                    .driver_native
                    .as_ref()
                    .and_then(|n| n.parse::<DriverVersion>().ok())
                {
                    if &need > d {
                        let branch = rules::branch_of(cat, &need)
                            .map(|(b, _)| format!(" (R{} or newer)", b.branch))
                            .unwrap_or_default();
                        push(Suggestion {
                            kind: "driver",
                            change: format!("driver >= {need}{branch}"),
                            gives: format!("{} runs natively{}", build(s), on_gpus(q)),
                            status: Status::Compatible,
                        });
                    }
                }
            }
        }
    }

    // Other builds of torch.
    if !q.torch.is_empty() || q.cuda.is_some() || !q.variants.is_empty() {
        let relaxed = Query {
            torch: Vec::new(),
            cuda: None,
            variants: Vec::new(),
            ..q.clone()
        };
        if let Some(s) = best(cat, &relaxed).filter(|s| s.status <= target) {
            let what = if q.torch.is_empty() {
                format!("the {} build", s.variant)
            } else {
                format!("torch {} ({})", s.torch, s.variant)
            };
            push(Suggestion {
                kind: "torch",
                change: format!("use {what}"),
                gives: format!("{} is {}{}", build(&s), s.status, on_gpus(q)),
                status: s.status,
            });
        }
        // The same torch release with another CUDA build.
        if q.cuda.is_some() || !q.variants.is_empty() {
            let relaxed = Query {
                cuda: None,
                variants: Vec::new(),
                ..q.clone()
            };
            if let Some(s) = best(cat, &relaxed).filter(|s| s.status <= target) {
                push(Suggestion {
                    kind: "cuda",
                    change: format!("use the {} build", s.variant),
                    gives: format!("{} is {}{}", build(&s), s.status, on_gpus(q)),
                    status: s.status,
                });
            }
        }
    }

    // Another Python.
    if !q.python.is_empty() {
        let relaxed = Query {
            python: Vec::new(),
            ..q.clone()
        };
        if let Some(s) = best(cat, &relaxed).filter(|s| s.status <= target) {
            push(Suggestion {
                kind: "python",
                change: format!("use Python {}", s.python),
                gives: format!(
                    "{} has a cp{} wheel and is {}",
                    build(&s),
                    s.python.replace('.', ""),
                    s.status
                ),
                status: s.status,
            });
        }
    }

    // A newer OS.
    if q.glibc.is_some() {
        let relaxed = Query {
            glibc: None,
            ..q.clone()
        };
        if let Some(s) = best(cat, &relaxed).filter(|s| s.status <= target) {
            push(Suggestion {
                kind: "os",
                change: format!(
                    "an OS with glibc >= {} (Ubuntu 20.04 or newer, RHEL/Rocky 8 or newer)",
                    s.needs.glibc
                ),
                gives: format!("{} is {}", build(&s), s.status),
                status: s.status,
            });
        }
    }

    out.sort_by_key(|s| s.status);
    out
}
