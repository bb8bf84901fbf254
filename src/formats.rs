//! The text of files that a host and an image both hold: `/etc/os-release`, the CUDA
//! toolkit's `version.json` / `version.txt`, the cuDNN and NCCL headers, and the versions
//! that library file names carry.
//!
//! Owns: parsing those texts into model types. Must not: read files or run programs (the
//! host probes and the image readers hand it the text), or know where a text came from.
//! `host` and `image` both use it; it uses neither.

use serde::{Deserialize, Serialize};

use crate::model::{CudaVersion, CudnnVersion, NcclVersion};

/// `/etc/os-release`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsRelease {
    /// `ubuntu`.
    pub id: String,
    /// `22.04`.
    pub version_id: String,
    /// `Ubuntu 22.04.4 LTS`.
    pub pretty_name: String,
}

/// Parses `/etc/os-release`: `ID`, `VERSION_ID` and `PRETTY_NAME`, quoted (`"22.04"`,
/// `'9.3'`) or not. Missing keys are empty strings (rolling distributions have no
/// `VERSION_ID`).
pub fn os_release(text: &str) -> OsRelease {
    let mut out = OsRelease::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let slot = match key.trim() {
            "ID" => &mut out.id,
            "VERSION_ID" => &mut out.version_id,
            "PRETTY_NAME" => &mut out.pretty_name,
            _ => continue,
        };
        *slot = unquote(value.trim());
    }
    out
}

/// A shell-style value: the quotes removed and `\"`, `\\`, `\$`, `` \` `` unescaped
/// inside double quotes, as os-release(5) specifies.
fn unquote(value: &str) -> String {
    if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        return inner.to_string();
    }
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return value.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('"' | '\\' | '$' | '`')) => out.push(e),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The leading run of digits and dots of `s` (after leading whitespace), without a
/// trailing dot: `12.5` out of `12.5, V12.5.82`. Callers strip their own prefixes first.
pub(crate) fn dotted_prefix(s: &str) -> &str {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s[..end].trim_end_matches('.')
}

/// The toolkit version from `/usr/local/cuda/version.json` (CUDA 11.1 onwards):
/// the top-level `"cuda": {"version": "12.4.1"}`. A runfile's date-style patch
/// (`12.1.20230222`) is kept as written. Component versions (`cuda_cudart`...) are not
/// used as a fallback: they follow their own numbering.
pub fn cuda_version_json(text: &str) -> Option<CudaVersion> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("cuda")?.get("version")?.as_str()?.trim().parse().ok()
}

/// The toolkit version from `/usr/local/cuda/version.txt` (CUDA 11.0 and older):
/// `CUDA Version 10.2.89`.
pub fn cuda_version_txt(text: &str) -> Option<CudaVersion> {
    let (_, rest) = text.split_once("CUDA Version")?;
    dotted_prefix(rest).parse().ok()
}

/// The value of `#define NAME <number>` in a C header, first definition wins.
fn define(text: &str, name: &str) -> Option<u32> {
    text.lines().find_map(|line| {
        let rest = line
            .trim_start()
            .strip_prefix('#')?
            .trim_start()
            .strip_prefix("define")?;
        let mut words = rest.split_whitespace();
        if words.next()? != name {
            return None;
        }
        words.next()?.trim_matches(|c| c == '(' || c == ')').parse().ok()
    })
}

/// `major.minor[.patch]` from three `#define`s; the patch is optional.
fn defined_version<T: std::str::FromStr>(text: &str, names: [&str; 3]) -> Option<T> {
    let major = define(text, names[0])?;
    let minor = define(text, names[1])?;
    let version = match define(text, names[2]) {
        Some(patch) => format!("{major}.{minor}.{patch}"),
        None => format!("{major}.{minor}"),
    };
    version.parse().ok()
}

/// The cuDNN version from `CUDNN_MAJOR`/`CUDNN_MINOR`/`CUDNN_PATCHLEVEL` in
/// `cudnn_version.h` (cuDNN 8 onwards) or `cudnn.h` (cuDNN 7 and older): `9.6.0`.
pub fn cudnn_header(text: &str) -> Option<CudnnVersion> {
    defined_version(text, ["CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"])
}

/// The NCCL version from `NCCL_MAJOR`/`NCCL_MINOR`/`NCCL_PATCH` in `nccl.h`: `2.21.5`.
pub fn nccl_header(text: &str) -> Option<NcclVersion> {
    defined_version(text, ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"])
}

/// The version a library's file name carries after `stem`: `8.9.0` from
/// `libcudnn.so.8.9.0` with stem `libcudnn.so.` (or `libcudnn.so`), `2.21.5` from
/// `libnccl.so.2.21.5`. Accepts a path (the directory is ignored). `None` when nothing
/// but dotted numbers follows the stem (`libcudnn.so`, `libcudnn.so.9.bak`).
pub fn lib_version(file_name: &str, stem: &str) -> Option<String> {
    let base = file_name.rsplit('/').next()?;
    let rest = base.strip_prefix(stem)?;
    let rest = rest.strip_prefix('.').unwrap_or(rest);
    let valid = !rest.is_empty()
        && rest
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    valid.then(|| rest.to_string())
}

/// `include_str!` of a file under `tests/fixtures/host/`: the captures these texts, and
/// the host's, are tested on.
#[cfg(test)]
macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/host/",
            $path
        ))
    };
}
#[cfg(test)]
pub(crate) use fixture;

/// A value parsed from a literal the test knows to be good.
#[cfg(test)]
pub(crate) fn v<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_releases() {
        let o = os_release(fixture!("os-release/ubuntu-22.04.txt"));
        assert_eq!((o.id.as_str(), o.version_id.as_str()), ("ubuntu", "22.04"));
        assert_eq!(o.pretty_name, "Ubuntu 22.04.4 LTS");
        let o = os_release(fixture!("os-release/rocky-9.3.txt"));
        assert_eq!((o.id.as_str(), o.version_id.as_str()), ("rocky", "9.3"));
        assert_eq!(o.pretty_name, "Rocky Linux 9.3 (Blue Onyx)");
        let o = os_release(fixture!("os-release/arch.txt"));
        assert_eq!(
            (o.id.as_str(), o.version_id.as_str(), o.pretty_name.as_str()),
            ("arch", "", "Arch Linux")
        );
        let o = os_release("ID='debian'\nPRETTY_NAME=\"Say \\\"hi\\\" \\n\"\n");
        assert_eq!(o.id, "debian");
        assert_eq!(o.pretty_name, "Say \"hi\" \\n");
        assert_eq!(os_release(""), OsRelease::default());
    }

    #[test]
    fn cuda_files() {
        let j = cuda_version_json(fixture!("cuda-version/version-12.4.1.json")).unwrap();
        assert_eq!(j.to_string(), "12.4.1");
        let j = cuda_version_json(fixture!("cuda-version/version-12.1-runfile-date.json")).unwrap();
        assert_eq!(j.to_string(), "12.1.20230222");
        assert_eq!(j.major_minor(), (12, 1));
        assert_eq!(
            cuda_version_json("{\"cuda_cudart\": {\"version\": \"12.4.127\"}}"),
            None
        );
        assert_eq!(cuda_version_json("not json"), None);
        assert_eq!(
            cuda_version_txt(fixture!("cuda-version/version-10.2.89.txt")),
            Some(v("10.2.89"))
        );
        assert_eq!(cuda_version_txt("CUDA Version"), None);
    }

    #[test]
    fn headers() {
        assert_eq!(
            cudnn_header(fixture!("cudnn/cudnn_version-9.1.0.h"))
                .unwrap()
                .to_string(),
            "9.1.0"
        );
        assert_eq!(
            cudnn_header(fixture!("cudnn/cudnn-7.6.5.h")).unwrap().to_string(),
            "7.6.5"
        );
        assert_eq!(
            nccl_header(fixture!("nccl/nccl-2.21.5.h")).unwrap().to_string(),
            "2.21.5"
        );
        // cuDNN 8's cudnn.h only includes cudnn_version.h.
        assert_eq!(cudnn_header("#include \"cudnn_version.h\"\n"), None);
        assert_eq!(
            cudnn_header("#define CUDNN_MAJOR 9\n#  define CUDNN_MINOR (1)\n"),
            Some(v("9.1"))
        );
    }

    #[test]
    fn library_file_versions() {
        assert_eq!(
            lib_version("libcudnn.so.8.9.0", "libcudnn.so.").as_deref(),
            Some("8.9.0")
        );
        assert_eq!(
            lib_version("libnccl.so.2.21.5", "libnccl.so").as_deref(),
            Some("2.21.5")
        );
        assert_eq!(
            lib_version("/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", "libcudnn.so.").as_deref(),
            Some("9.1.0")
        );
        assert_eq!(lib_version("libcudnn.so", "libcudnn.so."), None);
        assert_eq!(lib_version("libcudnn.so.9.bak", "libcudnn.so."), None);
        assert_eq!(lib_version("libcudnn_ops.so.9", "libcudnn.so."), None);
        assert_eq!(lib_version("libcudnn.so.9..1", "libcudnn.so."), None);
    }
}
