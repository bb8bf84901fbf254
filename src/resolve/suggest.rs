//! Suggestions: the smallest single changes that make something fit, found by relaxing one
//! constraint at a time and asking again (through the fast verdict path: only the best
//! build of each relaxation matters here).

use super::index::Index;
use super::rules::{Verdict, verdicts};
use super::{Pin, Query, Status, Suggestion};

/// Whether a constraint came from a flag (`--torch`), which a hint may change, rather
/// than from the project's files, which it may not.
fn is_flag(origin: &str) -> bool {
    origin.starts_with("--")
}

/// The pins the project's files make, without those of the flags.
fn project_only(pins: &[Pin]) -> Vec<Pin> {
    pins.iter().filter(|p| !p.is_flag()).cloned().collect()
}

/// The best build of a query, ranked as the search ranks stacks.
fn best(ix: &Index<'_>, q: &Query) -> Option<Verdict> {
    verdicts(ix, q)
        .into_iter()
        .filter(|v| v.pythons > 0)
        .min_by(|a, b| {
            (a.status, std::cmp::Reverse(&a.torch), a.distance).cmp(&(
                b.status,
                std::cmp::Reverse(&b.torch),
                b.distance,
            ))
        })
}

fn build(v: &Verdict) -> String {
    format!("torch {}+{}", v.torch, v.variant)
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
// The changes tried, in the order a user would make them (driver, torch build, Python,
// OS), each a short block over the same candidates.
pub(crate) fn suggest(ix: &Index<'_>, q: &Query, verdict: Status) -> Vec<Suggestion> {
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

    // A newer driver: the usual fix on a rented machine. The smallest one that makes a
    // build run natively (RTX 5090 on R550 needs R570, not the newest branch), and the best
    // build at that driver.
    if let Some(d) = &q.driver {
        let relaxed = Query {
            driver: None,
            ..q.clone()
        };
        let need = verdicts(ix, &relaxed)
            .into_iter()
            .filter(|v| v.pythons > 0 && v.status == Status::Compatible)
            .filter_map(|v| v.driver_native)
            .filter(|n| n > d)
            .min();
        if let Some(need) = need {
            let at_need = Query {
                driver: Some(need.clone()),
                ..q.clone()
            };
            if let Some(v) = best(ix, &at_need).filter(|v| v.status == Status::Compatible) {
                let branch = ix
                    .branch_of(&need)
                    .map(|(b, _)| format!(" (R{} or newer)", b.branch))
                    .unwrap_or_default();
                push(Suggestion {
                    kind: "driver",
                    change: format!("driver >= {need}{branch}"),
                    gives: format!("{} runs natively{}", build(&v), on_gpus(q)),
                    status: Status::Compatible,
                });
            }
        }
    }

    // Other builds of torch: only what the flags asked is relaxed; the project's own
    // files (its pins, requires-python, index URLs) stay, so a hint never leaves them.
    if q.torch.iter().any(Pin::is_flag) || q.cuda.is_some() || q.variants.iter().any(|(_, o)| is_flag(o)) {
        let relaxed = Query {
            torch: project_only(&q.torch),
            cuda: None,
            variants: q.variants.iter().filter(|(_, o)| !is_flag(o)).cloned().collect(),
            ..q.clone()
        };
        if let Some(v) = best(ix, &relaxed).filter(|v| v.status <= target) {
            let what = if !q.torch.iter().any(Pin::is_flag) {
                format!("the {} build", v.variant)
            } else {
                format!("torch {} ({})", v.torch, v.variant)
            };
            push(Suggestion {
                kind: "torch",
                change: format!("use {what}"),
                gives: format!("{} is {}{}", build(&v), v.status, on_gpus(q)),
                status: v.status,
            });
        }
        // The same torch release with another CUDA build.
        if q.cuda.is_some() || q.variants.iter().any(|(_, o)| is_flag(o)) {
            let relaxed = Query {
                cuda: None,
                variants: q.variants.iter().filter(|(_, o)| !is_flag(o)).cloned().collect(),
                ..q.clone()
            };
            if let Some(v) = best(ix, &relaxed).filter(|v| v.status <= target) {
                push(Suggestion {
                    kind: "cuda",
                    change: format!("use the {} build", v.variant),
                    gives: format!("{} is {}{}", build(&v), v.status, on_gpus(q)),
                    status: v.status,
                });
            }
        }
    }

    // Another Python (within the project's requires-python).
    if q.python.iter().any(|(_, o)| is_flag(o)) {
        let relaxed = Query {
            python: q.python.iter().filter(|(_, o)| !is_flag(o)).cloned().collect(),
            ..q.clone()
        };
        if let Some(v) = best(ix, &relaxed).filter(|v| v.status <= target) {
            let newest = ix
                .builds()
                .iter()
                .find(|b| b.rel.version == v.torch && b.v.tag == v.variant)
                .and_then(|b| super::rules::preferred_python(ix, q, b))
                .map(|t| t.py.clone());
            if let Some(py) = newest {
                push(Suggestion {
                    kind: "python",
                    change: format!("use Python {py}"),
                    gives: format!(
                        "{} has a cp{} wheel and is {}",
                        build(&v),
                        py.replace('.', ""),
                        v.status
                    ),
                    status: v.status,
                });
            }
        }
    }

    // A newer OS.
    if q.glibc.is_some() {
        let relaxed = Query {
            glibc: None,
            ..q.clone()
        };
        if let Some(v) = best(ix, &relaxed).filter(|v| v.status <= target) {
            let glibc = ix
                .builds()
                .iter()
                .find(|b| b.rel.version == v.torch && b.v.tag == v.variant)
                .and_then(|b| {
                    b.rel
                        .glibc_floor_on(q.host_arch().map_or(crate::model::HostArch::X86_64, |(a, _)| a))
                });
            let examples = glibc
                .as_ref()
                .map(|g| {
                    crate::model::oldest_os_with(g)
                        .iter()
                        .map(|os| format!("{os} or newer"))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let glibc = glibc.map(|g| g.to_string()).unwrap_or_default();
            push(Suggestion {
                kind: "os",
                change: format!("an OS with glibc >= {glibc} ({examples})"),
                gives: format!("{} is {}", build(&v), v.status),
                status: v.status,
            });
        }
    }

    out.sort_by_key(|s| s.status);
    out
}

/// When a framework's torch pin (`vllm==0.6.3.post1` pins `torch==2.4.0`) leaves no build
/// with the other pins: the release of the framework whose pin fits them (the newest), and
/// the torch pin that fits the framework, each as the one change to make.
pub(crate) fn framework_conflicts(ix: &Index<'_>, q: &Query) -> Vec<Suggestion> {
    let mut out = Vec::new();
    for fw in q.frameworks.iter().filter(|f| f.known && !f.torch.is_empty()) {
        let origin = fw.pin_origin();
        let without: Vec<Pin> = q.torch.iter().filter(|p| p.origin != origin).cloned().collect();
        if without.len() == q.torch.len() {
            continue;
        }
        // Another release of the framework: the builds the other pins allow, and the
        // newest release whose pin admits one of them.
        let others = Query {
            torch: without.clone(),
            ..q.clone()
        };
        let fits: Vec<Verdict> = verdicts(ix, &others)
            .into_iter()
            .filter(|v| v.pythons > 0 && v.status <= Status::Conditional)
            .collect();
        let alternative = fw.releases.iter().find_map(|(version, specs)| {
            if specs.is_empty() {
                return None;
            }
            let v = fits
                .iter()
                .filter(|v| specs.iter().all(|s| s.contains(&v.torch)))
                .min_by(|a, b| {
                    (a.status, std::cmp::Reverse(&a.torch)).cmp(&(b.status, std::cmp::Reverse(&b.torch)))
                })?;
            Some((version, specs, v))
        });
        if let Some((version, specs, v)) = alternative {
            let pins: Vec<String> = specs.iter().map(|s| format!("torch{s}")).collect();
            out.push(Suggestion {
                kind: "framework",
                change: format!("{}=={version} (it pins {})", fw.framework, pins.join(", ")),
                gives: format!("{} is {}{}", build(v), v.status, on_gpus(q)),
                status: v.status,
            });
        }
        // The project's other torch pins changed to the framework's.
        let own = Query {
            torch: q.torch.iter().filter(|p| p.origin == origin).cloned().collect(),
            ..q.clone()
        };
        if let Some(v) = best(ix, &own).filter(|v| v.status <= Status::Conditional) {
            let replaced: Vec<String> = without
                .iter()
                .map(|p| format!("torch{} ({})", p.specifiers, p.origin))
                .collect();
            out.push(Suggestion {
                kind: "torch",
                change: format!(
                    "torch=={} instead of {}, as {} pins",
                    v.torch,
                    replaced.join(", "),
                    fw.requirement
                ),
                gives: format!("{} is {}{}", build(&v), v.status, on_gpus(q)),
                status: v.status,
            });
        }
    }
    out
}

/// When no build matches what was asked at all: the builds that do exist for the torch
/// pinned, one per CUDA variant (the best release of each), as changes of `--cuda`; when
/// the torch pins themselves match nothing, the usual relaxations.
pub(crate) fn existing_builds(ix: &Index<'_>, q: &Query) -> Vec<Suggestion> {
    let relaxed = Query {
        cuda: None,
        variants: Vec::new(),
        ..q.clone()
    };
    let mut best_per_variant: Vec<Verdict> = Vec::new();
    for v in verdicts(ix, &relaxed).into_iter().filter(|v| v.pythons > 0) {
        match best_per_variant.iter_mut().find(|b| b.variant == v.variant) {
            Some(b) if (v.status, std::cmp::Reverse(&v.torch)) < (b.status, std::cmp::Reverse(&b.torch)) => {
                *b = v
            }
            Some(_) => {}
            None => best_per_variant.push(v),
        }
    }
    best_per_variant.sort_by(|a, b| {
        (a.status, std::cmp::Reverse(&a.torch), a.distance).cmp(&(
            b.status,
            std::cmp::Reverse(&b.torch),
            b.distance,
        ))
    });
    let out: Vec<Suggestion> = best_per_variant
        .iter()
        .map(|v| Suggestion {
            kind: "cuda",
            change: match v.variant.cuda() {
                Some(c) => format!("--cuda {c} (the {} build)", v.variant),
                None => "--cuda cpu".to_string(),
            },
            gives: format!("{} is {}{}", build(v), v.status, on_gpus(q)),
            status: v.status,
        })
        .collect();
    if out.is_empty() {
        suggest(ix, q, Status::Incompatible)
    } else {
        out
    }
}
