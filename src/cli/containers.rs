//! `gpuenv dockerfile`, `build` and `pull`: from the flags of `query` to a stack, then to a
//! Dockerfile, a build context and an Engine operation, and to a report.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::{CliError, Exit, ProjectArgs, StackArgs, open_db};
use crate::credentials as auth;
use crate::deadline::Deadline;
use crate::docker::{self, Bollard, Reference, context::Context};
use crate::dockerfile::{self, Dockerfile, Request};
use crate::files::{self, limits};
use crate::report;
use crate::resolve::{self, Stack, Status};

/// How long connecting to the daemon and agreeing on an API version may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Flags of `gpuenv dockerfile`.
#[derive(Debug, Args)]
pub(super) struct DockerfileArgs {
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    project: ProjectArgs,
    /// Write the Dockerfile to FILE (atomically) instead of stdout. Requirements files are
    /// copied from paths relative to FILE's folder, the build context; without --out, to
    /// the current folder.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace FILE when it exists and is a regular file (never a link, a directory, a
    /// FIFO or a device).
    #[arg(long, requires = "out")]
    force: bool,
}

/// Flags of `gpuenv build`.
#[derive(Debug, Args)]
pub(super) struct BuildArgs {
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    project: ProjectArgs,
    /// The project folder sent as the build context (without `.git` and `target`); the
    /// requirements files must lie inside it. Without it, the context holds the Dockerfile
    /// and the requirements files only.
    #[arg(long, value_name = "DIR")]
    context: Option<PathBuf>,
    /// The name to give the image: `repository[:tag]`. Given only once the build succeeded.
    #[arg(long, value_name = "NAME")]
    tag: String,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
}

/// Flags of `gpuenv pull`.
#[derive(Debug, Args)]
pub(super) struct PullArgs {
    /// The image to pull; without it, the best catalog image for the stack the flags
    /// describe (pytorch/pytorch, then NGC, then the nvidia/cuda base).
    #[arg(
        value_name = "IMAGE",
        conflicts_with_all = ["torch", "python", "cuda", "gpu", "driver", "os", "glibc", "extensions", "requirements", "pyproject", "mirror", "dry_run"]
    )]
    image: Option<String>,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    project: ProjectArgs,
    /// Pull catalog images through this registry (`HOST[:PORT]`) instead of their own: a
    /// mirror holding the same repositories and tags.
    #[arg(long, value_name = "HOST")]
    mirror: Option<String>,
    /// Print the image that would be pulled, and why; contact nothing.
    #[arg(long)]
    dry_run: bool,
    /// Seconds the whole pull may take (default 1800): the credential helper, reading the
    /// manifest, and the daemon's pull, which is stopped (and cancelled) when it runs out.
    /// Any single wait (an answer, the daemon's next progress event) is given up after
    /// 30 s, or this when less.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// A registry gpuenv's own client may speak plain HTTP to when it reads the manifest
    /// (`HOST` or `HOST:PORT`; repeatable; also GPUENV_INSECURE_REGISTRIES). The daemon
    /// follows its own `insecure-registries`, which gpuenv reads too.
    #[arg(long, value_name = "HOST")]
    insecure_registry: Vec<String>,
    /// Print a JSON document.
    #[arg(long)]
    json: bool,
}

/// A Dockerfile for the best runnable stack, and the project files it copies.
struct Plan {
    dockerfile: Dockerfile,
    stack: Stack,
    /// `(path in the context, path on disk)` of each project file the Dockerfile copies:
    /// the requirements files, and pyproject.toml.
    files: Vec<(String, PathBuf)>,
    /// What the requirements install from the project tree (`-e .`), with the line.
    from_project: Vec<(String, String)>,
}

/// The best stack that runs, or why none does.
fn best_stack(answer: resolve::Answer) -> Result<Stack, CliError> {
    let verdict = answer.verdict;
    answer
        .stacks
        .into_iter()
        .find(|s| s.status != Status::Incompatible)
        .ok_or_else(|| {
            CliError::NoStack(format!(
                "no stack runs on the machine described (the answer is {verdict}); \
                 `gpuenv query` with the same flags says why and what to change"
            ))
        })
}

/// `path` relative to `base` as a `/`-separated context path, or why it is not inside.
fn context_path(path: &Path, base: &Path, what: &str) -> Result<String, CliError> {
    let base = fs_err::canonicalize(base)
        .map_err(|_| CliError::Usage(format!("cannot use {what} `{}`: no such folder", base.display())))?;
    let rel = path.strip_prefix(&base).map_err(|_| {
        CliError::Usage(format!(
            "`{}` lies outside {what} `{}`, so the build cannot copy it; move it there or choose another folder",
            path.display(),
            base.display()
        ))
    })?;
    let text = rel
        .to_str()
        .ok_or_else(|| CliError::Usage(format!("`{}`: the name is not UTF-8", path.display())))?;
    Ok(text.replace(std::path::MAIN_SEPARATOR, "/"))
}

fn plan(
    db_dir: &Option<PathBuf>,
    stack: &StackArgs,
    project: &ProjectArgs,
    base: &Path,
    what: &str,
) -> Result<Plan, CliError> {
    let db = open_db(db_dir)?;
    let mut q = stack.to_query(&db)?;
    let (mut needs, requirement_files) = project.read_with_files()?;
    // What the image installs: the groups named, none by default (as `uv pip install -r
    // pyproject.toml` does), so that the base follows what is really installed.
    let extras = project.choose_extras(&mut needs, false)?;
    let from_project = needs.local_paths.clone();
    super::stack::add_to_query(&db, needs, &mut q);
    let answer = resolve::resolve(&*db, &q);
    let chosen = best_stack(answer)?;
    let release = db
        .torch
        .iter()
        .find(|r| r.version == chosen.torch)
        .ok_or_else(|| CliError::Usage(format!("torch {} is not in the database", chosen.torch)))?;
    let mut requirements = Vec::new();
    for f in requirement_files {
        requirements.push((context_path(&f, base, what)?, f));
    }
    let pyproject = match project.pyproject_file()? {
        Some(f) => Some((context_path(&f, base, what)?, f)),
        None => None,
    };
    let dockerfile = dockerfile::generate(&Request {
        stack: &chosen,
        release,
        images: &db.images,
        cuda: &db.cuda,
        extensions: q.extensions,
        extensions_from: &q.extensions_from,
        gpus: q.gpus.iter().map(|g| g.gpu.compute_capability).collect(),
        requirements: requirements.iter().map(|(r, _)| r.clone()).collect(),
        pyproject: pyproject.as_ref().map(|(r, _)| r.clone()),
        pyproject_extras: extras,
        requirements_from_project: from_project.iter().map(|(p, _)| p.clone()).collect(),
        generator: format!("gpuenv {}", env!("CARGO_PKG_VERSION")),
    })?;
    Ok(Plan {
        dockerfile,
        stack: chosen,
        files: requirements.into_iter().chain(pyproject).collect(),
        from_project,
    })
}

/// `gpuenv dockerfile`.
pub(super) fn dockerfile(
    db: &Option<PathBuf>,
    args: &DockerfileArgs,
    out: &mut dyn Write,
) -> Result<Exit, CliError> {
    let (base, what) = match &args.out {
        Some(path) => {
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            (parent.to_path_buf(), "the folder of --out (the build context)")
        }
        None => (PathBuf::from("."), "the current folder (the build context)"),
    };
    let plan = plan(db, &args.stack, &args.project, &base, what)?;
    match &args.out {
        None => report::dockerfile_text(out, &plan.dockerfile)?,
        Some(path) => {
            write_atomically(path, plan.dockerfile.text.as_bytes(), args.force)?;
            report::dockerfile_written(out, &path.display().to_string(), &plan.dockerfile, &plan.stack)?;
        }
    }
    Ok(Exit::Ok)
}

/// Writes the Dockerfile atomically (see [`crate::files::write_file`]), so that an
/// interrupted write never leaves half a Dockerfile; an existing file is replaced only
/// with `--force`, and only when it is a regular file.
fn write_atomically(path: &Path, data: &[u8], force: bool) -> Result<(), CliError> {
    let replace = if force {
        files::Replace::RegularFile
    } else {
        files::Replace::Nothing
    };
    files::write_file(path, data, replace).map_err(|e| match e {
        files::WriteError::Exists { .. } => CliError::Usage(format!("{e}; give --force to replace it")),
        other => super::write_error(other),
    })
}

/// The engine's progress on stderr: bars on a terminal (none under --json), else the
/// plain lines. A broken stderr must not fail the work: its errors are dropped.
fn progress_on_stderr(json: bool) -> report::progress::EngineProgress {
    use report::progress::{EngineProgress, Mode};
    EngineProgress::new(Mode::of_stderr(json), Box::new(io::stderr()))
}

/// `gpuenv build`.
pub(super) fn build(db: &Option<PathBuf>, args: &BuildArgs, out: &mut dyn Write) -> Result<Exit, CliError> {
    let tag = Reference::parse(&args.tag)?;
    if tag.digest.is_some() {
        return Err(CliError::Usage(format!(
            "--tag `{}`: an image is named by repository and tag; a digest is what the build gives it",
            args.tag
        )));
    }
    let folder_of = |file: &Path| {
        file.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    };
    let (base, what) = match (&args.context, &args.project.requirements, &args.project.pyproject) {
        (Some(dir), _, _) => (dir.clone(), "--context"),
        (None, Some(req), _) => (folder_of(req), "the folder of --requirements"),
        (None, None, Some(pyproject)) => (folder_of(pyproject), "the folder of --pyproject"),
        (None, None, None) => (PathBuf::from("."), "the current folder"),
    };
    let plan = plan(db, &args.stack, &args.project, &base, what)?;
    if let (None, Some((path, origin))) = (&args.context, plan.from_project.first()) {
        return Err(CliError::Usage(format!(
            "{origin} installs `{path}` from the project, and without --context the build \
             context holds only the requirements files: give --context with the project folder"
        )));
    }
    let mut ctx = Context::new();
    match &args.context {
        Some(dir) => ctx.add_dir(dir)?,
        None => {
            for (rel, path) in &plan.files {
                let data = files::read_bytes(
                    path,
                    limits::REQUIREMENTS_FILE.max(limits::PYPROJECT),
                    "project file",
                )
                .map_err(super::stack::read_error)?;
                ctx.add_file(rel, data, 0o644)?;
            }
        }
    }
    for (rel, _) in &plan.files {
        if !ctx.contains(rel) {
            return Err(CliError::Usage(format!(
                "`{rel}` is not in the build context (folders named `.git` or `target` are left out)"
            )));
        }
    }
    ctx.add_file("Dockerfile", plan.dockerfile.text.clone().into_bytes(), 0o644)?;
    let tar = ctx.to_tar()?;
    let engine = Bollard::connect(CONNECT_TIMEOUT)?;
    let mut shown = progress_on_stderr(args.json);
    let built = docker::build(&engine, tar, &tag, &mut |p| shown.event(&p));
    shown.finish();
    let built = built?;
    report::built(out, &built, &plan.dockerfile, &plan.stack, args.json)?;
    Ok(Exit::Ok)
}

/// A catalog reference moved to the `--mirror` registry.
fn mirrored(image: &Reference, mirror: &str) -> Result<Reference, CliError> {
    image.mirrored(mirror).ok_or_else(|| {
        CliError::Usage(format!(
            "--mirror `{mirror}`: expected a registry host, `HOST[:PORT]` (with a `.` or a port, or `localhost`)"
        ))
    })
}

/// `gpuenv pull`.
pub(super) fn pull(db_dir: &Option<PathBuf>, args: &PullArgs, out: &mut dyn Write) -> Result<Exit, CliError> {
    let total = super::total_deadline(args.timeout, crate::deadline::IMAGE_DEADLINE)?;
    let env = |k: &str| std::env::var(k).ok();
    let mut insecure = super::insecure_registries(&args.insecure_registry, &env)?;
    let (reference, chosen) = match &args.image {
        Some(name) => (Reference::parse(name)?, None),
        None => {
            let db = open_db(db_dir)?;
            let mut q = args.stack.to_query(&db)?;
            args.project.apply(&db, &mut q)?;
            let answer = resolve::resolve(&*db, &q);
            let verdict = answer.verdict;
            let stacks = answer.stacks;
            if !stacks.iter().any(|s| s.status != Status::Incompatible) {
                return Err(CliError::NoStack(format!(
                    "no stack runs on the machine described (the answer is {verdict}); \
                     `gpuenv query` with the same flags says why and what to change"
                )));
            }
            let Some(pick) = dockerfile::prebuilt(&stacks, &db.images, q.extensions)? else {
                return Err(CliError::Usage(
                    "the catalog has no prebuilt image for a CPU-only torch build; `gpuenv build` makes one"
                        .into(),
                ));
            };
            let mut reference = Reference::parse(&pick.image)?;
            if let Some(m) = &args.mirror {
                reference = mirrored(&reference, m)?;
            }
            let stack = stacks
                .get(pick.stack)
                .cloned()
                .ok_or_else(|| CliError::Usage("the stack chosen is not among the answer's".into()))?;
            let best = stacks
                .get(pick.query_best)
                .cloned()
                .ok_or_else(|| CliError::Usage("query's best stack is not among the answer's".into()))?;
            (reference, Some((pick, stack, best)))
        }
    };
    let choice = chosen.as_ref().map(|(pick, stack, best)| report::PullChoice {
        chosen: pick,
        stack,
        query_best: best,
    });
    if args.dry_run {
        if let Some(c) = choice {
            report::pull_plan(out, &reference.to_string(), c, args.json)?;
        }
        return Ok(Exit::Ok);
    }
    let deadline = Deadline::new(total, args.timeout.is_some());
    let host = reference.registry_host();
    let creds = auth::lookup_within(host, &env, auth::HELPER_TIMEOUT.min(deadline.remaining()))?;
    let engine = Bollard::connect(CONNECT_TIMEOUT.min(deadline.wait()))?;
    // The manifest is read from where the daemon pulls: its platform, and plain HTTP
    // where the daemon's own configuration has it.
    let daemon = engine.pull_setup(CONNECT_TIMEOUT.min(deadline.wait()))?;
    if daemon.insecure(host) {
        insecure.push(host.to_string());
    }
    let declared = crate::registry::declared_sizes(
        &reference,
        creds.clone(),
        &deadline,
        &insecure,
        (&daemon.os, &daemon.arch),
    )
    .map_err(|e| {
        let text = format!("cannot pull `{reference}`: {e}");
        CliError::Environment(match &creds {
            Some(c) => c.redact(&text),
            None => text,
        })
    })?;
    let mut shown = progress_on_stderr(args.json);
    let pulled = docker::pull(
        &engine,
        &reference,
        creds.as_ref(),
        &deadline,
        &declared,
        &mut |p| shown.event(&p),
    );
    shown.finish();
    let pulled = pulled?;
    report::pulled(out, &pulled, choice, args.json)?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_keeps_paths_and_gives_official_images_their_library_prefix() {
        let m = |i: &str| {
            mirrored(&Reference::parse(i).unwrap(), "127.0.0.1:5555")
                .unwrap()
                .to_string()
        };
        assert_eq!(
            m("pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"),
            "127.0.0.1:5555/pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"
        );
        assert_eq!(m("ubuntu:24.04"), "127.0.0.1:5555/library/ubuntu:24.04");
        assert_eq!(
            m("nvcr.io/nvidia/pytorch:24.05-py3"),
            "127.0.0.1:5555/nvidia/pytorch:24.05-py3"
        );
        assert!(mirrored(&Reference::parse("a/b").unwrap(), "not a host").is_err());
        assert!(mirrored(&Reference::parse("a/b").unwrap(), "mirror").is_err());
    }

    #[test]
    fn an_existing_file_is_replaced_only_with_force() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("Dockerfile");
        write_atomically(&f, b"one", false).unwrap();
        assert!(matches!(
            write_atomically(&f, b"two", false),
            Err(CliError::Usage(_))
        ));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "one");
        write_atomically(&f, b"two", true).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "two");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }
}
