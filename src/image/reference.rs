//! Image references as users type them, with the transport names skopeo and podman use.
//!
//! Owns: the one reading of Docker's reference grammar ([`Reference`]: a name as written,
//! what `docker` pulls, pushes and tags), Docker Hub's defaults on top of it
//! ([`RegistryRef`]: `docker.io`, `library/`, `latest`, what the registry client and
//! `verify` read), and the transports ([`ImageRef`]: `docker-daemon:NAME`,
//! `docker://REGISTRY/NAME:TAG`, `docker-archive:PATH`, `oci-archive:PATH`, `oci:DIR` and a
//! bare `NAME` for the local daemon). Must not: check that the image exists, open files,
//! or resolve names against a daemon.
//!
//! The registry grammar is Docker's (distribution/reference): a first component with a
//! `.` or `:`, or `localhost`, is a registry host; repository components are lowercase
//! alphanumerics joined by `.`, `_`, `__` or runs of `-`; a tag is up to 128 of
//! `[A-Za-z0-9_.-]` not starting with `.` or `-`; a digest is `sha256:` and 64 lowercase
//! hex digits. A [`Reference`] keeps a tag and a digest both, as written; a
//! [`RegistryRef`] lets the digest win. A reference that breaks the grammar is bad input:
//! the daemon would refuse it anyway, with a less helpful message. Archive transports take
//! an optional `:NAME` after the path to pick one image of several (skopeo's
//! `docker-archive:PATH:REF`), so the path itself cannot hold a `:`.

use std::fmt;
use std::path::PathBuf;

use super::digest::Digest;

/// Where Docker Hub's images live, and what `docker login` writes for it.
pub use crate::credentials::DOCKER_HUB;

/// What the user typed is not an image reference: the message names the input and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image {what} `{input}`: {reason}")]
pub struct ReferenceError {
    /// `name` for a Docker name ([`Reference`], as `pull` and `--tag` take it),
    /// `reference` for one with Hub's defaults or a transport.
    pub what: &'static str,
    /// The reference as typed.
    pub input: String,
    /// Why it is not one.
    pub reason: String,
}

fn err(input: &str, reason: impl Into<String>) -> ReferenceError {
    ReferenceError {
        what: "reference",
        input: input.to_string(),
        reason: reason.into(),
    }
}

/// An image name as written, without Docker Hub's defaults: what the Engine pulls, pushes
/// and tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `127.0.0.1:5000`, `nvcr.io`; `None` for Docker Hub.
    pub registry: Option<String>,
    /// `nvidia/cuda`; `library/ubuntu` is written `ubuntu`.
    pub repository: String,
    /// `12.4.1-base-ubuntu22.04`.
    pub tag: Option<String>,
    /// `sha256:...`.
    pub digest: Option<String>,
}

impl Reference {
    /// The same image on a mirror registry `mirror` (`HOST[:PORT]`): Docker Hub's official
    /// images keep their `library/` prefix there, other registries' paths are kept as they
    /// are. `None` when `mirror` is no registry host (it needs a `.`, a port, or to be
    /// `localhost`, or it would read as a Hub namespace).
    pub fn mirrored(&self, mirror: &str) -> Option<Reference> {
        let probe = Reference::parse(&format!("{mirror}/x"))
            .ok()
            .filter(|r| r.registry.is_some() && r.repository == "x")?;
        let repository = if self.registry.is_none() && !self.repository.contains('/') {
            format!("library/{}", self.repository)
        } else {
            self.repository.clone()
        };
        Some(Reference {
            registry: probe.registry,
            repository,
            ..self.clone()
        })
    }

    /// Parses `[REGISTRY/]NAME[:TAG][@DIGEST]` as written (no trimming, no defaults).
    pub fn parse(input: &str) -> Result<Reference, ReferenceError> {
        Reference::read(input).map_err(|reason| ReferenceError {
            what: "name",
            input: input.to_string(),
            reason,
        })
    }

    /// The grammar; the error is the reason alone.
    fn read(text: &str) -> Result<Reference, String> {
        if text.is_empty() {
            return Err("it is empty".into());
        }
        if text.len() > 512 {
            return Err("longer than 512 characters".into());
        }
        if let Some(bad) = text.find(|c: char| c.is_whitespace()) {
            return Err(format!("whitespace at character {}", bad + 1));
        }
        let (name_tag, digest) = match text.split_once('@') {
            Some((n, d)) => {
                validate_digest(d)?;
                (n, Some(d.to_string()))
            }
            None => (text, None),
        };
        // A `:` after the last `/` starts the tag (a `:` before it is a registry port).
        let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_tag[last_slash..].find(':') {
            Some(i) => (&name_tag[..last_slash + i], Some(&name_tag[last_slash + i + 1..])),
            None => (name_tag, None),
        };
        if let Some(tag) = tag {
            validate_tag(tag)?;
        }
        let (registry, path) = match name.split_once('/') {
            Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (Some(first), rest),
            _ => (None, name),
        };
        if let Some(r) = registry {
            validate_registry(r)?;
        }
        validate_repository(path)?;
        Ok(Reference {
            registry: registry.map(str::to_string),
            repository: path.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// The registry host (`docker.io` for Docker Hub).
    pub fn registry_host(&self) -> &str {
        self.registry.as_deref().unwrap_or(DOCKER_HUB)
    }

    /// `registry/repository`, without tag or digest: what the Engine calls `fromImage`.
    pub fn name(&self) -> String {
        match &self.registry {
            Some(r) => format!("{r}/{}", self.repository),
            None => self.repository.clone(),
        }
    }

    /// The tag, `latest` when none is written and no digest pins the image.
    pub fn tag_or_latest(&self) -> Option<&str> {
        match (&self.tag, &self.digest) {
            (Some(t), _) => Some(t),
            (None, Some(_)) => None,
            (None, None) => Some("latest"),
        }
    }

    /// The same image with another tag and no digest.
    pub fn with_tag(&self, tag: &str) -> Reference {
        Reference {
            tag: Some(tag.to_string()),
            digest: None,
            ..self.clone()
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reference::parse(s)
    }
}

/// A tag or a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagOrDigest {
    /// `:2.4.0-cuda12.1-cudnn9-runtime`.
    Tag(String),
    /// `@sha256:...`.
    Digest(Digest),
}

/// An image in a registry, with Docker Hub's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRef {
    /// `docker.io`, `nvcr.io`, `localhost:5000`.
    pub registry: String,
    /// `library/ubuntu`, `nvidia/pytorch`.
    pub repository: String,
    /// The tag or digest (`latest` when neither was given).
    pub reference: TagOrDigest,
}

impl RegistryRef {
    /// Parses `[REGISTRY/]NAME[:TAG][@DIGEST]` with Docker Hub's defaults.
    pub fn parse(input: &str) -> Result<Self, ReferenceError> {
        Reference::read(input.trim())
            .map(|r| RegistryRef::from(&r))
            .map_err(|reason| err(input, reason))
    }

    /// The tag, if the reference is one.
    pub fn tag(&self) -> Option<&str> {
        match &self.reference {
            TagOrDigest::Tag(t) => Some(t),
            TagOrDigest::Digest(_) => None,
        }
    }

    /// The repository as people write it: `pytorch/pytorch`, `ubuntu` (not
    /// `library/ubuntu`), with the registry when it is not Docker Hub.
    pub fn familiar_name(&self) -> String {
        if self.registry == DOCKER_HUB {
            self.repository
                .strip_prefix("library/")
                .unwrap_or(&self.repository)
                .to_string()
        } else {
            format!("{}/{}", self.registry, self.repository)
        }
    }
}

impl From<&Reference> for RegistryRef {
    /// Docker Hub's defaults: its other host names read as `docker.io`, a one-component
    /// name there is under `library/`, a digest wins over a tag, and neither means `latest`.
    fn from(r: &Reference) -> RegistryRef {
        let registry = match r.registry.as_deref() {
            None | Some("index.docker.io" | "registry-1.docker.io") => DOCKER_HUB.to_string(),
            Some(host) => host.to_string(),
        };
        let repository = if registry == DOCKER_HUB && !r.repository.contains('/') {
            format!("library/{}", r.repository)
        } else {
            r.repository.clone()
        };
        let digest = r.digest.as_deref().and_then(|d| Digest::parse(d, "digest").ok());
        let reference = match (digest, &r.tag) {
            (Some(d), _) => TagOrDigest::Digest(d),
            (None, Some(t)) => TagOrDigest::Tag(t.clone()),
            (None, None) => TagOrDigest::Tag("latest".to_string()),
        };
        RegistryRef {
            registry,
            repository,
            reference,
        }
    }
}

impl fmt::Display for RegistryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        match &self.reference {
            TagOrDigest::Tag(t) => write!(f, ":{t}"),
            TagOrDigest::Digest(d) => write!(f, "@{d}"),
        }
    }
}

fn validate_digest(d: &str) -> Result<(), String> {
    let Some(hex) = d.strip_prefix("sha256:") else {
        return Err(format!("the digest `{d}` must start with `sha256:`"));
    };
    if Digest::from_hex(hex).is_none() {
        return Err(format!(
            "the digest `{d}` must be `sha256:` and 64 lowercase hex digits"
        ));
    }
    Ok(())
}

fn validate_tag(tag: &str) -> Result<(), String> {
    if tag.is_empty() {
        return Err("the tag after `:` is empty".into());
    }
    if tag.len() > 128 {
        return Err("the tag is longer than 128 characters".into());
    }
    if tag.starts_with(['.', '-']) {
        return Err("a tag cannot start with `.` or `-`".into());
    }
    if let Some((i, c)) = tag
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!("`{c}` at character {} of the tag is not allowed", i + 1));
    }
    Ok(())
}

fn validate_registry(host: &str) -> Result<(), String> {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !name.split('.').all(label_ok) {
        return Err(format!("`{host}` is not a registry host"));
    }
    if let Some(p) = port {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.parse::<u16>().is_err() {
            return Err(format!("`{p}` is not a port number"));
        }
    }
    Ok(())
}

fn validate_repository(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("no repository name".into());
    }
    if path.len() > 255 {
        return Err("the repository name is longer than 255 characters".into());
    }
    for comp in path.split('/') {
        if comp.is_empty() {
            return Err("an empty path component (`//` or a trailing `/`)".into());
        }
        if let Some(c) = comp.chars().find(|c| c.is_ascii_uppercase()) {
            return Err(format!(
                "repository names must be lowercase (found `{c}` in `{comp}`)"
            ));
        }
        let bytes = comp.as_bytes();
        if !bytes[0].is_ascii_alphanumeric() || !bytes[bytes.len() - 1].is_ascii_alphanumeric() {
            return Err(format!("`{comp}` must start and end with a letter or digit"));
        }
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_lowercase() || b.is_ascii_digit() {
                i += 1;
                continue;
            }
            // Separators: `.`, `_`, `__`, or a run of `-`.
            let start = i;
            while i < bytes.len() && !(bytes[i].is_ascii_lowercase() || bytes[i].is_ascii_digit()) {
                i += 1;
            }
            let sep = &comp[start..i];
            let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-');
            if !ok {
                return Err(format!(
                    "`{sep}` in `{comp}` is not a valid separator (`.`, `_`, `__` or `-`)"
                ));
            }
        }
    }
    Ok(())
}

/// Where an image is, and how to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageRef {
    /// In the local Docker daemon, by name or id (`docker-daemon:NAME`, or a bare name).
    Daemon(String),
    /// In a registry (`docker://`).
    Registry(RegistryRef),
    /// A `docker save` tar (`docker-archive:PATH[:NAME]`).
    DockerArchive {
        /// The tar file.
        path: PathBuf,
        /// Which image of the archive (a repo tag), when it holds several.
        image: Option<String>,
    },
    /// An OCI image layout as a tar (`oci-archive:PATH[:NAME]`).
    OciArchive {
        /// The tar file.
        path: PathBuf,
        /// Which image (`org.opencontainers.image.ref.name`).
        image: Option<String>,
    },
    /// An OCI image layout directory (`oci:DIR[:NAME]`).
    OciDir {
        /// The directory.
        path: PathBuf,
        /// Which image (`org.opencontainers.image.ref.name`).
        image: Option<String>,
    },
}

/// The transports understood, for messages.
pub const TRANSPORTS: &[&str] = &[
    "docker-daemon:",
    "docker://",
    "docker-archive:",
    "oci-archive:",
    "oci:",
];

/// Transports skopeo knows that gpuenv does not read.
const UNSUPPORTED: &[&str] = &[
    "containers-storage:",
    "dir:",
    "docker-archive://",
    "ostree:",
    "sif:",
    "tarball:",
];

impl ImageRef {
    /// Parses a reference; a bare name means the local daemon.
    pub fn parse(input: &str) -> Result<Self, ReferenceError> {
        let text = input.trim();
        if text.is_empty() {
            return Err(err(input, "it is empty"));
        }
        if let Some(rest) = text.strip_prefix("docker://") {
            return RegistryRef::parse(rest)
                .map(ImageRef::Registry)
                .map_err(|e| err(input, e.reason));
        }
        if let Some(rest) = text.strip_prefix("docker-daemon:") {
            return daemon_name(rest).map(ImageRef::Daemon).map_err(|r| err(input, r));
        }
        let archive = |rest: &str| -> Result<(PathBuf, Option<String>), ReferenceError> {
            let (path, image) = match rest.split_once(':') {
                Some((p, i)) => (p, Some(i)),
                None => (rest, None),
            };
            if path.is_empty() {
                return Err(err(input, "no path after the transport"));
            }
            if image.is_some_and(str::is_empty) {
                return Err(err(input, "an empty image name after the path's `:`"));
            }
            Ok((PathBuf::from(path), image.map(str::to_string)))
        };
        if let Some(rest) = text.strip_prefix("docker-archive:") {
            let (path, image) = archive(rest)?;
            return Ok(ImageRef::DockerArchive { path, image });
        }
        if let Some(rest) = text.strip_prefix("oci-archive:") {
            let (path, image) = archive(rest)?;
            return Ok(ImageRef::OciArchive { path, image });
        }
        if let Some(rest) = text.strip_prefix("oci:") {
            let (path, image) = archive(rest)?;
            return Ok(ImageRef::OciDir { path, image });
        }
        if let Some(t) = UNSUPPORTED.iter().find(|t| text.starts_with(*t)) {
            return Err(err(
                input,
                format!(
                    "the `{t}` transport is not supported; use one of {}",
                    TRANSPORTS.join(", ")
                ),
            ));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(err(
                input,
                format!(
                    "unknown transport `{scheme}://`; use one of {}",
                    TRANSPORTS.join(", ")
                ),
            ));
        }
        daemon_name(text).map(ImageRef::Daemon).map_err(|r| err(input, r))
    }
}

/// A daemon image name or id: a valid registry reference (`pytorch/pytorch:2.4.0-...`),
/// an id (`sha256:<hex>`), or a short id (12 or more hex digits).
fn daemon_name(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("no image name after `docker-daemon:`".into());
    }
    if let Some(hex) = text.strip_prefix("sha256:") {
        return Digest::from_hex(hex)
            .map(|d| d.to_string())
            .ok_or_else(|| "an image id is `sha256:` followed by 64 hex digits".to_string());
    }
    RegistryRef::parse(text)
        .map(|_| text.to_string())
        .map_err(|e| e.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(s: &str) -> RegistryRef {
        RegistryRef::parse(s).unwrap()
    }

    #[test]
    fn docker_hub_defaults() {
        let r = reg("ubuntu");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("docker.io", "library/ubuntu")
        );
        assert_eq!(r.reference, TagOrDigest::Tag("latest".into()));
        assert_eq!(r.to_string(), "docker.io/library/ubuntu:latest");
        assert_eq!(r.familiar_name(), "ubuntu");
        let r = reg("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime");
        assert_eq!(r.repository, "pytorch/pytorch");
        assert_eq!(r.tag(), Some("2.4.0-cuda12.1-cudnn9-runtime"));
        let r = reg("nvcr.io/nvidia/pytorch:24.08-py3");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("nvcr.io", "nvidia/pytorch")
        );
        assert_eq!(r.familiar_name(), "nvcr.io/nvidia/pytorch");
        let r = reg("localhost:5000/team/img");
        assert_eq!(r.registry, "localhost:5000");
        assert_eq!(r.tag(), Some("latest"));
        let r = reg("index.docker.io/library/busybox:1.36");
        assert_eq!(r.registry, "docker.io");
        let d = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let r = reg(&format!("nvidia/cuda:12.4.1-base-ubuntu22.04@{d}"));
        assert_eq!(r.reference, TagOrDigest::Digest(Digest::parse(d, "d").unwrap()));
        assert_eq!(reg("a/b__c/d-e--f.g").repository, "a/b__c/d-e--f.g");
    }

    #[test]
    fn transports() {
        assert_eq!(
            ImageRef::parse("busybox").unwrap(),
            ImageRef::Daemon("busybox".into())
        );
        assert_eq!(
            ImageRef::parse("docker-daemon:pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime").unwrap(),
            ImageRef::Daemon("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime".into())
        );
        match ImageRef::parse("docker://nvcr.io/nvidia/pytorch:24.08-py3").unwrap() {
            ImageRef::Registry(r) => assert_eq!(r.tag(), Some("24.08-py3")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            ImageRef::parse("docker-archive:/tmp/img.tar").unwrap(),
            ImageRef::DockerArchive {
                path: "/tmp/img.tar".into(),
                image: None
            }
        );
        assert_eq!(
            ImageRef::parse("docker-archive:/tmp/img.tar:busybox:latest").unwrap(),
            ImageRef::DockerArchive {
                path: "/tmp/img.tar".into(),
                image: Some("busybox:latest".into())
            }
        );
        assert_eq!(
            ImageRef::parse("oci-archive:img.tar").unwrap(),
            ImageRef::OciArchive {
                path: "img.tar".into(),
                image: None
            }
        );
        assert_eq!(
            ImageRef::parse("oci:./layout:v1").unwrap(),
            ImageRef::OciDir {
                path: "./layout".into(),
                image: Some("v1".into())
            }
        );
        let id = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(ImageRef::parse(id).unwrap(), ImageRef::Daemon(id.into()));
    }

    #[test]
    fn clear_errors() {
        for (input, needle) in [
            ("", "empty"),
            ("Ubuntu", "lowercase"),
            ("ubuntu:", "tag after `:` is empty"),
            ("ubuntu:-x", "cannot start"),
            ("ubuntu:a/b", "port"),
            ("ubuntu:a&b", "`&` at character 2"),
            ("docker://", "empty"),
            ("docker://a//b", "empty path component"),
            ("docker://a..b/c", "not a registry host"),
            ("docker://x/a..b", "separator"),
            ("docker://host:99999/x", "port"),
            ("docker-archive:", "no path"),
            ("oci-archive:x.tar:", "empty image name"),
            ("containers-storage:foo", "not supported"),
            ("http://x/y", "unknown transport"),
            ("my image", "whitespace"),
            ("sha256:abc", "64 hex digits"),
            ("busybox@sha256:zz", "sha256"),
            ("-x", "start and end"),
        ] {
            let e = ImageRef::parse(input).unwrap_err();
            assert!(e.to_string().contains(needle), "{input}: {e}");
            assert!(e.to_string().starts_with("invalid image reference"), "{e}");
        }
    }

    #[test]
    fn parses_what_people_write() {
        let r = Reference::parse("nvidia/cuda:12.4.1-base-ubuntu22.04").unwrap();
        assert_eq!(r.registry, None);
        assert_eq!(r.repository, "nvidia/cuda");
        assert_eq!(r.tag.as_deref(), Some("12.4.1-base-ubuntu22.04"));
        assert_eq!(r.registry_host(), "docker.io");
        let r = Reference::parse("127.0.0.1:5555/gpuenv-test/base").unwrap();
        assert_eq!(r.registry.as_deref(), Some("127.0.0.1:5555"));
        assert_eq!(r.tag_or_latest(), Some("latest"));
        assert_eq!(r.name(), "127.0.0.1:5555/gpuenv-test/base");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("nvcr.io/nvidia/pytorch:24.08-py3@{d}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        assert_eq!(r.to_string(), format!("nvcr.io/nvidia/pytorch:24.08-py3@{d}"));
        let r = Reference::parse(&format!("ubuntu@{d}")).unwrap();
        assert_eq!(r.tag_or_latest(), None);
        assert_eq!(
            Reference::parse("localhost/a").unwrap().registry.as_deref(),
            Some("localhost")
        );
        assert!(Reference::parse("a__b/c--d.e_f:v1.0_x-y").is_ok());
    }

    #[test]
    fn refuses_what_the_daemon_would() {
        for bad in [
            "",
            "Nvidia/cuda",
            "nvidia/cuda:",
            "nvidia/cuda:-x",
            "a//b",
            "a/",
            "a/b@sha256:xyz",
            "a/b@md5:00",
            "host:99999/a",
            "a b",
            "a/b:t@",
            "-a/b",
            "a..b",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?} accepted");
        }
        let e = Reference::parse("Nvidia/cuda").unwrap_err();
        assert!(e.to_string().contains("invalid image name `Nvidia/cuda`"), "{e}");
    }

    proptest::proptest! {
        /// Any text (control characters, any script, `--tag` and `pull IMAGE` as typed) is
        /// read or refused, never a panic; what is read prints back as itself.
        #[test]
        fn any_text_is_read_or_refused(text in proptest::prelude::any::<String>(), near in "[a-zé卡0-9./:@_-]{0,40}") {
            for t in [&text, &near] {
                if let Ok(r) = Reference::parse(t) {
                    proptest::prop_assert_eq!(Reference::parse(&r.to_string()), Ok(r));
                }
            }
        }

        /// What the grammar allows is read, and prints as written.
        #[test]
        fn written_references_read_back(
            registry in proptest::option::of(("[a-z0-9]{1,8}(\\.[a-z0-9]{1,8}){0,2}", proptest::option::of(1u16..))),
            components in proptest::collection::vec("[a-z0-9]{1,6}(([._]|__|-{1,3})[a-z0-9]{1,6}){0,2}", 1..4),
            tag in proptest::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,30}"),
            digest in proptest::option::of("[0-9a-f]{64}"),
        ) {
            // Without a registry written, a first path component with a `.` is read as one
            // (the grammar's rule, tested above), so none is generated.
            proptest::prop_assume!(registry.is_some() || components.len() == 1 || !components[0].contains('.'));
            let mut text = String::new();
            let registry = registry.map(|(host, port)| match port {
                Some(p) => format!("{host}:{p}"),
                // A first component without `.` or `:` would be a path component.
                None => format!("{host}.io"),
            });
            if let Some(r) = &registry {
                text.push_str(r);
                text.push('/');
            }
            text.push_str(&components.join("/"));
            if let Some(t) = &tag {
                text.push(':');
                text.push_str(t);
            }
            if let Some(d) = &digest {
                text.push_str("@sha256:");
                text.push_str(d);
            }
            let r = Reference::parse(&text).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert_eq!(r.to_string(), text);
            proptest::prop_assert_eq!(r.registry, registry);
            proptest::prop_assert_eq!(r.tag, tag);
        }
    }
}
