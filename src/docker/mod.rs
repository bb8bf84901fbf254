//! The only module that talks to the Docker Engine (through bollard).
//!
//! Owns: connecting (DOCKER_HOST or the default socket, the API version negotiated with
//! the daemon), the [`Engine`] trait every Docker operation goes through (bollard's
//! [`Bollard`] for real, a fake for unit tests), registry credentials (from
//! [`crate::credentials`]), build contexts ([`context`]), and the two operations the
//! commands run on an Engine: [`build`] (nothing tagged unless the build succeeded) and
//! [`pull`] (watched against a deadline and the sizes the manifest declares, the digest
//! checked against what the registry announced), and [`run_container`] (a command run to
//! its end in a container that is always removed: the GPU bench inside an image). Engine answers become plain data and
//! [`DockerError`]s with messages a user can act on: an image whose content makes the
//! daemon fail is told from the daemon failing ([`DockerError::ImageContent`], without the
//! daemon's storage paths), and an empty reason says the daemon gave none. Every container
//! gpuenv creates carries [`CREATED_BY`]; what a run made is removed when SIGINT or SIGTERM
//! stops it (see `crate::interrupt`).
//!
//! Must not: decide compatibility, choose images, parse image references (the
//! [`Reference`] it takes is [`crate::image::reference`]'s), or print. Progress arrives as
//! [`Progress`] events through a callback; the caller decides where they go. Credentials
//! go to the Engine and nowhere else (see [`crate::credentials`]).
//!
//! Blocking callers get a facade over a small single-threaded runtime.

pub mod context;
mod engine;
mod run;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::deadline::{Deadline, Expiry};

pub use crate::credentials::Credentials;
pub use crate::image::reference::{Reference, ReferenceError};
pub use engine::{Bollard, CREATED_BY, DaemonRegistry, Fetched, PathStat, Paths, container_labels};
pub use run::{ContainerRun, ContainerSpec, all_gpus, run_container};

pub use crate::model::EngineInfo;

/// How a registry failed a pull or push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegistryFault {
    /// 401/403: no credentials, or refused ones.
    Unauthorized,
    /// 404: no such repository, tag, manifest or blob.
    NotFound,
    /// 5xx: the registry itself failed.
    ServerError,
    /// The daemon could not reach the registry.
    Unreachable,
    /// Anything else the daemon reported.
    Other,
}

impl fmt::Display for RegistryFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegistryFault::Unauthorized => {
                "authentication required or refused (HTTP 401): log in with `docker login`, or set \
                 GPUENV_REGISTRY_USER and GPUENV_REGISTRY_PASSWORD"
            }
            RegistryFault::NotFound => "no such image, tag or layer there (HTTP 404)",
            RegistryFault::ServerError => "the registry failed (HTTP 5xx); try again later",
            RegistryFault::Unreachable => "the daemon cannot reach the registry",
            RegistryFault::Other => "the pull failed",
        })
    }
}

/// Why the Engine could not be used, or refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerError {
    /// Nothing answers at the socket or address.
    #[error("the Docker daemon is not reachable{}: {reason}", host.as_deref().map(|h| format!(" at `{h}`")).unwrap_or_default())]
    Unreachable {
        /// DOCKER_HOST, if set.
        host: Option<String>,
        /// Why.
        reason: String,
    },
    /// The socket exists but this user may not use it.
    #[error("permission denied on the Docker socket{}: add the user to the `docker` group or run with access to it", host.as_deref().map(|h| format!(" `{h}`")).unwrap_or_default())]
    PermissionDenied {
        /// DOCKER_HOST, if set.
        host: Option<String>,
    },
    /// The Engine answered with an error.
    #[error("the Docker daemon refused: {0}")]
    Api(String),
    /// What the image holds makes the daemon fail to read it (a symbolic link that leads
    /// back to itself): a fault of the image, not of the daemon. `reason` has the daemon's
    /// own paths (its storage directories) taken out.
    #[error("the image `{image}` cannot be read at `{path}` through the Docker daemon: {reason}")]
    ImageContent {
        /// The image.
        image: String,
        /// The path asked for.
        path: String,
        /// What the daemon said, its storage paths removed.
        reason: String,
    },
    /// A signal stopped the work; what gpuenv had made in the daemon was removed on the
    /// way out.
    #[error("stopped by {0}; what gpuenv had made in the Docker daemon was removed")]
    Interrupted(crate::interrupt::Signal),
    /// A signal stopped the work, and some of what gpuenv had made in the daemon could not
    /// be removed.
    #[error("stopped by {signal}; could not remove what gpuenv had made in the Docker daemon: {}", left.join("; "))]
    InterruptedLeaving {
        /// The signal.
        signal: crate::interrupt::Signal,
        /// Each thing left, and why.
        left: Vec<String>,
    },
    /// No answer in time.
    #[error("the Docker daemon did not answer within {0:?}")]
    Timeout(Duration),
    /// A build step failed; `output` is what that step printed (its last lines).
    #[error("{}", build_failure(step.as_deref(), message, output))]
    BuildFailed {
        /// ``step 7/12 `RUN ...` ``, when the build got that far.
        step: Option<String>,
        /// The daemon's message.
        message: String,
        /// The step's output.
        output: Vec<String>,
    },
    /// The registry refused or failed a pull or push.
    // The daemon's words quote the registry's: shown safe for a terminal and short (only
    // here, after `redacted`, so that no cut can leave half a secret unscrubbed).
    #[error("cannot pull `{image}`: {fault} ({})", if detail.trim().is_empty() { "the daemon gave no reason".to_string() } else { format!("the daemon says: {}", crate::text::excerpt(detail)) })]
    Registry {
        /// The image.
        image: String,
        /// What kind of failure.
        fault: RegistryFault,
        /// The daemon's message.
        detail: String,
    },
    /// The Engine has no such image.
    #[error("no image `{0}` in the Docker daemon")]
    NoSuchImage(String),
    /// A pull was stopped at the deadline: the daemon reported no progress for the idle
    /// limit, or the whole pull outlasted its total.
    #[error("{}", pull_timed_out(image, during, limit))]
    PullTimedOut {
        /// The image.
        image: String,
        /// What the pull was doing (`layer 3f2a9c8e1b7d: Downloading 512 of 2048 bytes`).
        during: String,
        /// Which limit ran out.
        limit: Expiry,
    },
    /// A pull was stopped because the registry sent more of a layer than the manifest
    /// declares (or announced more).
    #[error(
        "stopped pulling `{image}`: the registry {} {got} bytes of layer {layer}, more than the {declared} bytes the manifest declares; the daemon's pull was cancelled",
        if *announced { "announced" } else { "sent" }
    )]
    PullOversized {
        /// The image.
        image: String,
        /// The layer's short id, as the daemon shows it.
        layer: String,
        /// Bytes sent (or announced) so far.
        got: u64,
        /// Whether `got` is what the registry announced (`Content-Length`) rather than sent.
        announced: bool,
        /// The size the manifest declares.
        declared: u64,
    },
    /// A pull was stopped because the daemon downloads a layer nothing bounds: one the
    /// manifest gpuenv read does not list, or one with no size at all.
    #[error(
        "stopped pulling `{image}`: the daemon is downloading layer {layer}, {why}; the daemon's pull was cancelled"
    )]
    PullUnbounded {
        /// The image.
        image: String,
        /// The layer's short id.
        layer: String,
        /// Why nothing bounds it.
        why: String,
    },
    /// What was pulled is not what the registry announced; the tag was removed again.
    #[error(
        "`{image}`: the registry announced {announced} but the daemon holds {pulled}; the image was \
         untagged again (the tag may have moved during the pull: pull again)"
    )]
    DigestMismatch {
        /// The image.
        image: String,
        /// The digest the registry announced.
        announced: String,
        /// The digest pulled.
        pulled: String,
    },
}

fn pull_timed_out(image: &str, during: &str, limit: &Expiry) -> String {
    match limit {
        Expiry::Idle(_) => format!(
            "stopped pulling `{image}`: the daemon reported no progress {limit} ({during}): the registry is slow or has stalled; the daemon's pull was cancelled"
        ),
        Expiry::Total { .. } => format!(
            "stopped pulling `{image}`: it did not finish {limit} ({during}); the daemon's pull was cancelled"
        ),
    }
}

fn build_failure(step: Option<&str>, message: &str, output: &[String]) -> String {
    build_failure_lines(step, message, output).join("\n")
}

/// A failed build's message, a line each: what failed, then the step's output, each of its
/// lines after `  | ` (so that none can pass for one of gpuenv's own).
fn build_failure_lines(step: Option<&str>, message: &str, output: &[String]) -> Vec<String> {
    let message = if message.trim().is_empty() {
        NO_REASON
    } else {
        message
    };
    let mut lines = vec![match step {
        Some(step) => format!("the build failed at {step}: {message}"),
        None => format!("the build failed: {message}"),
    }];
    if !output.is_empty() {
        lines.push("output of the failed step:".into());
        lines.extend(output.iter().map(|l| format!("  | {l}")));
    }
    lines
}

/// What a message says when the daemon answered an error without a word.
const NO_REASON: &str = "the daemon gave no reason";

impl DockerError {
    /// The message as lines, for the messages that are several lines by design (a failed
    /// build and its step's output); `None` for the one-line ones. Each line may still hold
    /// text from outside: the printer makes it safe.
    pub fn lines(&self) -> Option<Vec<String>> {
        match self {
            DockerError::BuildFailed {
                step,
                message,
                output,
            } => Some(build_failure_lines(step.as_deref(), message, output)),
            _ => None,
        }
    }

    /// The same error with every credential form scrubbed from its text.
    pub fn redacted(self, creds: Option<&Credentials>) -> DockerError {
        let Some(c) = creds else { return self };
        let r = |s: String| c.redact(&s);
        match self {
            DockerError::Unreachable { host, reason } => DockerError::Unreachable {
                host,
                reason: r(reason),
            },
            DockerError::Api(m) => DockerError::Api(r(m)),
            DockerError::BuildFailed {
                step,
                message,
                output,
            } => DockerError::BuildFailed {
                step,
                message: r(message),
                output: output.into_iter().map(r).collect(),
            },
            DockerError::Registry { image, fault, detail } => DockerError::Registry {
                image,
                fault,
                detail: r(detail),
            },
            DockerError::PullTimedOut { image, during, limit } => DockerError::PullTimedOut {
                image,
                during: r(during),
                limit,
            },
            other => other,
        }
    }
}

/// Something worth telling the user while a build, pull or push runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Output of the build (a chunk: one or more lines, or part of one).
    Build(String),
    /// One layer changed state (`Downloading`, `Pull complete`), with bytes when known.
    Layer {
        /// The layer's short id.
        id: String,
        /// Its state.
        status: String,
        /// Bytes done.
        current: Option<u64>,
        /// Bytes in all.
        total: Option<u64>,
    },
    /// A line about the whole operation (`Digest: sha256:...`).
    Status(String),
}

/// What the Engine knows of a local image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImageDetails {
    /// `sha256:...`.
    pub id: String,
    /// `repo:tag` names.
    pub repo_tags: Vec<String>,
    /// `repo@sha256:...` names: set by pulls and pushes, never by builds.
    pub repo_digests: Vec<String>,
    /// Bytes.
    pub size: Option<u64>,
    /// Labels of its config.
    pub labels: BTreeMap<String, String>,
    /// `KEY=value` environment of its config.
    pub env: Vec<String>,
    /// The user it runs as (`10001:10001`); empty for root.
    pub user: String,
    /// How many layers.
    pub layers: usize,
}

/// The Docker operations gpuenv uses. Every one blocks until done; long ones report
/// [`Progress`] as they go.
pub trait Engine {
    /// Builds the context (a tar holding `Dockerfile`) and returns the image id. The image
    /// is left untagged: [`build`] tags it only once the whole build succeeded.
    fn build(&self, context: Vec<u8>, progress: &mut dyn FnMut(Progress)) -> Result<String, DockerError>;
    /// Gives an image another name.
    fn tag(&self, image: &str, name: &Reference) -> Result<(), DockerError>;
    /// A local image by name or id; `None` when there is none.
    fn inspect(&self, name: &str) -> Result<Option<ImageDetails>, DockerError>;
    /// Removes a name (and the image, when it was its last name); `false` when there was
    /// none.
    fn remove(&self, name: &str, force: bool) -> Result<bool, DockerError>;
    /// The digest the registry announces for a reference now, without pulling; the
    /// daemon's answer is waited for at most [`Deadline::wait`].
    fn registry_digest(
        &self,
        image: &Reference,
        creds: Option<&Credentials>,
        deadline: &Deadline,
    ) -> Result<String, DockerError>;
    /// Pulls an image; returns the digest the pull reported. Each progress event is
    /// waited for at most [`Deadline::wait`] ([`DockerError::PullTimedOut`] after that);
    /// `progress` sees every event, and an error it returns stops the pull: the stream is
    /// dropped, which closes the connection, and the daemon cancels a pull whose client
    /// went away.
    fn pull(
        &self,
        image: &Reference,
        creds: Option<&Credentials>,
        deadline: &Deadline,
        progress: &mut dyn FnMut(Progress) -> Result<(), DockerError>,
    ) -> Result<Option<String>, DockerError>;
    /// Pushes a local image; returns the digest the registry gave it.
    fn push(
        &self,
        image: &Reference,
        creds: Option<&Credentials>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Option<String>, DockerError>;
    /// Makes an image from a root filesystem tar (with Dockerfile-style `changes` such as
    /// `ENV PATH=/bin`), named `name`; returns its id.
    fn import(&self, rootfs: Vec<u8>, name: &Reference, changes: &[String]) -> Result<String, DockerError>;
    /// One file of an image, read through a container that is created, never started,
    /// and removed again. At most `limit` bytes.
    fn read_file(&self, image: &str, path: &str, limit: u64) -> Result<Vec<u8>, DockerError>;
    /// Removes one image by id and nothing else: not the untagged images below it, as a
    /// plain removal would; `false` when there was none.
    fn remove_one(&self, id: &str) -> Result<bool, DockerError>;
    /// The image a local image was built on (`sha256:...`), as its history records it for
    /// each image the classic builder made; `None` when none is recorded (or no image).
    fn parent(&self, image: &str) -> Result<Option<String>, DockerError>;
    /// Removes a container (stopping it first); `false` when there was none.
    fn remove_container(&self, id: &str) -> Result<bool, DockerError>;
    /// Loads a `docker save` archive (`docker load`).
    fn load(&self, archive: Vec<u8>) -> Result<(), DockerError>;
    /// The `docker save` stream of an image, as it comes: memory stays bounded whatever the
    /// image's size.
    fn export(&self, image: &str) -> Result<Box<dyn std::io::Read + Send>, DockerError>;
    /// A local image's configuration, as a config blob would hold it, and its names;
    /// `None` when there is no such image.
    fn image_config(&self, name: &str) -> Result<Option<ImageConfigDoc>, DockerError>;
    /// A reader of the image's files path by path, through a container that is created,
    /// never started, and removed when the reader is closed or dropped.
    fn open_paths(&self, image: &str) -> Result<Box<dyn PathReader + '_>, DockerError>;
}

/// A local image's configuration in OCI terms: what a config blob holds (`architecture`,
/// `os`, `variant`, `config`, `rootfs`), as JSON, and the names (repo tags) it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageConfigDoc {
    /// The configuration, as the JSON of a config blob.
    pub config: Vec<u8>,
    /// The image's repo tags.
    pub names: Vec<String>,
}

/// An image's files, read path by path without exporting the image.
pub trait PathReader {
    /// Stats every path of `stats` (`None`: absent) and fetches every path of `gets` as
    /// a tar (a tar past its limit is abandoned as [`Fetched::TooLarge`]); the answers
    /// come in the order asked.
    fn ask(
        &self,
        stats: &[String],
        gets: &[(String, u64)],
    ) -> Result<(Vec<Option<PathStat>>, Vec<Fetched>), DockerError>;
    /// Lets the reader go, reporting a failure to clean up (a drop cleans up quietly).
    fn close(self: Box<Self>) -> Result<(), DockerError>;
}

/// A finished build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Built {
    /// `sha256:...`.
    pub image_id: String,
    /// The name given.
    pub tag: String,
    /// Bytes.
    pub size: Option<u64>,
    /// Steps the Dockerfile had.
    pub steps: Option<u32>,
}

/// The last lines of a step kept for the error message.
const STEP_OUTPUT_LINES: usize = 40;

/// Builds a context and, only when every step succeeded, tags the image: a failed build
/// leaves no name pointing at a half-built image (an earlier image of that name keeps it).
pub fn build(
    engine: &dyn Engine,
    context: Vec<u8>,
    tag: &Reference,
    progress: &mut dyn FnMut(Progress),
) -> Result<Built, DockerError> {
    // Held until what an interrupted build left is removed.
    let _hold = crate::interrupt::hold().map_err(DockerError::Interrupted)?;
    let mut step: Option<String> = None;
    let mut steps: Option<u32> = None;
    let mut output: Vec<String> = Vec::new();
    let mut partial = String::new();
    let mut made = Made::default();
    let result = engine.build(context, &mut |p| {
        if let Progress::Build(chunk) = &p {
            partial.push_str(chunk);
            while let Some(i) = partial.find('\n') {
                let line: String = partial.drain(..=i).collect();
                let line = line.trim_end().to_string();
                if let Some((frac, total, instruction)) = step_header(&line) {
                    step = Some(format!("step {frac} `{instruction}`"));
                    steps = Some(total);
                    output.clear();
                    made.step(instruction);
                } else if !made.bookkeeping(&line) && !line.is_empty() {
                    if output.len() == STEP_OUTPUT_LINES {
                        output.remove(0);
                    }
                    output.push(line);
                }
            }
        }
        progress(p);
    });
    let id = match result {
        Ok(id) => id,
        Err(DockerError::Interrupted(signal)) => {
            let left = made.remove(engine);
            return Err(if left.is_empty() {
                DockerError::Interrupted(signal)
            } else {
                DockerError::InterruptedLeaving { signal, left }
            });
        }
        Err(DockerError::BuildFailed { message, .. }) => {
            if !partial.trim().is_empty() {
                output.push(partial.trim_end().to_string());
            }
            // The daemon's own summary line repeats the message; keep the step's output.
            output.retain(|l| !l.contains(message.trim()));
            return Err(DockerError::BuildFailed {
                step,
                message: message.trim().to_string(),
                output,
            });
        }
        Err(e) => return Err(e),
    };
    engine.tag(&id, tag)?;
    let size = engine.inspect(&id)?.and_then(|d| d.size);
    Ok(Built {
        image_id: id,
        tag: tag.to_string(),
        size,
        steps,
    })
}

/// What a build made in the daemon so far, read from the classic builder's own lines
/// between a step's header and its output (` ---> Running in <container>`, ` ---> Using
/// cache`, ` ---> <image>`): removed again when a signal stops the build.
///
/// A step's output may print lines like these too, so a step's image is the last
/// ` ---> <image>` before the next header, and an image is removed only when the daemon
/// says it was built on the image of the step before: output cannot name another image.
#[derive(Debug, Default)]
struct Made {
    /// The container of the step that runs now.
    running: Option<String>,
    /// Each finished step's image (a short id), and whether this build made it.
    steps: Vec<(String, bool)>,
    /// The step under way: its last ` ---> <image>` so far.
    current: Option<(String, bool)>,
    /// The step under way is `FROM` (its image is the base) or came from the cache.
    not_ours: bool,
}

impl Made {
    /// A step begins: the one before is finished.
    fn step(&mut self, instruction: &str) {
        if let Some(done) = self.current.take() {
            self.steps.push(done);
        }
        self.running = None;
        self.not_ours = instruction
            .split_whitespace()
            .next()
            .is_some_and(|w| w.eq_ignore_ascii_case("FROM"));
    }

    /// Takes note of one of the builder's own lines; `false` for any other line.
    fn bookkeeping(&mut self, line: &str) -> bool {
        let l = line.trim_start();
        if let Some(rest) = l.strip_prefix("---> ") {
            let rest = rest.trim();
            if let Some(id) = rest.strip_prefix("Running in ") {
                self.running = Some(id.trim().to_string());
            } else if rest == "Using cache" {
                self.not_ours = true;
            } else if !rest.is_empty() && rest.len() <= 64 && rest.chars().all(|c| c.is_ascii_hexdigit()) {
                self.current = Some((rest.to_string(), !self.not_ours));
            }
            return true;
        }
        l.starts_with("Removing intermediate container ") || l.starts_with("Removed intermediate container ")
    }

    /// Removes the step's container (the daemon removes it too when the build's request
    /// goes away; whichever comes first) and the images this build committed, newest
    /// first, each only while untagged and built on the image of the step before. Returns
    /// what could not be removed, and why.
    fn remove(&self, engine: &dyn Engine) -> Vec<String> {
        let mut left = Vec::new();
        if let Some(c) = &self.running {
            if let Err(e) = engine.remove_container(c) {
                left.push(format!("the step's container {c} ({e})"));
            }
        }
        let all: Vec<&(String, bool)> = self.steps.iter().chain(&self.current).collect();
        for at in (1..all.len()).rev() {
            let ((image, ours), (below, _)) = (all[at], all[at - 1]);
            if !ours {
                continue;
            }
            let looked = engine
                .inspect(image)
                .map(|d| d.map(|d| (d, engine.parent(image))));
            let (details, parent) = match looked {
                Ok(Some((d, Ok(p)))) => (d, p),
                Ok(None) => continue,
                Ok(Some((_, Err(e)))) | Err(e) => {
                    left.push(format!("image {image} ({e})"));
                    continue;
                }
            };
            let built_on_below =
                parent.is_some_and(|p| p.trim_start_matches("sha256:").starts_with(below.as_str()));
            if !details.repo_tags.is_empty() || !built_on_below {
                continue;
            }
            if let Err(e) = engine.remove_one(image) {
                left.push(format!("image {image} ({e})"));
            }
        }
        left
    }
}

/// `Step 3/12 : RUN x` (the classic builder's step header) → `("3/12", 12, "RUN x")`.
pub fn step_header(line: &str) -> Option<(&str, u32, &str)> {
    let rest = line.strip_prefix("Step ")?;
    let (frac, instruction) = rest.split_once(" : ")?;
    let (n, total) = frac.split_once('/')?;
    n.parse::<u32>().ok()?;
    Some((frac, total.parse().ok()?, instruction))
}

/// A finished, verified pull.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pulled {
    /// The reference pulled.
    pub image: String,
    /// The manifest digest, equal to what the registry announced.
    pub digest: String,
    /// `sha256:...` of the local image.
    pub image_id: String,
    /// Bytes.
    pub size: Option<u64>,
    /// Layers of the image.
    pub layers: usize,
    /// Layers that were downloaded (the rest were already here).
    pub downloaded_layers: usize,
}

/// The sizes a manifest declares for its layers, by digest (`sha256:...`): what a pull
/// may download of each. `None` where the manifest could not be read from here: each
/// layer is then held to the size the registry announces to the daemon.
pub type DeclaredSizes = Option<BTreeMap<String, u64>>;

/// The id the daemon shows a layer by in a pull's progress: the first 12 hex digits of
/// its digest (moby's `stringid.TruncateID` of the descriptor's digest).
pub fn short_id(digest: &str) -> String {
    let hex = digest.split_once(':').map_or(digest, |(_, h)| h);
    hex.chars().take(12).collect()
}

/// Why a download must stop, from one progress event and what bounds it.
fn over_bound(image: &Reference, declared: &DeclaredSizes, event: &Progress) -> Result<(), DockerError> {
    let Progress::Layer {
        id,
        status,
        current,
        total,
    } = event
    else {
        return Ok(());
    };
    if status != "Downloading" {
        return Ok(());
    }
    let bound = match declared {
        Some(sizes) => sizes
            .iter()
            .find(|(digest, _)| short_id(digest) == *id)
            .map(|(_, size)| *size)
            .ok_or_else(|| DockerError::PullUnbounded {
                image: image.to_string(),
                layer: id.clone(),
                why: "which the manifest gpuenv read does not list (the registry answers the daemon and gpuenv differently, or the tag moved)".into(),
            })?,
        None => total.ok_or_else(|| DockerError::PullUnbounded {
            image: image.to_string(),
            layer: id.clone(),
            why: "whose size the registry does not announce, and gpuenv could not read the manifest to bound it".into(),
        })?,
    };
    let oversized = |got: u64, announced: bool| DockerError::PullOversized {
        image: image.to_string(),
        layer: id.clone(),
        got,
        announced,
        declared: bound,
    };
    // The daemon's total is the blob's `Content-Length`, not the descriptor's size.
    if let Some(t) = total.filter(|t| *t > bound) {
        return Err(oversized(t, true));
    }
    match current {
        Some(c) if *c > bound => Err(oversized(*c, false)),
        _ => Ok(()),
    }
}

/// Pulls an image and checks that the daemon now holds the manifest the registry
/// announced before the pull (the tag's digest, or the digest written in the reference).
/// On a mismatch the name is removed again, so nothing unverified stays tagged.
///
/// The pull is watched: it is stopped (and the daemon's pull cancelled) when no progress
/// comes for the deadline's idle limit or the deadline passes, and when a layer's download
/// grows past the size `declared` gives it, or is one `declared` does not list (see
/// [`DeclaredSizes`]): the daemon itself writes whatever a registry sends to disk.
/// Messages never contain the credentials.
pub fn pull(
    engine: &dyn Engine,
    image: &Reference,
    creds: Option<&Credentials>,
    deadline: &Deadline,
    declared: &DeclaredSizes,
    progress: &mut dyn FnMut(Progress),
) -> Result<Pulled, DockerError> {
    let mut run = || -> Result<Pulled, DockerError> {
        let announced = match &image.digest {
            Some(d) => d.clone(),
            None => engine.registry_digest(image, creds, deadline)?,
        };
        let mut downloaded = std::collections::BTreeSet::new();
        let reported = engine.pull(image, creds, deadline, &mut |p| {
            if let Progress::Layer { id, status, .. } = &p {
                if status == "Pull complete" {
                    downloaded.insert(id.clone());
                }
            }
            let verdict = over_bound(image, declared, &p);
            progress(p);
            verdict
        })?;
        let name = image.to_string();
        let details = engine
            .inspect(&name)?
            .ok_or_else(|| DockerError::NoSuchImage(name.clone()))?;
        let held: Option<&str> = details
            .repo_digests
            .iter()
            .filter_map(|d| d.split_once('@').map(|(_, d)| d))
            .find(|d| *d == announced);
        let mismatch = match (&reported, held) {
            (Some(r), _) if *r != announced => Some(r.clone()),
            (_, None) => Some(
                details
                    .repo_digests
                    .iter()
                    .filter_map(|d| d.split_once('@').map(|(_, d)| d.to_string()))
                    .next()
                    .unwrap_or_else(|| "no digest".into()),
            ),
            _ => None,
        };
        if let Some(pulled) = mismatch {
            if image.digest.is_none() {
                engine.remove(&name, false)?;
            }
            return Err(DockerError::DigestMismatch {
                image: name,
                announced,
                pulled,
            });
        }
        Ok(Pulled {
            image: name,
            digest: announced,
            image_id: details.id,
            size: details.size,
            layers: details.layers,
            downloaded_layers: downloaded.len(),
        })
    };
    run().map_err(|e| e.redacted(creds))
}

/// Tells how a registry failed from the daemon's message (its HTTP status is that of the
/// daemon, not of the registry).
pub(crate) fn registry_fault(message: &str) -> RegistryFault {
    let lower = message.to_lowercase();
    let tokens: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    let has = |t: &str| tokens.contains(&t);
    if lower.contains("no basic auth credentials")
        || lower.contains("unauthorized")
        || lower.contains("authentication required")
        || lower.contains("denied")
        || has("401")
        || has("403")
    {
        RegistryFault::Unauthorized
    } else if lower.contains("manifest unknown")
        || lower.contains("not found")
        || lower.contains("unknown blob")
        || lower.contains("name unknown")
        || lower.contains("does not exist")
        || has("404")
    {
        RegistryFault::NotFound
    } else if lower.contains("internal server error") || ["500", "502", "503", "504"].iter().any(|c| has(c)) {
        RegistryFault::ServerError
    } else if lower.contains("connection refused")
        || lower.contains("no such host")
        || lower.contains("i/o timeout")
        || lower.contains("network is unreachable")
        || lower.contains("tls handshake timeout")
    {
        RegistryFault::Unreachable
    } else {
        RegistryFault::Other
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, DockerError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| DockerError::Api(format!("cannot start an I/O runtime: {e}")))
}

/// Maps a failure to reach or use the daemon.
pub(crate) fn classify(e: bollard::errors::Error) -> DockerError {
    let host = std::env::var("DOCKER_HOST").ok();
    let text = e.to_string();
    let mut chain = text.clone();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        // hyper repeats its context at each level; each sentence once is enough.
        let t = s.to_string();
        if !chain.contains(&t) {
            chain.push_str(": ");
            chain.push_str(&t);
        }
        src = s.source();
    }
    let lower = chain.to_lowercase();
    if lower.contains("permission denied") {
        DockerError::PermissionDenied { host }
    } else if let bollard::errors::Error::DockerResponseServerError { message, status_code } = &e {
        DockerError::Api(if message.trim().is_empty() {
            format!("{NO_REASON} (HTTP {status_code})")
        } else {
            message.clone()
        })
    } else if let bollard::errors::Error::DockerStreamError { error } = &e {
        DockerError::Api(if error.trim().is_empty() {
            NO_REASON.to_string()
        } else {
            error.clone()
        })
    } else {
        DockerError::Unreachable { host, reason: chain }
    }
}

/// Connects as the `docker` CLI would (DOCKER_HOST or the local socket).
pub(crate) fn connect() -> Result<bollard::Docker, DockerError> {
    bollard::Docker::connect_with_defaults().map_err(classify)
}

/// Asks the Engine about itself.
pub fn info(timeout: Duration) -> Result<EngineInfo, DockerError> {
    let rt = runtime()?;
    rt.block_on(async {
        let docker = connect()?;
        let work = async {
            let docker = docker.negotiate_version().await.map_err(classify)?;
            let info = docker.info().await.map_err(classify)?;
            let api = docker.client_version().to_string();
            let mut runtimes: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
            runtimes.sort();
            Ok(EngineInfo {
                server_version: info.server_version,
                api_version: Some(api),
                runtimes,
                default_runtime: info.default_runtime,
                cdi_spec_dirs: info.cdi_spec_dirs.unwrap_or_default(),
                cdi_devices: info
                    .discovered_devices
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|d| d.source.as_deref() == Some("cdi"))
                    .filter_map(|d| d.id)
                    .collect(),
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| DockerError::Timeout(timeout))?
    })
}
