//! Image references as users type them, with the transport names skopeo and podman use.
//!
//! Owns: parsing `docker-daemon:NAME`, `docker://REGISTRY/NAME:TAG`, `docker-archive:PATH`,
//! `oci-archive:PATH`, `oci:DIR` and a bare `NAME` (the local daemon) into
//! [`ImageRef`], and the Docker Hub defaults (`docker.io`, `library/`, `latest`). Must
//! not: check that the image exists, open files, or resolve names against a daemon.
//!
//! The registry grammar is Docker's (distribution/reference): a first component with a
//! `.` or `:`, or `localhost`, is a registry host; repository components are lowercase
//! alphanumerics joined by `.`, `_`, `__` or runs of `-`; a tag is up to 128 of
//! `[A-Za-z0-9_.-]` not starting with `.` or `-`; a digest wins over a tag when both are
//! given. Archive transports take an optional `:NAME` after the path to pick one image of
//! several (skopeo's `docker-archive:PATH:REF`), so the path itself cannot hold a `:`.

use std::fmt;
use std::path::PathBuf;

use super::digest::Digest;

/// What the user typed is not an image reference: the message names the input and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference `{input}`: {reason}")]
pub struct ReferenceError {
    /// The reference as typed.
    pub input: String,
    /// Why it is not one.
    pub reason: String,
}

fn err(input: &str, reason: impl Into<String>) -> ReferenceError {
    ReferenceError {
        input: input.to_string(),
        reason: reason.into(),
    }
}

/// A tag or a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// `:2.4.0-cuda12.1-cudnn9-runtime`.
    Tag(String),
    /// `@sha256:...`.
    Digest(Digest),
}

/// An image in a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRef {
    /// `docker.io`, `nvcr.io`, `localhost:5000`.
    pub registry: String,
    /// `library/ubuntu`, `nvidia/pytorch`.
    pub repository: String,
    /// The tag or digest (`latest` when neither was given).
    pub reference: Reference,
}

impl RegistryRef {
    /// Parses `[REGISTRY/]NAME[:TAG][@DIGEST]` with Docker Hub's defaults.
    pub fn parse(input: &str) -> Result<Self, ReferenceError> {
        let text = input.trim();
        if text.is_empty() {
            return Err(err(input, "it is empty"));
        }
        if let Some(bad) = text.find(|c: char| c.is_whitespace()) {
            return Err(err(input, format!("whitespace at character {}", bad + 1)));
        }
        let (name_tag, digest) = match text.split_once('@') {
            Some((n, d)) => (
                n,
                Some(Digest::parse(d, "digest").map_err(|e| err(input, e.to_string()))?),
            ),
            None => (text, None),
        };
        // A `:` after the last `/` starts the tag (a `:` before it is a registry port).
        let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_tag[last_slash..].find(':') {
            Some(i) => (&name_tag[..last_slash + i], Some(&name_tag[last_slash + i + 1..])),
            None => (name_tag, None),
        };
        if let Some(tag) = tag {
            validate_tag(tag).map_err(|r| err(input, r))?;
        }
        let (registry, path) = match name.split_once('/') {
            Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
                (first.to_string(), rest)
            }
            _ => ("docker.io".to_string(), name),
        };
        let registry = if registry == "index.docker.io" || registry == "registry-1.docker.io" {
            "docker.io".to_string()
        } else {
            registry
        };
        validate_registry(&registry).map_err(|r| err(input, r))?;
        validate_repository(path).map_err(|r| err(input, r))?;
        let repository = if registry == "docker.io" && !path.contains('/') {
            format!("library/{path}")
        } else {
            path.to_string()
        };
        let reference = match (digest, tag) {
            (Some(d), _) => Reference::Digest(d),
            (None, Some(t)) => Reference::Tag(t.to_string()),
            (None, None) => Reference::Tag("latest".to_string()),
        };
        Ok(RegistryRef {
            registry,
            repository,
            reference,
        })
    }

    /// The tag, if the reference is one.
    pub fn tag(&self) -> Option<&str> {
        match &self.reference {
            Reference::Tag(t) => Some(t),
            Reference::Digest(_) => None,
        }
    }

    /// The repository as people write it: `pytorch/pytorch`, `ubuntu` (not
    /// `library/ubuntu`), with the registry when it is not Docker Hub.
    pub fn familiar_name(&self) -> String {
        if self.registry == "docker.io" {
            self.repository
                .strip_prefix("library/")
                .unwrap_or(&self.repository)
                .to_string()
        } else {
            format!("{}/{}", self.registry, self.repository)
        }
    }
}

impl fmt::Display for RegistryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        match &self.reference {
            Reference::Tag(t) => write!(f, ":{t}"),
            Reference::Digest(d) => write!(f, "@{d}"),
        }
    }
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
        assert_eq!(r.reference, Reference::Tag("latest".into()));
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
        assert_eq!(r.reference, Reference::Digest(Digest::parse(d, "d").unwrap()));
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
}
