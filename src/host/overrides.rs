//! `GPUENV_*` environment variables: single facts that replace what the probes found.
//!
//! They are the test seam for one fact ("pretend this host has driver 535") and a user
//! feature (checking a host before its driver upgrade). Every override is listed in the
//! report, so an answer never silently rests on one.
//!
//! | variable | replaces | example |
//! |---|---|---|
//! | `GPUENV_DRIVER` | the driver version | `535.104.05` |
//! | `GPUENV_GPUS` | the GPUs, written as for `--gpu` (`8x H800`, `H100 SXMx8, RTX 4090`) | `8x H100` |
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

/// Reads `GPUENV_GPUS` as every command reads GPUs (`8x H800`, `H100 SXMx8, RTX 4090`):
/// each GPU's record name and count, or why the text names none. The caller owns the
/// database.
pub type GpuReader<'a> = &'a dyn Fn(&str) -> Result<Vec<(String, u32)>, String>;

/// Applies the overrides found by `get` (the process environment, in real use); GPU names
/// are read by `gpus`, so that a name no record answers to is an error, never an unknown
/// GPU.
pub fn apply(
    report: &mut HostReport,
    get: impl Fn(&str) -> Option<String>,
    gpus: GpuReader<'_>,
) -> Result<(), OverrideError> {
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
            "GPUENV_GPUS" => override_gpus(report, var, v, gpus).map_err(|reason| err(var, v, reason))?,
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
            "GPUENV_TORCH" => override_torch(report, var, v).map_err(|reason| err(var, v, reason))?,
            _ => unreachable!("every listed variable is handled"),
        }
        report.overrides.push(format!("{var}={v}"));
    }
    Ok(())
}

/// `GPUENV_GPUS`: as many GPUs of each record as counted, and no failure to find them.
fn override_gpus(report: &mut HostReport, var: &str, v: &str, gpus: GpuReader<'_>) -> Result<(), String> {
    let mut list = Vec::new();
    for (name, count) in gpus(v)? {
        for _ in 0..count {
            list.push(GpuInfo {
                index: list.len() as u32,
                name: name.clone(),
                ..GpuInfo::default()
            });
        }
    }
    report.gpus = list;
    report.gpus_source = Some(var.into());
    report.gpu_failure = None;
    Ok(())
}

/// `GPUENV_TORCH` (`version` or `version@cuda`): torch in the first Python (one named
/// `python3` when none was found), its CUDA from `@` or else the local label.
fn override_torch(report: &mut HostReport, var: &str, v: &str) -> Result<(), String> {
    let (version, cuda) = match v.split_once('@') {
        Some((a, b)) => (a, Some(b)),
        None => (v, None),
    };
    crate::model::parse_version(version).map_err(|e| e.reason)?;
    let cuda = match cuda {
        Some(c) => Some(c.parse::<CudaVersion>().map_err(|e| e.reason)?.to_string()),
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(a, _)| *a == k).map(|(_, v)| v.to_string())
    }

    /// A stand-in for the database's reading: `NAMExN`, names taken as they are.
    fn gpus(text: &str) -> Result<Vec<(String, u32)>, String> {
        text.split(',')
            .map(|p| match p.trim().rsplit_once('x') {
                Some((n, c)) if c.parse::<u32>().is_ok() => {
                    Ok((n.trim().to_string(), c.parse().unwrap_or(1)))
                }
                _ if p.trim() == "H1000" => Err("no gpu record named `H1000`".to_string()),
                _ => Ok((p.trim().to_string(), 1)),
            })
            .collect()
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
            &gpus,
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
        let e = apply(&mut r, env(&[("GPUENV_DRIVER", "535.x")]), &gpus).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("GPUENV_DRIVER=`535.x`: expected a digit"),
            "{e}"
        );
        let e = apply(&mut r, env(&[("GPUENV_CPUS", "many")]), &gpus).unwrap_err();
        assert_eq!(e.var, "GPUENV_CPUS");
        let e = apply(&mut r, env(&[("GPUENV_GPUS", "H1000")]), &gpus).unwrap_err();
        assert_eq!(e.to_string(), "GPUENV_GPUS=`H1000`: no gpu record named `H1000`");
        assert!(r.gpus.is_empty(), "an unreadable value changes nothing");
    }
}
