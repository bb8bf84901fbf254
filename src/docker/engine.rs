//! [`Engine`] over bollard: each operation runs to completion on a single-threaded
//! runtime owned by the connection.

use std::time::Duration;

use bollard::auth::DockerCredentials;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    BuildImageOptions, CreateImageOptions, DownloadFromContainerOptions, PushImageOptions,
    RemoveContainerOptions, RemoveImageOptions, TagImageOptions,
};
use futures_util::StreamExt;
use futures_util::future::{Either, select};

use crate::interrupt;

use super::{
    Credentials, DockerError, Engine, ImageDetails, Progress, Reference, RegistryFault, classify, connect,
    registry_fault, runtime,
};
use crate::deadline::Deadline;

/// A connection to the Docker Engine, its API version negotiated.
pub struct Bollard {
    rt: tokio::runtime::Runtime,
    docker: bollard::Docker,
}

impl std::fmt::Debug for Bollard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bollard")
            .field("api_version", &self.docker.client_version().to_string())
            .finish()
    }
}

fn bollard_creds(c: Option<&Credentials>) -> Option<DockerCredentials> {
    c.map(|c| match c.identity_token() {
        // The daemon exchanges an identity token for access tokens itself.
        Some(token) => DockerCredentials {
            identitytoken: Some(token.to_string()),
            serveraddress: Some(c.server.clone()),
            ..DockerCredentials::default()
        },
        None => DockerCredentials {
            username: Some(c.username.clone()),
            password: Some(c.password().to_string()),
            serveraddress: Some(c.server.clone()),
            ..DockerCredentials::default()
        },
    })
}

fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }
    )
}

/// A pull or push failure: the registry's when the daemon answered, the daemon's when it
/// did not.
fn registry_error(image: &Reference, e: bollard::errors::Error) -> DockerError {
    let message = match &e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        bollard::errors::Error::DockerStreamError { error } => error.clone(),
        _ => return classify(e),
    };
    DockerError::Registry {
        image: image.to_string(),
        fault: registry_fault(&message),
        detail: message,
    }
}

fn layer_event(
    id: Option<String>,
    status: Option<String>,
    current: Option<i64>,
    total: Option<i64>,
) -> Progress {
    let status = status.unwrap_or_default();
    match id {
        // The first line of a pull carries the tag as its id: it is not a layer.
        Some(id) if !status.starts_with("Pulling from") && !status.starts_with("The push refers") => {
            Progress::Layer {
                id,
                status,
                current: current.and_then(|c| u64::try_from(c).ok()),
                total: total.and_then(|t| u64::try_from(t).ok()).filter(|t| *t > 0),
            }
        }
        _ => Progress::Status(status),
    }
}

impl Bollard {
    /// Connects (DOCKER_HOST or the local socket) and negotiates the API version, giving up
    /// after `timeout`.
    pub fn connect(timeout: Duration) -> Result<Bollard, DockerError> {
        let rt = runtime()?;
        let docker = connect()?;
        let docker = rt
            .block_on(async { tokio::time::timeout(timeout, docker.negotiate_version()).await })
            .map_err(|_| DockerError::Timeout(timeout))?
            .map_err(classify)?;
        Ok(Bollard { rt, docker })
    }

    /// The API version in use.
    pub fn api_version(&self) -> String {
        self.docker.client_version().to_string()
    }

    /// Runs a request to completion, unless a signal asks gpuenv to stop first: then the
    /// request is dropped (its connection closed) and the answer is
    /// [`DockerError::Interrupted`]. Only for requests made while something is held
    /// (see `interrupt`); removing what was made is never interrupted.
    fn interruptible<F: std::future::Future>(&self, work: F) -> Result<F::Output, DockerError> {
        self.rt.block_on(async {
            match select(std::pin::pin!(work), std::pin::pin!(interrupt::cancelled())).await {
                Either::Left((done, _)) => Ok(done),
                Either::Right((signal, _)) => Err(DockerError::Interrupted(signal)),
            }
        })
    }

    /// The platform the daemon pulls for (`linux`, `amd64`), and which registries it
    /// speaks plain HTTP to by its own configuration (`insecure-registries`: hosts, and
    /// the CIDRs an IP-literal host is checked against): gpuenv reads a manifest for a
    /// pull from where the daemon will pull it.
    pub fn pull_setup(&self, timeout: Duration) -> Result<DaemonRegistry, DockerError> {
        let asked = async {
            let version = self.docker.version().await.map_err(classify)?;
            let info = self.docker.info().await.map_err(classify)?;
            Ok::<_, DockerError>((version, info))
        };
        let (version, info) = self
            .rt
            .block_on(async { tokio::time::timeout(timeout, asked).await })
            .map_err(|_| DockerError::Timeout(timeout))??;
        let config = info.registry_config.unwrap_or_default();
        Ok(DaemonRegistry {
            os: version.os.unwrap_or_else(|| "linux".into()),
            arch: version.arch.unwrap_or_else(|| "amd64".into()),
            insecure_hosts: config
                .index_configs
                .unwrap_or_default()
                .into_iter()
                .filter(|(_, i)| i.secure == Some(false))
                .map(|(name, _)| name)
                .collect(),
            insecure_cidrs: config.insecure_registry_cidrs.unwrap_or_default(),
        })
    }
}

/// What the daemon's configuration says about pulling: its platform and its insecure
/// registries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonRegistry {
    /// `linux`.
    pub os: String,
    /// `amd64`, `arm64` (Go's names).
    pub arch: String,
    /// Registry hosts the daemon treats as insecure.
    pub insecure_hosts: Vec<String>,
    /// IP ranges the daemon treats as insecure (`127.0.0.0/8`).
    pub insecure_cidrs: Vec<String>,
}

impl DaemonRegistry {
    /// Whether the daemon speaks plain HTTP to `host` (`HOST[:PORT]`): listed by name, or
    /// an IP literal inside one of its insecure ranges. Names are not resolved (the
    /// daemon resolves them; gpuenv does not follow a name to an address).
    pub fn insecure(&self, host: &str) -> bool {
        if self.insecure_hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return true;
        }
        let bare = match host.strip_prefix('[') {
            Some(rest) => rest.split_once(']').map_or(rest, |(h, _)| h),
            None => host
                .rsplit_once(':')
                .filter(|(h, _)| !h.contains(':'))
                .map_or(host, |(h, _)| h),
        };
        let Ok(ip) = bare.parse::<std::net::IpAddr>() else {
            return false;
        };
        self.insecure_cidrs.iter().any(|c| in_cidr(ip, c))
    }
}

/// Whether `ip` lies in `cidr` (`10.0.0.0/8`, `::1/128`); a malformed range holds nothing.
fn in_cidr(ip: std::net::IpAddr, cidr: &str) -> bool {
    use std::net::IpAddr;
    let Some((net, bits)) = cidr.trim().split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return false;
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

impl Engine for Bollard {
    fn build(&self, context: Vec<u8>, progress: &mut dyn FnMut(Progress)) -> Result<String, DockerError> {
        let options = BuildImageOptions {
            dockerfile: "Dockerfile".into(),
            // Intermediate containers go even when a step fails.
            rm: true,
            forcerm: true,
            ..BuildImageOptions::default()
        };
        // A signal drops the request: the daemon then cancels the build and removes the
        // step's container itself; `docker::build` removes what the build committed.
        self.interruptible(async {
            let mut stream = self
                .docker
                .build_image(options, None, Some(bollard::body_full(context.into())));
            let mut id: Option<String> = None;
            let mut short: Option<String> = None;
            while let Some(item) = stream.next().await {
                let info = match item {
                    Ok(i) => i,
                    Err(bollard::errors::Error::DockerStreamError { error }) => {
                        return Err(DockerError::BuildFailed {
                            step: None,
                            message: error,
                            output: Vec::new(),
                        });
                    }
                    Err(e) => return Err(classify(e)),
                };
                if let Some(aux) = info.aux.and_then(|a| a.id) {
                    id = Some(aux);
                }
                // The classic builder colours what a step writes to stderr; gpuenv's output has none.
                if let Some(text) = info.stream.map(|t| crate::text::strip_ansi(&t)) {
                    if let Some(rest) = text.trim().strip_prefix("Successfully built ") {
                        short = Some(rest.trim().to_string());
                    }
                    progress(Progress::Build(text));
                } else if info.status.is_some() {
                    let d = info.progress_detail.unwrap_or_default();
                    progress(layer_event(info.id, info.status, d.current, d.total));
                }
            }
            // Engines before API 1.30 do not send the id as `aux`; the short id serves.
            id.or(short)
                .ok_or_else(|| DockerError::Api("the build ended without naming the image it made".into()))
        })?
    }

    fn tag(&self, image: &str, name: &Reference) -> Result<(), DockerError> {
        let options = TagImageOptions {
            repo: Some(name.name()),
            tag: Some(name.tag_or_latest().unwrap_or("latest").to_string()),
        };
        self.rt
            .block_on(self.docker.tag_image(image, Some(options)))
            .map_err(classify)
    }

    fn inspect(&self, name: &str) -> Result<Option<ImageDetails>, DockerError> {
        match self.rt.block_on(self.docker.inspect_image(name)) {
            Ok(i) => {
                let config = i.config.unwrap_or_default();
                Ok(Some(ImageDetails {
                    id: i.id.unwrap_or_default(),
                    repo_tags: i.repo_tags.unwrap_or_default(),
                    repo_digests: i.repo_digests.unwrap_or_default(),
                    size: i.size.and_then(|s| u64::try_from(s).ok()),
                    labels: config.labels.unwrap_or_default().into_iter().collect(),
                    env: config.env.unwrap_or_default(),
                    user: config.user.unwrap_or_default(),
                    layers: i.root_fs.and_then(|r| r.layers).map_or(0, |l| l.len()),
                }))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(classify(e)),
        }
    }

    fn remove(&self, name: &str, force: bool) -> Result<bool, DockerError> {
        let options = RemoveImageOptions {
            force,
            noprune: false,
            ..RemoveImageOptions::default()
        };
        match self
            .rt
            .block_on(self.docker.remove_image(name, Some(options), None))
        {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(classify(e)),
        }
    }

    fn registry_digest(
        &self,
        image: &Reference,
        creds: Option<&Credentials>,
        deadline: &Deadline,
    ) -> Result<String, DockerError> {
        let name = image.to_string();
        let asked = self.docker.inspect_registry_image(&name, bollard_creds(creds));
        let answer = self
            .rt
            .block_on(async { tokio::time::timeout(deadline.wait(), asked).await })
            .map_err(|_| DockerError::PullTimedOut {
                image: name.clone(),
                during: "the daemon was asking the registry for the image's digest".into(),
                limit: deadline.expiry(),
            })?
            .map_err(|e| registry_error(image, e))?;
        answer.descriptor.digest.ok_or_else(|| DockerError::Registry {
            image: name,
            fault: RegistryFault::Other,
            detail: "the registry announced no digest".into(),
        })
    }

    fn pull(
        &self,
        image: &Reference,
        creds: Option<&Credentials>,
        deadline: &Deadline,
        progress: &mut dyn FnMut(Progress) -> Result<(), DockerError>,
    ) -> Result<Option<String>, DockerError> {
        let options = CreateImageOptions {
            from_image: Some(image.name()),
            // The Engine takes a digest where a tag would go.
            tag: image
                .digest
                .clone()
                .or_else(|| image.tag_or_latest().map(String::from)),
            ..CreateImageOptions::default()
        };
        self.rt.block_on(async {
            let mut stream = self
                .docker
                .create_image(Some(options), None, bollard_creds(creds));
            let mut digest = None;
            let mut during = "the daemon had not started the pull".to_string();
            // Returning drops the stream, closing the connection: the daemon cancels a pull
            // whose client went away.
            loop {
                let Ok(next) = tokio::time::timeout(deadline.wait(), stream.next()).await else {
                    return Err(DockerError::PullTimedOut {
                        image: image.to_string(),
                        during,
                        limit: deadline.expiry(),
                    });
                };
                let Some(item) = next else { break };
                let info = item.map_err(|e| registry_error(image, e))?;
                if let Some(d) = info.status.as_deref().and_then(|s| s.strip_prefix("Digest: ")) {
                    digest = Some(d.trim().to_string());
                }
                let d = info.progress_detail.unwrap_or_default();
                let event = layer_event(info.id, info.status, d.current, d.total);
                if let Progress::Layer {
                    id,
                    status,
                    current,
                    total,
                } = &event
                {
                    // The daemon's words, quoted in a message: made safe and short.
                    let said = crate::text::excerpt(&format!("layer {id} {status}"));
                    during = match (current, total) {
                        (Some(c), Some(t)) => format!("last: {said}, {c} of {t} bytes"),
                        (Some(c), None) => format!("last: {said}, {c} bytes"),
                        _ => format!("last: {said}"),
                    };
                }
                progress(event)?;
            }
            Ok(digest)
        })
    }

    fn push(
        &self,
        image: &Reference,
        creds: Option<&Credentials>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Option<String>, DockerError> {
        let options = PushImageOptions {
            tag: image.tag_or_latest().map(String::from),
            ..PushImageOptions::default()
        };
        let name = image.name();
        self.rt.block_on(async {
            let mut stream = self.docker.push_image(&name, Some(options), bollard_creds(creds));
            let mut digest = None;
            while let Some(item) = stream.next().await {
                let info = item.map_err(|e| registry_error(image, e))?;
                // `<tag>: digest: sha256:... size: 527`
                if let Some(s) = info.status.as_deref() {
                    if let Some(rest) = s.split_once("digest: ").map(|(_, r)| r) {
                        digest = rest.split_whitespace().next().map(String::from);
                    }
                }
                let d = info.progress_detail.unwrap_or_default();
                progress(layer_event(None, info.status, d.current, d.total));
            }
            Ok(digest)
        })
    }

    fn import(&self, rootfs: Vec<u8>, name: &Reference, changes: &[String]) -> Result<String, DockerError> {
        let options = CreateImageOptions {
            from_src: Some("-".into()),
            repo: Some(name.name()),
            tag: name.tag_or_latest().map(String::from),
            changes: changes.to_vec(),
            ..CreateImageOptions::default()
        };
        self.rt.block_on(async {
            let mut stream =
                self.docker
                    .create_image(Some(options), Some(bollard::body_full(rootfs.into())), None);
            while let Some(item) = stream.next().await {
                item.map_err(classify)?;
            }
            Ok::<(), DockerError>(())
        })?;
        self.inspect(&name.to_string())?
            .map(|d| d.id)
            .ok_or_else(|| DockerError::NoSuchImage(name.to_string()))
    }

    fn remove_one(&self, id: &str) -> Result<bool, DockerError> {
        let options = RemoveImageOptions {
            force: false,
            noprune: true,
            ..RemoveImageOptions::default()
        };
        match self
            .rt
            .block_on(self.docker.remove_image(id, Some(options), None))
        {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(classify(e)),
        }
    }

    fn parent(&self, image: &str) -> Result<Option<String>, DockerError> {
        // The history lists the image, then what it was built on; an image the daemon did
        // not build (pulled, or in the containerd store) shows `<missing>` there.
        match self.rt.block_on(self.docker.image_history(image)) {
            Ok(history) => Ok(history
                .get(1)
                .map(|h| h.id.clone())
                .filter(|id| id.starts_with("sha256:"))),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(classify(e)),
        }
    }

    fn remove_container(&self, id: &str) -> Result<bool, DockerError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..RemoveContainerOptions::default()
        };
        match self.rt.block_on(self.docker.remove_container(id, Some(options))) {
            Ok(()) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            // The daemon is removing it already (a cancelled build's step): gone either way.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409,
                message,
            }) if message.contains("already in progress") => Ok(true),
            Err(e) => Err(classify(e)),
        }
    }

    fn load(&self, archive: Vec<u8>) -> Result<(), DockerError> {
        let options = bollard::query_parameters::ImportImageOptions::default();
        self.rt.block_on(async {
            let mut stream = self
                .docker
                .import_image(options, bollard::body_full(archive.into()), None);
            while let Some(item) = stream.next().await {
                item.map_err(classify)?;
            }
            Ok(())
        })
    }

    fn export(&self, image: &str) -> Result<Box<dyn std::io::Read + Send>, DockerError> {
        // An unknown image is an error now, not in the middle of a read.
        if self.inspect(image)?.is_none() {
            return Err(DockerError::NoSuchImage(image.to_string()));
        }
        // The stream is driven on a thread of its own, with its own connection, and handed
        // over in chunks through a bounded channel: at most 16 chunks wait for the reader.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<bytes::Bytes, String>>(16);
        let name = image.to_string();
        std::thread::spawn(move || {
            let run = || -> Result<(), String> {
                let rt = runtime().map_err(|e| e.to_string())?;
                let docker = connect().map_err(|e| e.to_string())?;
                rt.block_on(async {
                    let docker = docker
                        .negotiate_version()
                        .await
                        .map_err(|e| classify(e).to_string())?;
                    let mut stream = docker.export_image(&name);
                    while let Some(chunk) = stream.next().await {
                        let chunk = chunk.map_err(|e| classify(e).to_string())?;
                        if tx.send(Ok(chunk)).is_err() {
                            return Ok(()); // the reader stopped early
                        }
                    }
                    Ok(())
                })
            };
            if let Err(e) = run() {
                let _ = tx.send(Err(e));
            }
        });
        Ok(Box::new(ChannelReader {
            rx,
            buf: bytes::Bytes::new(),
        }))
    }

    fn image_config(&self, name: &str) -> Result<Option<super::ImageConfigDoc>, DockerError> {
        self.config_doc(name)
    }

    fn open_paths(&self, image: &str) -> Result<Box<dyn super::PathReader + '_>, DockerError> {
        Ok(Box::new(self.paths_container(image)?))
    }

    fn read_file(&self, image: &str, path: &str, limit: u64) -> Result<Vec<u8>, DockerError> {
        let paths = Engine::open_paths(self, image)?;
        // The tar adds headers and padding around the file.
        let (_, fetched) = paths.ask(&[], &[(path.to_string(), limit.saturating_add(1 << 20))])?;
        let tar = match fetched.into_iter().next() {
            Some(Fetched::Tar(tar)) => tar,
            Some(Fetched::TooLarge) => {
                return Err(DockerError::Api(format!(
                    "`{path}` in `{image}` is larger than {limit} bytes"
                )));
            }
            _ => return Err(DockerError::Api(format!("no file `{path}` in `{image}`"))),
        };
        paths.close()?;
        first_file(&tar, limit).map_err(|why| DockerError::Api(format!("`{path}` in `{image}`: {why}")))
    }
}

/// What `stat` says of a path in a container: the daemon's `X-Docker-Container-Path-Stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathStat {
    /// Size in bytes.
    pub size: u64,
    /// Go's `os.FileMode` bits: permissions, and type bits such as [`PathStat::SYMLINK`].
    pub mode: u32,
    /// For a symbolic link, where it leads, resolved by the daemon inside the container's
    /// root (absolute, every link on the way followed); empty otherwise.
    pub link_target: String,
}

impl PathStat {
    /// Go's `os.ModeDir`.
    pub const DIR: u32 = 1 << 31;
    /// Go's `os.ModeSymlink`.
    pub const SYMLINK: u32 = 1 << 27;

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & Self::DIR != 0
    }

    /// Whether it is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.mode & Self::SYMLINK != 0
    }
}

/// What a `get` of one path brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// No such path in the image.
    Missing,
    /// A tar holding the path (a file, a link, or a directory and all it holds), its
    /// entries named from the path's last component.
    Tar(Vec<u8>),
    /// The tar grew past the limit given; the read was abandoned.
    TooLarge,
}

/// How many archive requests are in flight at once: the daemon mounts the container's
/// root for each, and more at once gain nothing on two cores.
const PATH_REQUESTS_IN_FLIGHT: usize = 8;

/// A container created from an image and never started, whose files are read through the
/// container archive API (`HEAD` and `GET /containers/{id}/archive`): a few paths of a
/// large image without exporting it. Removed by [`PathReader::close`](super::PathReader::close), or on drop.
pub struct Paths<'a> {
    engine: &'a Bollard,
    id: String,
    image: String,
    closed: bool,
    /// Let go after the container was removed (fields drop after `Drop::drop`).
    _hold: interrupt::Hold,
}

/// The label every container gpuenv creates carries, with the value `gpuenv`:
/// `docker ps -a --filter label=io.gpuenv.created-by` lists those a killed run left.
pub const CREATED_BY: &str = "io.gpuenv.created-by";

/// The labels of a container gpuenv creates: [`CREATED_BY`], and the version, the process
/// and the image, so that a leftover says which run left it and why.
pub fn container_labels(image: &str) -> std::collections::HashMap<String, String> {
    [
        (CREATED_BY, "gpuenv".to_string()),
        ("io.gpuenv.version", env!("CARGO_PKG_VERSION").to_string()),
        ("io.gpuenv.pid", std::process::id().to_string()),
        (
            "io.gpuenv.purpose",
            "read files of an image; never started".to_string(),
        ),
        ("io.gpuenv.image", image.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl Bollard {
    /// Creates the never-started container [`Paths`] reads through, labelled as gpuenv's
    /// ([`container_labels`]) so that one a killed run left can be found.
    fn paths_container(&self, image: &str) -> Result<Paths<'_>, DockerError> {
        // Taken before the container exists, let go once it is removed: a signal in
        // between waits for the removal.
        let hold = interrupt::hold().map_err(DockerError::Interrupted)?;
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            // Never started: a command is only needed because an image may have none.
            cmd: Some(vec!["/gpuenv-never-started".into()]),
            entrypoint: Some(Vec::new()),
            network_disabled: Some(true),
            labels: Some(container_labels(image)),
            ..ContainerCreateBody::default()
        };
        // Not interruptible: a create cut short may still make a container, whose id
        // would then be unknown.
        let created = self
            .rt
            .block_on(self.docker.create_container(None, body))
            .map_err(|e| {
                if is_not_found(&e) {
                    DockerError::NoSuchImage(image.to_string())
                } else {
                    classify(e)
                }
            })?;
        let paths = Paths {
            engine: self,
            id: created.id,
            image: image.to_string(),
            closed: false,
            _hold: hold,
        };
        // A signal during the create: the container goes again at once (on drop).
        if let Some(signal) = interrupt::requested() {
            return Err(DockerError::Interrupted(signal));
        }
        Ok(paths)
    }

    /// The image's inspect document, as the Engine gives it (`None`: no such image).
    fn inspect_raw(&self, name: &str) -> Result<Option<bollard::models::ImageInspect>, DockerError> {
        match self.rt.block_on(self.docker.inspect_image(name)) {
            Ok(i) => Ok(Some(i)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(classify(e)),
        }
    }

    /// The configuration out of the Engine's inspect document, written as a config blob.
    pub(super) fn config_doc(&self, name: &str) -> Result<Option<super::ImageConfigDoc>, DockerError> {
        let Some(inspect) = self.inspect_raw(name)? else {
            return Ok(None);
        };
        let mut doc = serde_json::Map::new();
        for (key, value) in [
            ("architecture", &inspect.architecture),
            ("os", &inspect.os),
            ("variant", &inspect.variant),
        ] {
            if let Some(v) = value {
                doc.insert(key.into(), v.clone().into());
            }
        }
        if let Some(c) = &inspect.config {
            let c = serde_json::to_value(c).map_err(|e| DockerError::Api(e.to_string()))?;
            // The Engine writes absent fields as null; a config blob leaves them out.
            let c: serde_json::Map<String, serde_json::Value> = c
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            doc.insert("config".into(), c.into());
        }
        if let Some(layers) = inspect.root_fs.as_ref().and_then(|r| r.layers.clone()) {
            doc.insert(
                "rootfs".into(),
                serde_json::json!({ "type": "layers", "diff_ids": layers }),
            );
        }
        let config = serde_json::to_vec(&doc).map_err(|e| DockerError::Api(e.to_string()))?;
        Ok(Some(super::ImageConfigDoc {
            config,
            names: inspect.repo_tags.unwrap_or_default(),
        }))
    }
}

impl super::PathReader for Paths<'_> {
    /// All at once, several requests in flight.
    fn ask(
        &self,
        stats: &[String],
        gets: &[(String, u64)],
    ) -> Result<(Vec<Option<PathStat>>, Vec<Fetched>), DockerError> {
        let docker = &self.engine.docker;
        let id = self.id.as_str();
        let image = self.image.as_str();
        let stat_all = futures_util::stream::iter(stats.iter().map(|path| async move {
            let options = bollard::query_parameters::ContainerArchiveInfoOptions { path: path.clone() };
            match docker.get_container_archive_info(id, Some(options)).await {
                Ok(s) => Ok(Some(PathStat {
                    size: u64::try_from(s.size).unwrap_or(0),
                    mode: s.file_mode,
                    link_target: s.link_target,
                })),
                Err(e) if is_not_found(&e) => Ok(None),
                Err(e) => {
                    let e = said_of_stat(docker, id, path, e).await;
                    match content_fault(&e) {
                        _ if is_not_found(&e) => Ok(None),
                        Some(ContentFault::Absent) => Ok(None),
                        Some(ContentFault::Unreadable(reason)) => Err(DockerError::ImageContent {
                            image: image.to_string(),
                            path: path.clone(),
                            reason,
                        }),
                        None => Err(classify(e)),
                    }
                }
            }
        }))
        .buffered(PATH_REQUESTS_IN_FLIGHT)
        .collect::<Vec<Result<Option<PathStat>, DockerError>>>();
        let get_all = futures_util::stream::iter(gets.iter().map(|(path, limit)| async move {
            let options = DownloadFromContainerOptions { path: path.clone() };
            let mut stream = docker.download_from_container(id, Some(options));
            let mut tar = Vec::new();
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(chunk) => tar.extend_from_slice(&chunk),
                    Err(e) if is_not_found(&e) => return Ok(Fetched::Missing),
                    Err(e) => {
                        return match content_fault(&e) {
                            Some(ContentFault::Absent) => Ok(Fetched::Missing),
                            Some(ContentFault::Unreadable(reason)) => Err(DockerError::ImageContent {
                                image: image.to_string(),
                                path: path.clone(),
                                reason,
                            }),
                            None => Err(classify(e)),
                        };
                    }
                }
                if tar.len() as u64 > *limit {
                    return Ok(Fetched::TooLarge);
                }
            }
            Ok(Fetched::Tar(tar))
        }))
        .buffered(PATH_REQUESTS_IN_FLIGHT)
        .collect::<Vec<Result<Fetched, DockerError>>>();
        let (stats, gets) = self
            .engine
            .interruptible(futures_util::future::join(stat_all, get_all))?;
        Ok((
            stats.into_iter().collect::<Result<_, _>>()?,
            gets.into_iter().collect::<Result<_, _>>()?,
        ))
    }

    /// Removes the container, reporting a failure (drop removes it quietly).
    fn close(mut self: Box<Self>) -> Result<(), DockerError> {
        self.closed = true;
        self.remove()
    }
}

impl Paths<'_> {
    fn remove(&self) -> Result<(), DockerError> {
        self.engine.remove_container(&self.id).map(|_| ()).map_err(|e| {
            DockerError::Api(format!(
                "cannot remove the container {} gpuenv created to read `{}` (remove it with \
                 `docker rm -f {}`): {}",
                self.id,
                self.image,
                self.id,
                match e {
                    DockerError::Api(m) => m,
                    other => other.to_string(),
                }
            ))
        })
    }
}

impl Drop for Paths<'_> {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.remove();
        }
    }
}

/// The error of a `stat` with the daemon's reason in it. The answer to a `HEAD` has no
/// body, so its reason is empty: the same path asked with `GET` says why (its answer starts
/// with the error when the path cannot be read). The first error stands when the `GET`
/// says nothing more; a `GET` that works is dropped at its first chunk.
async fn said_of_stat(
    docker: &bollard::Docker,
    id: &str,
    path: &str,
    e: bollard::errors::Error,
) -> bollard::errors::Error {
    let silent = matches!(
        &e,
        bollard::errors::Error::DockerResponseServerError { message, .. } if message.trim().is_empty()
    );
    if !silent {
        return e;
    }
    let options = DownloadFromContainerOptions {
        path: path.to_string(),
    };
    let mut stream = docker.download_from_container(id, Some(options));
    match stream.next().await {
        Some(Err(said @ bollard::errors::Error::DockerResponseServerError { .. })) => said,
        _ => e,
    }
}

/// How the daemon failed on a path because of what the image holds there.
#[derive(Debug, PartialEq, Eq)]
enum ContentFault {
    /// A component of the path is a file, not a directory (`ENOTDIR`): the path is not
    /// there, as `stat` in the image would say.
    Absent,
    /// The daemon cannot resolve the path (its symbolic links loop): why, in words, with
    /// the daemon's storage paths taken out.
    Unreadable(String),
}

/// Tells a failure of the archive API caused by the image's content from one of the
/// daemon itself. The daemon answers both with HTTP 500 and names the path inside its own
/// storage (`/var/lib/docker/overlay2/<id>/merged/usr/local/cuda`); its words decide.
fn content_fault(e: &bollard::errors::Error) -> Option<ContentFault> {
    let bollard::errors::Error::DockerResponseServerError { message, .. } = e else {
        return None;
    };
    content_fault_of(message)
}

fn content_fault_of(message: &str) -> Option<ContentFault> {
    let lower = message.to_lowercase();
    if lower.contains("too many links") || lower.contains("too many levels of symbolic links") {
        let clean = without_daemon_paths(message);
        Some(ContentFault::Unreadable(format!(
            "its symbolic links there lead back to themselves (the daemon says: {clean})"
        )))
    } else if lower.ends_with(": not a directory") {
        Some(ContentFault::Absent)
    } else {
        None
    }
}

/// A daemon message with each path inside the daemon's storage cut down to the path in the
/// container it stands for: `.../merged/usr/local/cuda` (overlay2, fuse-overlayfs),
/// `.../rootfs/usr/local/cuda`, `.../diff/...` become `/usr/local/cuda`; any other path
/// under the daemon's data root is replaced by a phrase.
fn without_daemon_paths(message: &str) -> String {
    message
        .split(' ')
        .map(|word| {
            let start = word.find('/').unwrap_or(word.len());
            let (head, path) = word.split_at(start);
            if path.is_empty() {
                return word.to_string();
            }
            for marker in ["/merged", "/rootfs", "/diff"] {
                if let Some(at) = path.find(&format!("{marker}/")).or_else(|| {
                    path.strip_suffix(marker)
                        .or_else(|| path.strip_suffix(&format!("{marker}:")))
                        .map(str::len)
                }) {
                    let rest = &path[at + marker.len()..];
                    let rest = if rest.is_empty() || rest == ":" {
                        format!("/{rest}")
                    } else {
                        rest.to_string()
                    };
                    return format!("{head}{rest}");
                }
            }
            if path.starts_with("/var/lib/docker/") || path.contains("/docker/containers/") {
                return format!("{head}(a path in the daemon's storage)");
            }
            word.to_string()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first regular file of a tar, bounded.
fn first_file(tar: &[u8], limit: u64) -> Result<Vec<u8>, String> {
    let mut archive = tar::Archive::new(tar);
    let entries = archive.entries().map_err(|e| format!("not a tar: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("a broken tar: {e}"))?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        if entry.header().size().unwrap_or(u64::MAX) > limit {
            return Err(format!("larger than {limit} bytes"));
        }
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(entry, limit), &mut data)
            .map_err(|e| format!("a broken tar: {e}"))?;
        return Ok(data);
    }
    Err("not a regular file".into())
}

/// A `Read` over chunks arriving on a channel; the sender's error ends the read with it.
struct ChannelReader {
    rx: std::sync::mpsc::Receiver<Result<bytes::Bytes, String>>,
    buf: bytes::Bytes,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.buf.is_empty() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => self.buf = chunk,
                Ok(Err(e)) => {
                    return Err(std::io::Error::other(format!(
                        "the Docker daemon's export failed: {e}"
                    )));
                }
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_loop_is_the_images_fault_told_without_the_daemons_paths() {
        // What Docker 20.10 on fuse-overlayfs answers for `a -> a` at /usr/local/cuda.
        let said = "evalSymlinksInScope: too many links in /var/lib/docker/fuse-overlayfs/34e7a98cfa7d0c9bfcb4290c2d129215b0361944fdb9b507593d952a8a4f0d90/merged/usr/local/cuda";
        let Some(ContentFault::Unreadable(why)) = content_fault_of(said) else {
            panic!("not a content fault: {said}")
        };
        assert_eq!(
            why,
            "its symbolic links there lead back to themselves (the daemon says: \
             evalSymlinksInScope: too many links in /usr/local/cuda)"
        );
        let Some(ContentFault::Unreadable(why)) =
            content_fault_of("lstat /data/docker/overlay2/x/merged: too many levels of symbolic links")
        else {
            panic!("ELOOP in the kernel's words")
        };
        assert!(why.contains("lstat /: too many levels"), "{why}");
        // A file where a directory would be: the path is simply not there.
        assert_eq!(
            content_fault_of(
                "lstat /var/lib/docker/fuse-overlayfs/740c/merged/usr/local/cuda/bin: not a directory"
            ),
            Some(ContentFault::Absent)
        );
        // The daemon failing on its own is no fault of the image.
        assert_eq!(
            content_fault_of("mkdir /var/lib/docker/tmp: no space left on device"),
            None
        );
    }

    #[test]
    fn daemon_storage_paths_are_cut_to_the_path_in_the_container() {
        for (said, shown) in [
            (
                "lstat /var/lib/docker/overlay2/abc/merged/etc/x: too many links",
                "lstat /etc/x: too many links",
            ),
            (
                "open /run/containerd/io.containerd.runtime.v2.task/moby/abc/rootfs/etc/x: loop",
                "open /etc/x: loop",
            ),
            ("stat /var/lib/docker/overlay2/abc/diff: odd", "stat /: odd"),
            (
                "read /var/lib/docker/image/overlay2/layerdb/x: bad",
                "read (a path in the daemon's storage) bad",
            ),
            ("no paths here", "no paths here"),
            ("path=/usr/local/cuda stays", "path=/usr/local/cuda stays"),
        ] {
            assert_eq!(without_daemon_paths(said), shown, "{said}");
        }
    }

    #[test]
    fn containers_carry_the_labels_that_find_leftovers() {
        let labels = container_labels("gpuenv-proc/x:1");
        assert_eq!(labels.get(CREATED_BY).map(String::as_str), Some("gpuenv"));
        assert_eq!(labels.get("io.gpuenv.pid"), Some(&std::process::id().to_string()));
        assert_eq!(
            labels.get("io.gpuenv.image").map(String::as_str),
            Some("gpuenv-proc/x:1")
        );
        assert!(labels.contains_key("io.gpuenv.version"));
    }

    #[test]
    fn the_daemons_insecure_ranges_hold_ip_literals_only() {
        let d = DaemonRegistry {
            os: "linux".into(),
            arch: "amd64".into(),
            insecure_hosts: vec!["reg.internal:5000".into()],
            insecure_cidrs: vec![
                "127.0.0.0/8".into(),
                "::1/128".into(),
                "10.1.0.0/16".into(),
                "bad".into(),
            ],
        };
        assert!(d.insecure("127.0.0.1:5555"));
        assert!(d.insecure("127.9.9.9"));
        assert!(d.insecure("[::1]:5000"));
        assert!(d.insecure("10.1.200.3:5000"));
        assert!(!d.insecure("10.2.0.1:5000"));
        assert!(d.insecure("reg.internal:5000"));
        assert!(!d.insecure("reg.internal:5001"));
        assert!(!d.insecure("localhost.attacker.example:5000"));
        assert!(in_cidr("0.0.0.1".parse().unwrap(), "0.0.0.0/0"));
    }
}
