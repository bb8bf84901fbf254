//! Image references as people write them: `nvidia/cuda:12.4.1-base-ubuntu22.04`,
//! `127.0.0.1:5000/team/img@sha256:...`, `nvcr.io/nvidia/pytorch:24.08-py3`.
//!
//! The grammar is the distribution project's: an optional registry (a first component with a
//! `.` or `:`, or `localhost`), lowercase path components joined by `/`, an optional tag
//! (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`) and an optional digest (`sha256:` and 64 hex
//! digits). A reference that breaks it is bad input: the daemon would refuse it anyway, with
//! a less helpful message.

use std::fmt;

/// Where Docker Hub's images live, and what `docker login` writes for it.
pub use crate::credentials::DOCKER_HUB;

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `127.0.0.1:5000`, `nvcr.io`; `None` for Docker Hub.
    pub registry: Option<String>,
    /// `nvidia/cuda`, `library/ubuntu` is written `ubuntu`.
    pub repository: String,
    /// `12.4.1-base-ubuntu22.04`.
    pub tag: Option<String>,
    /// `sha256:...`.
    pub digest: Option<String>,
}

/// Why a reference is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image name `{input}`: {why}")]
pub struct ReferenceError {
    /// What was given.
    pub input: String,
    /// What is wrong.
    pub why: String,
}

impl Reference {
    /// Parses a reference.
    pub fn parse(input: &str) -> Result<Reference, ReferenceError> {
        let err = |why: &str| ReferenceError {
            input: input.to_string(),
            why: why.to_string(),
        };
        if input.is_empty() {
            return Err(err("empty"));
        }
        if input.len() > 512 {
            return Err(err("longer than 512 characters"));
        }
        let (rest, digest) = match input.split_once('@') {
            Some((r, d)) => {
                check_digest(d).map_err(|w| err(&w))?;
                (r, Some(d.to_string()))
            }
            None => (input, None),
        };
        // A tag follows the last `:` after the last `/` (a `:` before it is a port).
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                (&rest[..at], Some(rest[at + 1..].to_string()))
            }
            None => (rest, None),
        };
        if let Some(t) = &tag {
            check_tag(t).map_err(|w| err(&w))?;
        }
        let mut parts: Vec<&str> = name.split('/').collect();
        let registry = if parts.len() > 1
            && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost")
        {
            let r = parts.remove(0);
            check_registry(r).map_err(|w| err(&w))?;
            Some(r.to_string())
        } else {
            None
        };
        for p in &parts {
            check_component(p).map_err(|w| err(&w))?;
        }
        let repository = parts.join("/");
        if repository.len() > 255 {
            return Err(err("the repository name is longer than 255 characters"));
        }
        Ok(Reference {
            registry,
            repository,
            tag,
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

fn check_digest(d: &str) -> Result<(), String> {
    let Some(hex) = d.strip_prefix("sha256:") else {
        return Err(format!("the digest `{d}` must start with `sha256:`"));
    };
    if hex.len() != 64
        || !hex
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    {
        return Err(format!(
            "the digest `{d}` must be `sha256:` and 64 lowercase hex digits"
        ));
    }
    Ok(())
}

fn check_tag(t: &str) -> Result<(), String> {
    let ok_first = t
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok_first || t.len() > 128 || !t.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
        return Err(format!(
            "the tag `{t}` must be 1 to 128 letters, digits, `_`, `.` or `-`, not starting with `.` or `-`"
        ));
    }
    Ok(())
}

fn check_registry(r: &str) -> Result<(), String> {
    let (host, port) = match r.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (r, None),
    };
    if let Some(p) = port {
        if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) || p.parse::<u16>().is_err() {
            return Err(format!("the registry port `{p}` is not a port number"));
        }
    }
    let ok = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if !ok {
        return Err(format!("the registry `{r}` is not a host name"));
    }
    Ok(())
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*`
fn check_component(p: &str) -> Result<(), String> {
    let bad = || {
        Err(format!(
            "the path component `{p}` must be lowercase letters and digits, joined by `.`, `_`, `__` or dashes"
        ))
    };
    if p.is_empty() {
        return Err("an empty path component (`//` or a trailing `/`)".into());
    }
    let bytes = p.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return bad();
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        // A separator run: `.`, `_`, `__`, or any number of `-`.
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &p[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.chars().all(|c| c == '-');
        if !ok {
            return bad();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
