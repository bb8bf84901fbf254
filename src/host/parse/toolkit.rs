//! The driver's kernel module, `nvcc`, the dynamic linker's library cache and the NVIDIA
//! Container Toolkit. The files a host and an image both hold (the toolkit's
//! `version.json`, cuDNN and NCCL headers, library file names) are read by
//! [`crate::formats`].

use super::{dotted_prefix, present};
use crate::host::types::{KernelModule, SharedLib};
use crate::model::{CudaVersion, DriverVersion};

/// Parses `/proc/driver/nvidia/version`: the version of the kernel module actually
/// loaded, which is what a CUDA program runs against (`nvidia-smi` reports the user-space
/// library, and the two differ after an upgrade without a reboot).
///
/// Reads both spellings of the `NVRM version:` line:
/// - proprietary: `NVIDIA UNIX x86_64 Kernel Module  535.104.05  <date>`
/// - open: `NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ...`
///
/// On Jetson (L4T) boards the number is the L4T release (`35.3.1`), not a driver branch;
/// it is returned as written, with `arch` saying `aarch64`, and is for the caller to read
/// as such.
pub fn proc_driver_version(text: &str) -> Option<KernelModule> {
    const LABEL: &str = "NVRM version:";
    let line = text.lines().find_map(|l| {
        let at = l.find(LABEL)?;
        Some(&l[at + LABEL.len()..])
    })?;
    let open = line.contains("Open Kernel Module");
    let words: Vec<&str> = line.split_whitespace().collect();
    // The architecture is either the word before `Kernel` (proprietary) or the one after
    // `for` (open).
    let kernel_at = words.windows(2).position(|w| w == ["Kernel", "Module"]);
    let arch = match kernel_at {
        Some(k) if words.get(k + 2) == Some(&"for") => words.get(k + 3),
        Some(k) if k > 0 && words[k - 1] != "Open" && words[k - 1] != "UNIX" => words.get(k - 1),
        _ => None,
    }
    .map(|a| a.to_string());
    // The version is the first word after the module description that is one.
    let after = kernel_at.map_or(0, |k| k + 2);
    let version = words[after.min(words.len())..]
        .iter()
        .find_map(|w| w.parse::<DriverVersion>().ok())?;
    Some(KernelModule { version, open, arch })
}

/// The toolkit version from `nvcc --version`: `12.5.82` out of
/// `Cuda compilation tools, release 12.5, V12.5.82`; the `release` (`12.5`) where the
/// `V` part is missing.
pub fn nvcc_version(text: &str) -> Option<CudaVersion> {
    let line = text.lines().find(|l| l.contains("release"))?;
    let full = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix('V'))
        .and_then(|v| dotted_prefix(v).parse().ok());
    full.or_else(|| {
        let (_, rest) = line.split_once("release")?;
        dotted_prefix(rest).parse().ok()
    })
}

/// The entries of `ldconfig -p`:
/// `\tlibcudnn.so.9 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.9`.
///
/// The first line (`N libs found in cache ...`) and any line without `=>` are skipped.
/// `abi` keeps the parenthesised flags, because 32-bit copies of the driver libraries
/// (`libc6` without `x86-64`) are listed under the same name.
pub fn ldconfig(text: &str) -> Vec<SharedLib> {
    text.lines()
        .filter_map(|line| {
            let (left, path) = line.split_once(" => ")?;
            let left = left.trim();
            let (name, abi) = match left.split_once(" (") {
                Some((name, rest)) => (name.trim(), rest.strip_suffix(')').unwrap_or(rest).trim()),
                None => (left, ""),
            };
            let path = path.trim();
            if name.is_empty() || path.is_empty() {
                return None;
            }
            Some(SharedLib {
                name: name.to_string(),
                path: path.to_string(),
                abi: abi.to_string(),
            })
        })
        .collect()
}

/// The version from `nvidia-ctk --version` (`NVIDIA Container Toolkit CLI version 1.14.3`)
/// or `nvidia-container-cli --version` (`cli-version: 1.14.3`). Pre-release suffixes are
/// kept (`1.17.0-rc.1`).
pub fn nvidia_ctk_version(text: &str) -> Option<String> {
    let word = text.lines().find_map(|line| {
        let line = line.trim();
        if let Some((_, rest)) = line.split_once("Container Toolkit CLI version") {
            return rest.split_whitespace().next();
        }
        line.strip_prefix("cli-version:")
            .and_then(|r| r.split_whitespace().next())
    })?;
    let word = present(word)?;
    let valid = word.starts_with(|c: char| c.is_ascii_digit())
        && word.contains('.')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-+~".contains(c));
    valid.then(|| word.to_string())
}

/// The device kind a CDI spec declares (`nvidia.com/gpu`), from its YAML (`kind:` at the
/// top level, as `nvidia-ctk cdi generate` writes it) or JSON (`"kind"` of the top
/// object). Docker hands GPUs to containers through CDI only when a spec of that kind is in
/// one of its spec directories; a spec of another vendor does not count.
pub fn cdi_spec_kind(text: &str) -> Option<String> {
    let valid = |k: &str| {
        let ok = k.contains('/')
            && !k.starts_with('/')
            && !k.ends_with('/')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || "./-_".contains(c));
        ok.then(|| k.to_string())
    };
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') {
        let doc: serde_json::Value = serde_json::from_str(trimmed).ok()?;
        return doc.get("kind")?.as_str().and_then(valid);
    }
    text.lines().find_map(|line| {
        // Top level only: an indented `kind:` belongs to a nested mapping.
        let rest = line.strip_prefix("kind:")?;
        let value = rest.split(" #").next().unwrap_or(rest).trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        valid(value)
    })
}

#[cfg(test)]
mod tests {
    use super::super::{fixture, v};
    use super::*;

    #[test]
    fn proc_versions() {
        let m = proc_driver_version(fixture!(
            "proc-driver-nvidia-version/proprietary-x86_64-535.104.05.txt"
        ))
        .unwrap();
        assert_eq!(m.version, v("535.104.05"));
        assert!(!m.open);
        assert_eq!(m.arch.as_deref(), Some("x86_64"));

        let m =
            proc_driver_version(fixture!("proc-driver-nvidia-version/open-x86_64-565.57.01.txt")).unwrap();
        assert_eq!(m.version.to_string(), "565.57.01");
        assert!(m.open);
        assert_eq!(m.arch.as_deref(), Some("x86_64"));

        let m = proc_driver_version(fixture!(
            "proc-driver-nvidia-version/open-aarch64-560.35.03-gh200.txt"
        ))
        .unwrap();
        assert_eq!(m.version, v("560.35.03"));
        assert!(m.open);
        assert_eq!(m.arch.as_deref(), Some("aarch64"));

        let m = proc_driver_version(fixture!(
            "proc-driver-nvidia-version/proprietary-aarch64-535.161.08.txt"
        ))
        .unwrap();
        assert_eq!(m.version, v("535.161.08"));
        assert!(!m.open);
        assert_eq!(m.arch.as_deref(), Some("aarch64"));

        let m = proc_driver_version(
            "NVRM version: NVIDIA UNIX Kernel Module for aarch64  34.1.1  Release Build\n",
        )
        .unwrap();
        assert_eq!(
            (m.version.to_string(), m.open, m.arch.as_deref()),
            ("34.1.1".into(), false, Some("aarch64"))
        );

        assert_eq!(proc_driver_version(""), None);
        assert_eq!(
            proc_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module"),
            None
        );
        assert_eq!(
            proc_driver_version("cat: /proc/driver/nvidia/version: No such file or directory"),
            None
        );
    }

    #[test]
    fn nvcc() {
        assert_eq!(
            nvcc_version(fixture!("nvcc-version/cuda-12.4.131.txt")),
            Some(v("12.4.131"))
        );
        assert_eq!(
            nvcc_version(fixture!("nvcc-version/cuda-11.8.89.txt")),
            Some(v("11.8.89"))
        );
        assert_eq!(
            nvcc_version(fixture!("nvcc-version/cuda-9.2.148.txt")),
            Some(v("9.2.148"))
        );
        assert_eq!(
            nvcc_version("Cuda compilation tools, release 8.0"),
            Some(v("8.0"))
        );
        assert_eq!(nvcc_version("bash: nvcc: command not found"), None);
    }

    #[test]
    fn ldconfig_cache() {
        let libs = ldconfig(fixture!("ldconfig/ldconfig-p.txt"));
        assert!(libs.len() > 10);
        let cudnn: Vec<_> = libs.iter().filter(|l| l.name == "libcudnn.so.9").collect();
        assert_eq!(cudnn.len(), 1);
        assert_eq!(cudnn[0].path, "/usr/lib/x86_64-linux-gnu/libcudnn.so.9");
        assert_eq!(cudnn[0].abi, "libc6,x86-64");
        let cuda: Vec<_> = libs
            .iter()
            .filter(|l| l.name == "libcuda.so.1")
            .map(|l| l.abi.as_str())
            .collect();
        assert_eq!(cuda, ["libc6,x86-64", "libc6"]);
        let with_os_abi = libs.iter().find(|l| l.name == "libm.so.6").unwrap();
        assert_eq!(with_os_abi.abi, "libc6,x86-64, OS ABI: Linux 3.2.0");
        assert!(ldconfig("").is_empty());
    }

    #[test]
    fn cdi_spec_kinds() {
        let generated = "---\ncdiVersion: 0.5.0\ncontainerEdits:\n  env:\n  - NVIDIA_VISIBLE_DEVICES=void\ndevices:\n- containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n  name: \"0\"\n- name: all\nkind: nvidia.com/gpu\n";
        assert_eq!(cdi_spec_kind(generated).as_deref(), Some("nvidia.com/gpu"));
        assert_eq!(
            cdi_spec_kind("kind: \"nvidia.com/gpu\"  # written by hand\n").as_deref(),
            Some("nvidia.com/gpu")
        );
        assert_eq!(
            cdi_spec_kind(r#"{"cdiVersion":"0.6.0","kind":"vendor.com/device","devices":[]}"#).as_deref(),
            Some("vendor.com/device")
        );
        // A nested `kind:` is not the spec's.
        assert_eq!(cdi_spec_kind("devices:\n  - kind: nvidia.com/gpu\n"), None);
        assert_eq!(cdi_spec_kind("kind: gpu\n"), None);
        assert_eq!(cdi_spec_kind("kind: nvidia.com/gpu; rm -rf /\n"), None);
        assert_eq!(cdi_spec_kind("{\"kind\": 3}"), None);
        assert_eq!(cdi_spec_kind("{not json"), None);
        assert_eq!(cdi_spec_kind(""), None);
    }

    #[test]
    fn container_toolkit() {
        assert_eq!(
            nvidia_ctk_version(fixture!("nvidia-ctk/version-1.14.3.txt")).as_deref(),
            Some("1.14.3")
        );
        assert_eq!(
            nvidia_ctk_version("cli-version: 1.17.0-rc.1\nlib-version: 1.17.0-rc.1\n").as_deref(),
            Some("1.17.0-rc.1")
        );
        assert_eq!(nvidia_ctk_version("NVIDIA Container Toolkit CLI version"), None);
        assert_eq!(
            nvidia_ctk_version("NVIDIA Container Toolkit CLI version `rm -rf`"),
            None
        );
    }
}
