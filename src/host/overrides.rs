//! `GPUENV_*` environment variables: single facts that replace what the probes found.
//!
//! They are the test seam for one fact ("pretend this host has driver 535") and a user
//! feature (checking a host before its driver upgrade). Every override is listed in the
//! report, so an answer never silently rests on one.
//!
//! | variable | replaces | example |
//! |---|---|---|
//! | `GPUENV_DRIVER` | the driver version | `535.104.05` |
//! | `GPUENV_GPUS` | the GPUs (names or aliases, `NAMExN`, comma-separated) | `H100 SXMx8` |
//! | `GPUENV_NVCC` | the CUDA version of `nvcc` on PATH | `12.4` |
//! | `GPUENV_GLIBC` | the glibc version | `2.35` |
//! | `GPUENV_CPUS` | logical CPUs | `64` |
//! | `GPUENV_MEMORY_GIB` | total memory, GiB | `512` |
//! | `GPUENV_TORCH` | torch in the first Python (`version` or `version@cuda`) | `2.4.1+cu121@12.1` |

use super::probe::{HostReport, PythonEnv, Sourced, TorchProbe};
use super::types::{CpuInfo, GpuInfo};
use crate::model::{CudaVersion, DriverVersion, GlibcVersion};

/// The variables this module reads, in the order they are applied.
pub const VARIABLES: [&str; 7] = [
    "GPUENV_DRIVER",
    "GPUENV_GPUS",
    "GPUENV_NVCC",
    "GPUENV_GLIBC",
    "GPUENV_CPUS",
    "GPUENV_MEMORY_GIB",
    "GPUENV_TORCH",
];

/// An override whose value is not what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}=`{value}`: {reason}")]
pub struct OverrideError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What was expected.
    pub reason: String,
}

/// Splits `NAMExN` into the name and the count (1 when there is none). The count is a
/// lowercase `x` (or `×`) right before the digits (`H100x8`), or an `x` standing alone
/// (`H100 SXM x 8`); an `X` inside a name (`RTX 5090`, `RTX5090`) is not a count.
pub fn split_count(text: &str) -> (String, u32) {
    let t = text.trim();
    let digits = t.len() - t.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && digits < t.len() {
        let (head, num) = t.split_at(t.len() - digits);
        let name = if let Some(n) = head.strip_suffix(['x', '×']) {
            Some(n)
        } else {
            // ` x 8` / ` X 8`: a separator with white space on both sides.
            let h = head.trim_end();
            (h.len() < head.len())
                .then(|| h.strip_suffix(['x', 'X', '×']))
                .flatten()
                .filter(|n| n.ends_with(char::is_whitespace))
        };
        if let (Some(name), Ok(n)) = (name, num.parse::<u32>()) {
            if n > 0 && !name.trim().is_empty() {
                return (name.trim().to_string(), n);
            }
        }
    }
    (t.to_string(), 1)
}

/// Applies the overrides found by `get` (the process environment, in real use).
pub fn apply(report: &mut HostReport, get: impl Fn(&str) -> Option<String>) -> Result<(), OverrideError> {
    let err = |var: &'static str, value: &str, reason: String| OverrideError {
        var,
        value: value.to_string(),
        reason,
    };
    for var in VARIABLES {
        let Some(value) = get(var).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        let v = value.trim();
        match var {
            "GPUENV_DRIVER" => {
                let d: DriverVersion = v
                    .parse()
                    .map_err(|e: crate::model::ParseError| err(var, v, e.reason))?;
                report.driver = Some(Sourced {
                    value: d,
                    source: var.into(),
                });
                // The driver's CUDA follows the driver; the resolver derives it.
                report.driver_cuda = None;
            }
            "GPUENV_GPUS" => {
                let mut gpus = Vec::new();
                for part in v.split(',') {
                    let (name, count) = split_count(part);
                    if name.is_empty() {
                        return Err(err(
                            var,
                            v,
                            "expected GPU names, comma-separated, each optionally `xN`".into(),
                        ));
                    }
                    for _ in 0..count {
                        gpus.push(GpuInfo {
                            index: gpus.len() as u32,
                            name: name.clone(),
                            ..GpuInfo::default()
                        });
                    }
                }
                report.gpus = gpus;
                report.gpus_source = Some(var.into());
                report.gpu_failure = None;
            }
            "GPUENV_NVCC" => {
                let c: CudaVersion = v
                    .parse()
                    .map_err(|e: crate::model::ParseError| err(var, v, e.reason))?;
                report.nvcc = Some(Sourced {
                    value: c,
                    source: var.into(),
                });
            }
            "GPUENV_GLIBC" => {
                let g: GlibcVersion = v
                    .parse()
                    .map_err(|e: crate::model::ParseError| err(var, v, e.reason))?;
                report.glibc = Some(Sourced {
                    value: g,
                    source: var.into(),
                });
            }
            "GPUENV_CPUS" => {
                let n: u32 = v
                    .parse()
                    .map_err(|_| err(var, v, "expected a number of logical CPUs".into()))?;
                let cpu = report.cpu.get_or_insert_with(CpuInfo::default);
                cpu.logical = n;
            }
            "GPUENV_MEMORY_GIB" => {
                let n: f64 = v
                    .parse()
                    .map_err(|_| err(var, v, "expected a number of GiB".into()))?;
                if !(n.is_finite() && n > 0.0) {
                    return Err(err(var, v, "expected a positive number of GiB".into()));
                }
                report.memory_kib = Some((n * 1024.0 * 1024.0) as u64);
            }
            "GPUENV_TORCH" => {
                let (version, cuda) = match v.split_once('@') {
                    Some((a, b)) => (a, Some(b)),
                    None => (v, None),
                };
                crate::model::parse_version(version).map_err(|e| err(var, v, e.reason))?;
                let cuda = match cuda {
                    Some(c) => Some(
                        c.parse::<CudaVersion>()
                            .map_err(|e| err(var, v, e.reason))?
                            .to_string(),
                    ),
                    None => crate::model::parse_version(version)
                        .ok()
                        .and_then(|pv| crate::model::local_variant(&pv))
                        .and_then(|var| var.cuda())
                        .map(|c| c.to_string()),
                };
                if report.pythons.is_empty() {
                    report.pythons.push(PythonEnv {
                        path: "python3".into(),
                        origin: var.into(),
                        ..PythonEnv::default()
                    });
                }
                let p = &mut report.pythons[0];
                let t = p.torch.get_or_insert_with(TorchProbe::default);
                t.version = version.to_string();
                t.cuda = cuda;
            }
            _ => unreachable!("every listed variable is handled"),
        }
        report.overrides.push(format!("{var}={v}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(a, _)| *a == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn overrides_replace_single_facts() {
        let mut r = HostReport::default();
        apply(
            &mut r,
            env(&[
                ("GPUENV_DRIVER", "535.104.05"),
                ("GPUENV_GPUS", "H100 SXMx8, RTX 4090"),
                ("GPUENV_TORCH", "2.4.1+cu121"),
            ]),
        )
        .unwrap();
        assert_eq!(r.driver.as_ref().unwrap().value.to_string(), "535.104.05");
        assert_eq!(r.driver.as_ref().unwrap().source, "GPUENV_DRIVER");
        assert_eq!(r.gpus.len(), 9);
        assert_eq!(r.gpus[8].name, "RTX 4090");
        assert_eq!(r.pythons[0].torch.as_ref().unwrap().cuda.as_deref(), Some("12.1"));
        assert_eq!(r.overrides.len(), 3);
    }

    #[test]
    fn bad_values_name_the_variable() {
        let mut r = HostReport::default();
        let e = apply(&mut r, env(&[("GPUENV_DRIVER", "535.x")])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("GPUENV_DRIVER=`535.x`: expected a digit"),
            "{e}"
        );
        let e = apply(&mut r, env(&[("GPUENV_CPUS", "many")])).unwrap_err();
        assert_eq!(e.var, "GPUENV_CPUS");
    }

    #[test]
    fn counts() {
        assert_eq!(split_count("H100x8"), ("H100".to_string(), 8));
        assert_eq!(split_count("H100 SXM x 8"), ("H100 SXM".to_string(), 8));
        assert_eq!(split_count("RTX 5090"), ("RTX 5090".to_string(), 1));
        assert_eq!(split_count("x8"), ("x8".to_string(), 1));
        assert_eq!(split_count("RTX5090"), ("RTX5090".to_string(), 1));
        assert_eq!(split_count("A10Gx4"), ("A10G".to_string(), 4));
        assert_eq!(split_count("RTX 4090 X 2"), ("RTX 4090".to_string(), 2));
    }
}
