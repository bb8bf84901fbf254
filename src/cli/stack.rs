//! The flags that describe a stack and a machine (shared by `query`, `graph`, `check`,
//! `dockerfile`, `build` and `pull`), and their conversion into a resolver [`Query`].

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::db::Db;
use crate::files;
use crate::model::{
    DriverVersion, GlibcVersion, HostArch, Reading, SeriesOf, Variant, VersionSpecifiers, glibc_of_os,
    known_os, local_variant, read_series,
};
use crate::project::ProjectNeeds;
use crate::resolve::{CudaAsk, GpuAsk, Pin, Query};

/// What the project needs and what the machine has.
#[derive(Debug, Args, Clone, Default)]
pub struct StackArgs {
    /// torch version or specifier: `2.4` (any 2.4.x), `2.7.0`, `>=2.4,<2.6`, `2.4.1+cu121`,
    /// `torch==2.3.1`, `latest` (the newest release compat-db has).
    #[arg(long, value_name = "SPEC")]
    pub torch: Option<String>,
    /// Python version or specifier: `3.11`, `3` (any 3.x), `>=3.10`, or a tag (`py310`,
    /// `cp310`, `python3.10`).
    #[arg(long, value_name = "SPEC")]
    pub python: Option<String>,
    /// CUDA of the torch build: `12.1`, `12` (any 12.x), `>=12.4`, `cu121`, `CUDA 12.1`, `cpu`.
    #[arg(long, value_name = "SPEC")]
    pub cuda: Option<String>,
    /// A GPU as listings and nvidia-smi write it (`H100`, `A100 80G SXM4`,
    /// `NVIDIA H100 80GB HBM3`), with a count (`8x H800`, `H800x8`, `8*A800`); repeat it or
    /// separate with commas for mixed machines.
    #[arg(long, value_name = "NAME")]
    pub gpu: Vec<String>,
    /// The NVIDIA driver: a version (`535.104.05`) or a branch (`535`, `R535`, `535.x`,
    /// `535.xx`, `535+`, `driver 535 series`, read as the branch's earliest release).
    #[arg(long, value_name = "VERSION")]
    pub driver: Option<String>,
    /// The driver as a listing gives it by its CUDA ("CUDA 12.4 driver"): the CUDA version
    /// `nvidia-smi` shows, read as the first driver that gives it.
    #[arg(long, value_name = "CUDA", conflicts_with = "driver")]
    pub driver_cuda: Option<String>,
    /// The host's OS as in image tags (`ubuntu22.04`, `rockylinux9`, `centos7`): sets glibc.
    #[arg(long, value_name = "OS")]
    pub os: Option<String>,
    /// The host's glibc version: `2.35`.
    #[arg(long, value_name = "VERSION", conflicts_with = "os")]
    pub glibc: Option<String>,
    /// The host's CPU architecture: `x86_64` or `aarch64` (`arm64`, `sbsa`). torch's CUDA
    /// wheels differ by architecture (PyPI's aarch64 wheels were CPU-only to 2.10). Implied
    /// by a GPU that brings its host (GH200, GB200: aarch64).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// The project compiles CUDA extensions: it needs an nvcc matching torch's CUDA.
    /// Implied by a requirement on a package that compiles at install (flash-attn, ...).
    #[arg(long)]
    pub extensions: bool,
}

fn series(flag: &str, of: SeriesOf, text: &str, q: &mut Query) -> Result<VersionSpecifiers, CliError> {
    let (specs, note) = read_series(of, text).map_err(|e| CliError::Usage(format!("{flag}: {e}")))?;
    if let Some(note) = note {
        q.readings.push(Reading {
            input: flag.to_string(),
            given: text.trim().to_string(),
            read_as: specs.to_string(),
            note,
        });
    }
    Ok(specs)
}

/// `--torch` words: `latest` is the newest torch release compat-db has (said in a `read:`
/// line); `nightly` is refused, naming that release. Anything else is returned as given.
fn torch_word(db: &Db, text: &str, q: &mut Query) -> Result<String, CliError> {
    let word = text.trim().to_ascii_lowercase();
    let newest = || {
        db.torch
            .iter()
            .filter(|t| !t.version.any_prerelease())
            .max_by(|a, b| a.version.cmp(&b.version))
    };
    match word.as_str() {
        "latest" | "newest" | "stable" => {
            let t =
                newest().ok_or_else(|| CliError::Usage("--torch: compat-db has no torch release".into()))?;
            q.readings.push(Reading {
                input: "--torch".into(),
                given: text.trim().to_string(),
                read_as: format!("=={}", t.version),
                note: format!(
                    "`{}` read as torch {}, the newest release in compat-db{}",
                    word,
                    t.version,
                    t.released.map(|d| format!(" (released {d})")).unwrap_or_default()
                ),
            });
            Ok(format!("=={}", t.version))
        }
        "nightly" | "preview" | "main" => Err(CliError::Usage(format!(
            "--torch: `{word}` is not judged: gpuenv judges torch releases, and a nightly build changes every day and has no record; the newest release compat-db has is {} (--torch {0}, or --torch latest)",
            newest().map_or("-".to_string(), |t| t.version.to_string())
        ))),
        _ => Ok(text.to_string()),
    }
}

/// GPUs as written (`8x H800`, `A100 80G SXM4`, a comma-separated list), each with the
/// record used and, when the name covers several records, why that one.
pub(crate) fn gpu_asks(db: &Db, flag: &str, text: &str) -> Result<(Vec<GpuAsk>, Vec<Reading>), CliError> {
    let found = db.gpus_written(text).map_err(|e| match e {
        crate::db::GpuTextError::Lookup(l) => CliError::Lookup(l),
        crate::db::GpuTextError::Count(c) => CliError::Usage(format!("{flag}: {c}")),
    })?;
    let mut asks = Vec::new();
    let mut readings = Vec::new();
    for (m, count) in found {
        if let Some(why) = &m.why {
            readings.push(Reading {
                input: flag.to_string(),
                given: text.trim().to_string(),
                read_as: m.chosen.name.clone(),
                note: why.clone(),
            });
        }
        // A board modified after sale: said wherever it is used, since no NVIDIA fact
        // vouches for it.
        if let Some(risk) = &m.chosen.modified {
            readings.push(Reading {
                input: flag.to_string(),
                given: text.trim().to_string(),
                read_as: m.chosen.name.clone(),
                note: format!("the {}, a modified board: {risk}", m.chosen.name),
            });
        }
        asks.push(GpuAsk {
            gpu: m.chosen.clone(),
            count,
        });
    }
    Ok((asks, readings))
}

/// A driver as written where one driver is meant: a release, or a branch read as its
/// earliest release (noted).
pub(crate) fn driver_ask(
    db: &Db,
    flag: &str,
    text: &str,
) -> Result<(DriverVersion, Option<Reading>), CliError> {
    // "CUDA 12.4 driver": a driver named by the CUDA it gives.
    let by_cuda = flag == "--driver-cuda" || text.to_ascii_lowercase().contains("cuda");
    let (v, note) = if by_cuda {
        db.driver_for_cuda(text).map(|(v, n)| (v, Some(n)))
    } else {
        db.driver_written(text)
    }
    .map_err(|e| CliError::Usage(format!("{flag}: {e}")))?;
    let reading = note.map(|note| Reading {
        input: flag.to_string(),
        given: text.trim().to_string(),
        read_as: v.to_string(),
        note,
    });
    Ok((v, reading))
}

impl StackArgs {
    /// Whether no flag was given: nothing asked of the stack or the machine.
    pub fn is_empty(&self) -> bool {
        // Destructured, so that a flag added later cannot be forgotten here.
        let StackArgs {
            torch,
            python,
            cuda,
            gpu,
            driver,
            driver_cuda,
            os,
            glibc,
            arch,
            extensions,
        } = self;
        torch.is_none()
            && python.is_none()
            && cuda.is_none()
            && gpu.is_empty()
            && driver.is_none()
            && driver_cuda.is_none()
            && os.is_none()
            && glibc.is_none()
            && arch.is_none()
            && !extensions
    }

    /// The resolver query these flags describe.
    pub fn to_query(&self, db: &Db) -> Result<Query, CliError> {
        let mut q = Query::default();
        if let Some(t) = &self.torch {
            let t = torch_word(db, t, &mut q)?;
            let specifiers = series("--torch", SeriesOf::Torch, &t, &mut q)?;
            let variant = specifiers.iter().find_map(|s| local_variant(s.version()));
            q.torch.push(Pin {
                specifiers,
                variant,
                marker: None,
                origin: "--torch".into(),
            });
        }
        if let Some(p) = &self.python {
            let specs = series("--python", SeriesOf::Python, p, &mut q)?;
            q.python.push((specs, "--python".into()));
        }
        if let Some(c) = &self.cuda {
            let ask = match c.trim() {
                "cpu" => CudaAsk::Cpu,
                t if t.starts_with("cu") => {
                    let v: Variant = t.parse().map_err(|e| CliError::Usage(format!("--cuda: {e}")))?;
                    let cuda = v
                        .cuda()
                        .ok_or_else(|| CliError::Usage(format!("--cuda: `{t}` names no CUDA version")))?;
                    CudaAsk::Spec(series("--cuda", SeriesOf::Cuda, &cuda.to_string(), &mut q)?)
                }
                t => CudaAsk::Spec(series("--cuda", SeriesOf::Cuda, t, &mut q)?),
            };
            q.cuda = Some((ask, "--cuda".into()));
        }
        for g in &self.gpu {
            let (asks, readings) = gpu_asks(db, "--gpu", g)?;
            q.gpus.extend(asks);
            q.readings.extend(readings);
        }
        for (flag, d) in [("--driver", &self.driver), ("--driver-cuda", &self.driver_cuda)] {
            if let Some(d) = d {
                let (v, reading) = driver_ask(db, flag, d)?;
                q.driver = Some(v);
                q.readings.extend(reading);
            }
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
        if let Some(a) = &self.arch {
            let (arch, note) = HostArch::read(a).map_err(|e| CliError::Usage(format!("--arch: {e}")))?;
            if let Some(note) = note {
                q.readings.push(Reading {
                    input: "--arch".into(),
                    given: a.trim().to_string(),
                    read_as: arch.to_string(),
                    note,
                });
            }
            q.arch = Some((arch, "--arch".into()));
        }
        check_arch(&q)?;
        q.extensions = self.extensions;
        q.today = crate::db::today();
        Ok(q)
    }
}

/// A GPU that brings its own host fixes the architecture: a `--arch` (or a probed host)
/// that says otherwise describes no machine that exists.
pub(crate) fn check_arch(q: &Query) -> Result<(), CliError> {
    let Some((arch, origin)) = &q.arch else {
        return Ok(());
    };
    for g in &q.gpus {
        if let Some(host) = g.gpu.host_arch.as_deref().filter(|h| *h != arch.as_str()) {
            return Err(CliError::Usage(format!(
                "{origin} {arch} contradicts the GPU: the {} comes with its own {host} host (its record's host_arch); drop {origin} or name another GPU",
                g.gpu.name
            )));
        }
    }
    Ok(())
}

/// Where project files are read from.
#[derive(Debug, Args, Clone, Default)]
pub struct ProjectArgs {
    /// A pip requirements file (torch, torchvision, torchaudio pins; PyTorch index URLs;
    /// `-r` includes are followed).
    #[arg(long, value_name = "FILE")]
    pub requirements: Option<PathBuf>,
    /// A pyproject.toml (requires-python, dependencies, optional dependencies, dependency
    /// groups, uv's PyTorch indexes).
    #[arg(long, value_name = "FILE")]
    pub pyproject: Option<PathBuf>,
    /// A requirement as a requirements file writes it (`vllm==0.6.3.post1`,
    /// `sglang[srt]==0.5.2`, `flash-attn`); repeat it for several. Read with the files, as
    /// one more line of them.
    #[arg(long, value_name = "REQ")]
    pub require: Vec<String>,
    /// An optional dependency group of the pyproject.toml to install
    /// (`[project.optional-dependencies]`); repeat it for several. `dockerfile` and `build`
    /// install none unless named; `query` and `check` judge every group unless some are.
    #[arg(long, value_name = "NAME", requires = "pyproject")]
    pub extra: Vec<String>,
    /// Every optional dependency group of the pyproject.toml.
    #[arg(long, requires = "pyproject", conflicts_with = "extra")]
    pub all_extras: bool,
}

/// A project file's error as the command's: a refused file is bad input, an I/O failure
/// the environment's.
pub(super) fn read_error(e: files::ReadError) -> CliError {
    if e.is_bad_input() {
        CliError::Usage(e.to_string())
    } else {
        CliError::Environment(e.to_string())
    }
}

impl ProjectArgs {
    /// Whether no project file was named.
    pub fn is_empty(&self) -> bool {
        let ProjectArgs {
            requirements,
            pyproject,
            require,
            extra: _,
            all_extras: _,
        } = self;
        requirements.is_none() && pyproject.is_none() && require.is_empty()
    }

    /// Reads the project files named, merged, with every optional dependency group unless
    /// `--extra` names some: what a question about the project must hold for.
    pub fn read(&self) -> Result<ProjectNeeds, CliError> {
        let (mut needs, _) = self.read_with_files()?;
        self.choose_extras(&mut needs, true)?;
        Ok(needs)
    }

    /// The optional dependency groups `--extra`/`--all-extras` choose merged into `needs`
    /// (all of them when neither is given and `default_all`); returns their names.
    pub fn choose_extras(
        &self,
        needs: &mut ProjectNeeds,
        default_all: bool,
    ) -> Result<Vec<String>, CliError> {
        let choice = crate::project::ExtrasChoice {
            names: self.extra.clone(),
            all: self.all_extras,
        };
        needs
            .choose_extras(&choice, default_all)
            .map_err(|e| CliError::Usage(format!("--extra: {e}")))
    }

    /// The project files read, merged, with the pyproject.toml's optional dependency groups
    /// still apart (see [`ProjectArgs::choose_extras`]), and the requirements file with
    /// every file it includes (`-r`, `-c`) in the order pip reads them, as canonical paths
    /// (empty without `--requirements`): one reading serves both.
    pub fn read_with_files(&self) -> Result<(ProjectNeeds, Vec<PathBuf>), CliError> {
        let (mut needs, files) =
            crate::project::read_files(self.pyproject.as_deref(), self.requirements.as_deref()).map_err(
                |e| match e {
                    crate::project::ReadError::Input(e) => CliError::Input(e),
                    crate::project::ReadError::Refused(m) => CliError::Usage(m),
                    crate::project::ReadError::Io(m) => CliError::Environment(m),
                },
            )?;
        needs.merge(self.required()?);
        Ok((needs, files))
    }

    /// The `--require` requirements, each read as a line of a requirements file; an
    /// option (`-r`, `--index-url`) is refused, since a flag names no file to include from.
    fn required(&self) -> Result<ProjectNeeds, CliError> {
        let mut needs = ProjectNeeds::default();
        for text in &self.require {
            let trimmed = text.trim();
            if trimmed.is_empty() || trimmed.starts_with('-') || trimmed.contains('\n') {
                return Err(CliError::Usage(format!(
                    "--require: `{}` is not a requirement; expected one as a requirements file writes it, such as `vllm==0.6.3.post1`",
                    crate::text::excerpt(trimmed)
                )));
            }
            let mut one = crate::project::parse_requirements("--require", trimmed)
                .map_err(|e| CliError::Usage(format!("--require: {}", e.message)))?;
            // The flag is the origin: `--require`, not a line of a file.
            for r in &mut one.requirements {
                r.origin = "--require".into();
            }
            for p in one
                .torch
                .iter_mut()
                .chain(&mut one.torchvision)
                .chain(&mut one.torchaudio)
            {
                p.origin = "--require".into();
            }
            needs.merge(one);
        }
        Ok(needs)
    }

    /// The pyproject.toml named, as a canonical path.
    pub fn pyproject_file(&self) -> Result<Option<PathBuf>, CliError> {
        self.pyproject
            .as_ref()
            .map(|p| {
                fs_err::canonicalize(p)
                    .map_err(|_| CliError::Usage(format!("cannot read `{}`: no such file", p.display())))
            })
            .transpose()
    }

    /// Adds what the project files say to a query.
    pub fn apply(&self, db: &Db, q: &mut Query) -> Result<(), CliError> {
        add_to_query(db, self.read()?, q);
        Ok(())
    }
}

/// Adds what project files say (pins, `requires-python`, index variants, requirements on
/// packages that compile CUDA code) to a query. A requirement assumed to compile sets
/// `extensions`, as `--extensions` does.
pub fn add_to_query(db: &Db, needs: ProjectNeeds, q: &mut Query) {
    let implied = crate::resolve::extensions::implied(&db.packages, &db.python, &needs.requirements);
    q.extensions |= implied.iter().any(|e| e.assumed);
    q.extensions_from.extend(implied);
    let frameworks = crate::resolve::frameworks::implied(&db.frameworks, &needs.requirements);
    q.torch.extend(crate::resolve::frameworks::pins(&frameworks));
    q.frameworks.extend(frameworks);
    q.torch.extend(needs.torch);
    q.torchvision.extend(needs.torchvision);
    q.torchaudio.extend(needs.torchaudio);
    if let Some(rp) = needs.requires_python {
        q.python.push(rp);
    }
    q.variants.extend(needs.index_variants);
}
