//! Running a command to its end in a container, as `docker run --rm` does: what the
//! GPU bench uses to measure inside an image.
//!
//! Owns: creating the container (labelled as gpuenv's, with every GPU requested as
//! `docker run --gpus all` asks for them where wanted), starting it, waiting for it
//! against a deadline and a signal, reading its output within a cap, and removing it
//! whatever happened (an error, the deadline, SIGINT or SIGTERM, a panic). Must not:
//! know what the command is or read its output's meaning.

use std::time::Duration;

use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig};
use bollard::query_parameters::{LogsOptions, RemoveContainerOptions};
use futures_util::StreamExt;
use futures_util::future::{Either, select};

use super::{DockerError, classify, connect, container_labels, runtime};
use crate::interrupt;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    /// The image (local; nothing is pulled).
    pub image: String,
    /// The command, replacing the image's entrypoint and command.
    pub cmd: Vec<String>,
    /// Ask for every GPU, as `docker run --gpus all` does.
    pub gpus: bool,
    /// How long the command may run before the container is killed.
    pub timeout: Duration,
    /// The most bytes kept of each of its outputs.
    pub output_cap: u64,
    /// Why gpuenv runs it: its `io.gpuenv.purpose` label.
    pub purpose: String,
}

/// How the command ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerRun {
    /// Its exit status; `None` when it was killed at the deadline.
    pub status: Option<i64>,
    /// Killed at the deadline.
    pub timed_out: bool,
    /// Standard output (lossy UTF-8), at most the cap.
    pub stdout: String,
    /// Standard error (lossy UTF-8), at most the cap.
    pub stderr: String,
    /// An output passed its cap (the rest was not read).
    pub truncated: bool,
}

/// Every GPU, as `docker run --gpus all` asks for them: every device (count -1) with the
/// `gpu` capability (docker/cli, opts/gpus.go). The CLI leaves the driver empty for the
/// daemon to pick the one that offers `gpu`; here it is named, `nvidia`, the driver the
/// daemon registers for GPUs when NVIDIA's runtime is installed, so that a daemon without
/// it answers with the missing driver's name.
pub fn all_gpus() -> DeviceRequest {
    DeviceRequest {
        driver: Some("nvidia".into()),
        count: Some(-1),
        device_ids: None,
        capabilities: Some(vec![vec!["gpu".into()]]),
        options: None,
    }
}

/// How long the daemon is given for each step that is not the command itself (connect,
/// create, start, read the logs, remove).
const STEP: Duration = Duration::from_secs(60);

/// The shared memory a container gets: NCCL moves data between the ranks of one machine
/// through /dev/shm, and Docker's default of 64 MiB is too small for it (NVIDIA's
/// containers guide asks for `--ipc=host` or a larger `--shm-size` for the same reason).
const SHM_BYTES: i64 = 2 << 30;

/// Runs `spec.cmd` in a new container of `spec.image` and removes the container again.
/// A container that cannot get GPUs (no NVIDIA runtime in the daemon) is an error that
/// says so.
pub fn run_container(spec: &ContainerSpec) -> Result<ContainerRun, DockerError> {
    // Taken before the container exists, let go after it is removed (locals drop in
    // reverse order: the container's guard first).
    let _hold = interrupt::hold().map_err(DockerError::Interrupted)?;
    let rt = runtime()?;
    let docker = rt.block_on(async {
        tokio::time::timeout(STEP, connect()?.negotiate_version())
            .await
            .map_err(|_| DockerError::Timeout(STEP))?
            .map_err(classify)
    })?;
    let mut labels = container_labels(&spec.image);
    labels.insert("io.gpuenv.purpose".into(), spec.purpose.clone());
    let body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: Some(spec.cmd.clone()),
        // The image's entrypoint would run first (NVIDIA's print a banner, some start a
        // shell that reads a profile): the command runs as given.
        entrypoint: Some(Vec::new()),
        labels: Some(labels),
        host_config: Some(HostConfig {
            // Loopback only: the ranks of one machine meet on 127.0.0.1; nothing else is
            // needed, and a benchmark has no business on the network.
            network_mode: Some("none".into()),
            shm_size: Some(SHM_BYTES),
            // No memlock limit is raised: CUDA pins host memory through its driver, not
            // mlock, and a daemon that may not raise limits (rootless, nested) refuses it.
            device_requests: spec.gpus.then(|| vec![all_gpus()]),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    // Not interruptible: a create cut short may still make a container, whose id would
    // then be unknown.
    let created = rt
        .block_on(async { tokio::time::timeout(STEP, docker.create_container(None, body)).await })
        .map_err(|_| DockerError::Timeout(STEP))?
        .map_err(|e| match &e {
            bollard::errors::Error::DockerResponseServerError { status_code: 404, .. } => {
                DockerError::NoSuchImage(spec.image.clone())
            }
            _ => classify(e),
        })?;
    let container = Removed {
        rt: &rt,
        docker: &docker,
        id: created.id,
        removed: false,
    };
    if let Some(signal) = interrupt::requested() {
        return Err(DockerError::Interrupted(signal));
    }
    let id = container.id.as_str();
    interruptible(&rt, async {
        tokio::time::timeout(STEP, docker.start_container(id, None)).await
    })?
    .map_err(|_| DockerError::Timeout(STEP))?
    .map_err(|e| start_error(e, spec.gpus))?;

    let waited = interruptible(&rt, async {
        let mut wait = docker.wait_container(id, None);
        tokio::time::timeout(spec.timeout, wait.next()).await
    })?;
    let (status, timed_out) = match waited {
        Err(_) => {
            // Killed before its logs are read: what it printed until now is kept.
            let _ = rt.block_on(async { tokio::time::timeout(STEP, docker.kill_container(id, None)).await });
            (None, true)
        }
        Ok(Some(Ok(r))) => (Some(r.status_code), false),
        Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => (Some(code), false),
        Ok(Some(Err(e))) => return Err(classify(e)),
        Ok(None) => {
            return Err(DockerError::Api(
                "the daemon ended the wait without an exit status".into(),
            ));
        }
    };
    let (stdout, stderr, truncated) = interruptible(&rt, read_logs(&docker, id, spec.output_cap))??;
    let run = ContainerRun {
        status,
        timed_out,
        stdout,
        stderr,
        truncated,
    };
    container.remove()?;
    Ok(run)
}

/// Why a container did not start; where GPUs were asked for and the daemon has no
/// NVIDIA runtime to give them, a message that says what to install.
fn start_error(e: bollard::errors::Error, gpus: bool) -> DockerError {
    let message = match &e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        _ => return classify(e),
    };
    if gpus && (message.contains("could not select device driver") || message.contains("nvidia-container")) {
        DockerError::Api(format!(
            "the Docker daemon cannot give the container GPUs (`--gpus all`): {}; it needs the \
             NVIDIA runtime: install the NVIDIA Container Toolkit and run `nvidia-ctk runtime \
             configure --runtime=docker`, then restart the daemon",
            crate::text::excerpt(&message)
        ))
    } else {
        classify(e)
    }
}

/// Runs `work` unless a signal asks gpuenv to stop first.
fn interruptible<F: std::future::Future>(
    rt: &tokio::runtime::Runtime,
    work: F,
) -> Result<F::Output, DockerError> {
    rt.block_on(async {
        match select(std::pin::pin!(work), std::pin::pin!(interrupt::cancelled())).await {
            Either::Left((done, _)) => Ok(done),
            Either::Right((signal, _)) => Err(DockerError::Interrupted(signal)),
        }
    })
}

/// The container's stdout and stderr, each to `cap` bytes, read within [`STEP`].
async fn read_logs(
    docker: &bollard::Docker,
    id: &str,
    cap: u64,
) -> Result<(String, String, bool), DockerError> {
    let options = LogsOptions {
        follow: false,
        stdout: true,
        stderr: true,
        ..LogsOptions::default()
    };
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut truncated = false;
    let read = async {
        let mut logs = docker.logs(id, Some(options));
        while let Some(item) = logs.next().await {
            let (buf, message) = match item.map_err(classify)? {
                bollard::container::LogOutput::StdOut { message } => (&mut out, message),
                bollard::container::LogOutput::StdErr { message } => (&mut err, message),
                bollard::container::LogOutput::Console { message } => (&mut out, message),
                bollard::container::LogOutput::StdIn { .. } => continue,
            };
            let room = cap.saturating_sub(buf.len());
            if message.len() > room {
                truncated = true;
            }
            buf.extend_from_slice(&message[..message.len().min(room)]);
            if out.len() >= cap && err.len() >= cap {
                break;
            }
        }
        Ok::<(), DockerError>(())
    };
    tokio::time::timeout(STEP, read)
        .await
        .map_err(|_| DockerError::Timeout(STEP))??;
    Ok((
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
        truncated,
    ))
}

/// A container gpuenv made: removed (forced, with its volumes) on drop, so that every way
/// out (an error, a signal, a panic) leaves nothing behind.
struct Removed<'a> {
    rt: &'a tokio::runtime::Runtime,
    docker: &'a bollard::Docker,
    id: String,
    removed: bool,
}

impl Removed<'_> {
    fn try_remove(&self) -> Result<(), DockerError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..RemoveContainerOptions::default()
        };
        let removed = self
            .rt
            .block_on(async {
                tokio::time::timeout(STEP, self.docker.remove_container(&self.id, Some(options))).await
            })
            .map_err(|_| DockerError::Timeout(STEP))?;
        match removed {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(()),
            Err(e) => Err(DockerError::Api(format!(
                "cannot remove the container {} gpuenv ran (remove it with `docker rm -f {}`): {}",
                self.id,
                self.id,
                classify(e)
            ))),
        }
    }

    /// Removes it, reporting a failure (a drop removes it quietly).
    fn remove(mut self) -> Result<(), DockerError> {
        self.removed = true;
        self.try_remove()
    }
}

impl Drop for Removed<'_> {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.try_remove();
        }
    }
}
