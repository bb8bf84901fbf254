//! The image configuration (the `config` blob, or `docker inspect`'s `Config`).
//!
//! Owns: reading the fields detection and the runtime check use: platform, `Env`,
//! `Labels`, `Entrypoint`, `Cmd`, `User`, `WorkingDir` and `rootfs.diff_ids`. Must not:
//! judge them. Unknown fields are ignored; a field of the wrong JSON type is an error that
//! names it, because a config that lies about its shape is not one to trust.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::ImageError;
use super::digest::Digest;

/// The most bytes of config JSON accepted (real ones are a few KiB to a few hundred).
pub const MAX_CONFIG: u64 = 8 << 20;

/// What the image's configuration says.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImageConfig {
    /// `amd64`, `arm64`...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// `linux`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// `v8` for arm64...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// `Env` as written: `NAME=value` strings, in order.
    pub env: Vec<String>,
    /// `Labels`.
    pub labels: BTreeMap<String, String>,
    /// `Entrypoint`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    /// `Cmd`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    /// `User` (empty means root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `WorkingDir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// `rootfs.diff_ids`: the sha256 of each uncompressed layer, base first.
    pub diff_ids: Vec<Digest>,
}

impl ImageConfig {
    /// Parses a config blob (OCI or Docker). `what` names it in errors.
    pub fn parse(bytes: &[u8], what: &str) -> Result<Self, ImageError> {
        let malformed = |detail: String| ImageError::Malformed {
            what: what.to_string(),
            expected: "image configuration",
            detail,
        };
        let value: Value = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
        let root = value
            .as_object()
            .ok_or_else(|| malformed("expected a JSON object".into()))?;
        let string =
            |obj: &serde_json::Map<String, Value>, key: &str| -> Result<Option<String>, ImageError> {
                match obj.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(malformed(format!("`{key}` is not a string"))),
                }
            };
        let strings =
            |obj: &serde_json::Map<String, Value>, key: &str| -> Result<Option<Vec<String>>, ImageError> {
                match obj.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|v| {
                            v.as_str().map(str::to_string).ok_or_else(|| {
                                malformed(format!("`{key}` holds a value that is not a string"))
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map(Some),
                    Some(_) => Err(malformed(format!("`{key}` is not a list of strings"))),
                }
            };
        let mut out = ImageConfig {
            architecture: string(root, "architecture")?,
            os: string(root, "os")?,
            variant: string(root, "variant")?,
            ..Default::default()
        };
        // OCI says `config`; `docker inspect` says `Config`; legacy v1 JSON has both.
        let config = root.get("config").or_else(|| root.get("Config"));
        if let Some(config) = config.filter(|c| !c.is_null()) {
            let config = config
                .as_object()
                .ok_or_else(|| malformed("`config` is not an object".into()))?;
            out.env = strings(config, "Env")?.unwrap_or_default();
            out.entrypoint = strings(config, "Entrypoint")?;
            out.cmd = strings(config, "Cmd")?;
            out.user = string(config, "User")?;
            out.working_dir = string(config, "WorkingDir")?;
            match config.get("Labels") {
                None | Some(Value::Null) => {}
                Some(Value::Object(map)) => {
                    for (k, v) in map {
                        let v = v
                            .as_str()
                            .ok_or_else(|| malformed(format!("label `{k}` is not a string")))?;
                        out.labels.insert(k.clone(), v.to_string());
                    }
                }
                Some(_) => return Err(malformed("`Labels` is not an object".into())),
            }
        }
        if let Some(rootfs) = root.get("rootfs").and_then(Value::as_object) {
            if let Some(ids) = strings(rootfs, "diff_ids")? {
                out.diff_ids = ids
                    .iter()
                    .map(|id| Digest::parse(id, "rootfs.diff_ids entry"))
                    .collect::<Result<_, _>>()?;
            }
        }
        Ok(out)
    }

    /// `Env` as `(name, value)` pairs, split at the first `=`. An entry without `=` is
    /// skipped here (NVIDIA's runtime hook refuses such an environment outright).
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .filter_map(|e| e.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect()
    }

    /// The value of `name` in `Env` (the last definition wins, as in a process).
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find_map(|e| e.split_once('=').filter(|(k, _)| *k == name).map(|(_, v)| v))
    }

    /// `os/architecture[/variant]`.
    pub fn platform(&self) -> String {
        let mut p = format!(
            "{}/{}",
            self.os.as_deref().unwrap_or("?"),
            self.architecture.as_deref().unwrap_or("?")
        );
        if let Some(v) = &self.variant {
            p.push('/');
            p.push_str(v);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_oci_and_docker_shapes() {
        let c = ImageConfig::parse(
            br#"{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/bin","NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471","BAD"],"Entrypoint":["/opt/nvidia/nvidia_entrypoint.sh"],"User":"","Labels":{"com.nvidia.cudnn.version":"9.1.0.70-1"}},"rootfs":{"type":"layers","diff_ids":["sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"]}}"#,
            "config",
        )
        .unwrap();
        assert_eq!(c.platform(), "linux/amd64");
        assert_eq!(c.env_var("NVIDIA_REQUIRE_CUDA").unwrap().split(' ').count(), 2);
        assert_eq!(c.env_pairs().len(), 2);
        assert_eq!(c.labels["com.nvidia.cudnn.version"], "9.1.0.70-1");
        assert_eq!(c.diff_ids.len(), 1);
        let d = ImageConfig::parse(br#"{"Config":{"Env":null,"Cmd":["bash"]}}"#, "inspect").unwrap();
        assert_eq!(d.cmd, Some(vec!["bash".to_string()]));
    }

    #[test]
    fn wrong_shapes_are_named() {
        for (bytes, needle) in [
            (&br#"[]"#[..], "JSON object"),
            (br#"{"config":{"Env":"PATH=/"}}"#, "`Env`"),
            (br#"{"config":{"Labels":{"a":1}}}"#, "label `a`"),
            (br#"{"rootfs":{"diff_ids":["md5:00"]}}"#, "sha256"),
            (b"{", "EOF"),
        ] {
            let e = ImageConfig::parse(bytes, "config").unwrap_err();
            assert!(e.to_string().contains(needle), "{e}");
        }
    }
}
