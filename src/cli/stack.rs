//! The flags that describe a stack and a machine (shared by `query`, `graph` and, later,
//! `check`), and their conversion into a resolver [`Query`].

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::db::Db;
use crate::model::{
    DriverVersion, GlibcVersion, PartialDate, Variant, glibc_of_os, known_os, local_variant, parse_specifiers,
};
use crate::resolve::{CudaAsk, GpuAsk, Pin, Query};

/// What the project needs and what the machine has.
#[derive(Debug, Args, Clone, Default)]
pub struct StackArgs {
    /// torch version or specifier: `2.7.0`, `>=2.4,<2.6`, `2.4.1+cu121`.
    #[arg(long, value_name = "SPEC")]
    pub torch: Option<String>,
    /// Python version or specifier: `3.11`, `>=3.10`.
    #[arg(long, value_name = "SPEC")]
    pub python: Option<String>,
    /// CUDA of the torch build: `12.1`, `>=12.4`, `cu121`, `cpu`.
    #[arg(long, value_name = "SPEC")]
    pub cuda: Option<String>,
    /// A GPU, by name or alias; repeat for mixed machines, or `NAMExN` for N of them.
    #[arg(long, value_name = "NAME")]
    pub gpu: Vec<String>,
    /// The NVIDIA driver version: `535.104.05`.
    #[arg(long, value_name = "VERSION")]
    pub driver: Option<String>,
    /// The host's OS as in image tags (`ubuntu22.04`, `rockylinux9`, `centos7`): sets glibc.
    #[arg(long, value_name = "OS")]
    pub os: Option<String>,
    /// The host's glibc version: `2.35`.
    #[arg(long, value_name = "VERSION", conflicts_with = "os")]
    pub glibc: Option<String>,
    /// The project compiles CUDA extensions: it needs an nvcc matching torch's CUDA.
    #[arg(long)]
    pub extensions: bool,
}

fn spec(flag: &str, text: &str) -> Result<crate::model::VersionSpecifiers, CliError> {
    parse_specifiers(text).map_err(|e| CliError::Usage(format!("{flag}: {e}")))
}

/// Splits `H100x8` / `H100 x 8` into name and count, when the name alone is not a GPU.
fn gpu_ask(db: &Db, text: &str) -> Result<GpuAsk, CliError> {
    if let Ok(g) = db.gpu(text) {
        return Ok(GpuAsk {
            gpu: g.clone(),
            count: 1,
        });
    }
    let trimmed = text.trim_end();
    let digits = trimmed.len() - trimmed.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 {
        let head = trimmed[..trimmed.len() - digits].trim_end();
        if let Some(name) = head.strip_suffix(['x', 'X', '×']) {
            let count: u32 = trimmed[trimmed.len() - digits..]
                .parse()
                .map_err(|_| CliError::Usage(format!("--gpu `{text}`: the count is too large")))?;
            if count == 0 {
                return Err(CliError::Usage(format!(
                    "--gpu `{text}`: the count must be at least 1"
                )));
            }
            if let Ok(g) = db.gpu(name.trim_end()) {
                return Ok(GpuAsk {
                    gpu: g.clone(),
                    count,
                });
            }
        }
    }
    Err(db.gpu(text).expect_err("not found above").into())
}

impl StackArgs {
    /// The resolver query these flags describe.
    pub fn to_query(&self, db: &Db) -> Result<Query, CliError> {
        let mut q = Query::default();
        if let Some(t) = &self.torch {
            let specifiers = spec("--torch", t)?;
            let variant = specifiers.iter().find_map(|s| local_variant(s.version()));
            q.torch.push(Pin {
                specifiers,
                variant,
                marker: None,
                origin: "--torch".into(),
            });
        }
        if let Some(p) = &self.python {
            q.python.push((spec("--python", p)?, "--python".into()));
        }
        if let Some(c) = &self.cuda {
            let ask = match c.trim() {
                "cpu" => CudaAsk::Cpu,
                t if t.starts_with("cu") => {
                    let v: Variant = t.parse().map_err(|e| CliError::Usage(format!("--cuda: {e}")))?;
                    let cuda = v.cuda().expect("a cu tag has a CUDA version");
                    CudaAsk::Spec(spec("--cuda", &cuda.to_string())?)
                }
                t => CudaAsk::Spec(spec("--cuda", t)?),
            };
            q.cuda = Some((ask, "--cuda".into()));
        }
        for g in &self.gpu {
            q.gpus.push(gpu_ask(db, g)?);
        }
        if let Some(d) = &self.driver {
            q.driver = Some(
                d.trim()
                    .parse::<DriverVersion>()
                    .map_err(|e| CliError::Usage(format!("--driver: {e}")))?,
            );
        }
        if let Some(os) = &self.os {
            let glibc = glibc_of_os(os).ok_or_else(|| {
                CliError::Usage(format!(
                    "--os: unknown OS `{os}`; expected one of {} (or give --glibc)",
                    known_os().join(", ")
                ))
            })?;
            q.glibc = Some((glibc, format!("--os {os}")));
        }
        if let Some(g) = &self.glibc {
            let v: GlibcVersion = g
                .trim()
                .parse()
                .map_err(|e| CliError::Usage(format!("--glibc: {e}")))?;
            q.glibc = Some((v, "--glibc".into()));
        }
        q.extensions = self.extensions;
        q.today = today();
        Ok(q)
    }
}

/// Today's date from the system clock (UTC), for end-of-life warnings.
fn today() -> Option<PartialDate> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    let days = (secs / 86_400) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}").parse().ok()
}

/// Where project files are read from.
#[derive(Debug, Args, Clone, Default)]
pub struct ProjectArgs {
    /// A pip requirements file (torch, torchvision, torchaudio pins; PyTorch index URLs).
    #[arg(long, value_name = "FILE")]
    pub requirements: Option<PathBuf>,
    /// A pyproject.toml (requires-python, dependencies, PyTorch indexes).
    #[arg(long, value_name = "FILE")]
    pub pyproject: Option<PathBuf>,
}
