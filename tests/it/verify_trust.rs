//! `gpuenv verify` never says pass without the facts: claims read from tags whatever the
//! registry or namespace (and never from look-alikes), a pass that says when no claim was
//! checked, a claim with nothing to compare that fails, torch's CUDA wheels that are not
//! installed, and targets without a driver or a GPU. Every image is built here and read
//! from an archive or an OCI layout the test writes: no daemon.

use serde_json::Value;

use super::image::{base_layer, ngc_image_named, version_py};
use super::image_build::*;
use crate::support::{fixture, gpuenv, gpuenv_env, json};

const SP: &str = "opt/conda/lib/python3.11/site-packages";
const X86: &str = "platform_system == \"Linux\" and platform_machine == \"x86_64\"";

/// A torch install: its version, CUDA, the `Requires-Dist` lines of its metadata, and the
/// `dist-info` directories installed beside it.
struct Torch<'a> {
    version: &'a str,
    cuda: Option<&'a str>,
    requires: Vec<String>,
    installed: &'a [&'a str],
}

/// `pin ; <Linux x86_64 marker>`, as torch's PyPI wheels write their CUDA pins.
fn x86(pin: &str) -> String {
    format!("{pin} ; {X86}")
}

/// torch 2.4.1+cu124 as pip installs it from PyPI: cuDNN, NCCL and the CUDA runtime pinned
/// and installed.
fn cu124() -> Torch<'static> {
    Torch {
        version: "2.4.1+cu124",
        cuda: Some("12.4"),
        requires: vec![
            x86("nvidia-cudnn-cu12==9.1.0.70"),
            x86("nvidia-nccl-cu12==2.20.5"),
            x86("nvidia-cuda-runtime-cu12==12.4.127"),
        ],
        installed: &[
            "nvidia_cudnn_cu12-9.1.0.70",
            "nvidia_nccl_cu12-2.20.5",
            "nvidia_cuda_runtime_cu12-12.4.127",
        ],
    }
}

fn metadata(version: &str, requires: &[String]) -> Vec<u8> {
    let mut s = format!("Metadata-Version: 2.1\nName: torch\nVersion: {version}\nRequires-Dist: filelock\n");
    for r in requires {
        s.push_str(&format!("Requires-Dist: {r}\n"));
    }
    s.push_str("\nTensors and Dynamic neural networks in Python\n");
    s.into_bytes()
}

/// The layers of a pytorch/pytorch-style image (conda in /opt/conda) holding `torch`,
/// plus `files` in a last layer.
fn layers(torch: Option<&Torch>, files: &[(&str, &[u8])]) -> Vec<Vec<u8>> {
    let conda = layer(&[
        E::File("opt/conda/bin/python3.11", b"\x7fELF"),
        E::Symlink("opt/conda/bin/python", "python3.11"),
        E::File(
            "opt/conda/conda-meta/python-3.11.9-hb806964_0_cpython.json",
            b"{}",
        ),
        E::File("opt/conda/lib/python3.11/os.py", b"# os"),
        E::Dir(SP),
    ]);
    let mut out = vec![base_layer(), conda];
    if let Some(t) = torch {
        let mut owned: Vec<(String, Vec<u8>)> = vec![
            (format!("{SP}/torch/version.py"), version_py(t.version, t.cuda)),
            (
                format!("{SP}/torch-{}.dist-info/METADATA", t.version),
                metadata(t.version, &t.requires),
            ),
        ];
        for dist in t.installed {
            owned.push((
                format!("{SP}/{dist}.dist-info/METADATA"),
                b"Metadata-Version: 2.1\n".to_vec(),
            ));
        }
        let entries: Vec<E> = owned.iter().map(|(p, d)| E::File(p, d)).collect();
        out.push(layer(&entries));
    }
    if !files.is_empty() {
        let entries: Vec<E> = files.iter().map(|(p, d)| E::File(p, d)).collect();
        out.push(layer(&entries));
    }
    out
}

fn config<'a>(env: &[&'a str], architecture: Option<&'a str>) -> Config<'a> {
    let mut all = vec!["PATH=/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"];
    all.extend_from_slice(env);
    Config {
        env: all,
        architecture,
        ..Default::default()
    }
}

/// An image under `name` written as a `docker save` archive; returns `docker-archive:PATH`.
fn archive_of(dir: &tempfile::TempDir, name: &str, c: &Config, layers: &[Vec<u8>]) -> String {
    let path = dir.path().join(format!("{}.tar", name.replace(['/', ':'], "_")));
    std::fs::write(&path, docker_save_legacy(name, c, layers, false)).unwrap();
    format!("docker-archive:{}", path.display())
}

/// The same image as an OCI archive and an OCI directory whose index names it `name`;
/// returns `oci-archive:PATH` and `oci:DIR`.
fn oci_of(dir: &tempfile::TempDir, name: &str, c: &Config, layers: &[Vec<u8>]) -> [String; 2] {
    let img = oci_image(c, layers, layers);
    let desc = manifest_descriptor(&img.manifest, None, Some(name));
    let stem = name.replace(['/', ':'], "_");
    let tar = dir.path().join(format!("{stem}.oci.tar"));
    std::fs::write(
        &tar,
        oci_archive(std::slice::from_ref(&img), vec![desc.clone()], false),
    )
    .unwrap();
    let layout = dir.path().join(format!("{stem}.oci"));
    std::fs::create_dir_all(layout.join("blobs/sha256")).unwrap();
    for (path, data) in &img.members {
        std::fs::write(layout.join(path), data).unwrap();
    }
    std::fs::write(layout.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [desc]});
    std::fs::write(layout.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    [
        format!("oci-archive:{}", tar.display()),
        format!("oci:{}", layout.display()),
    ]
}

/// `gpuenv verify --json ARGS`: the exit code and the document.
fn verify(args: &[&str]) -> (i32, Value) {
    verify_env(args, &[])
}

fn verify_env(args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let mut a = vec!["verify", "--json"];
    a.extend_from_slice(args);
    let run = gpuenv_env(&crate::support::root(), &a, env);
    assert!(
        run.code == 0 || run.code == 1,
        "exit {}: {}",
        run.code,
        run.stderr
    );
    (run.code, json(&run))
}

fn text(args: &[&str]) -> String {
    let mut a = vec!["verify"];
    a.extend_from_slice(args);
    let run = gpuenv(&a);
    assert!(
        run.code == 0 || run.code == 1,
        "exit {}: {}",
        run.code,
        run.stderr
    );
    run.stdout
}

/// The findings with `code`, as (severity, message).
fn with_code(doc: &Value, code: &str) -> Vec<(String, String)> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .map(|f| {
            (
                f["severity"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn codes(doc: &Value) -> Vec<&str> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1. Claims from any registry or namespace, each with its source.

/// A "torch 2.8 with CUDA 12.8" tag on an image that holds 2.4.1+cu124, under mirror and
/// vendor names, read through every file transport: the lie is caught each time, and each
/// claim says where it came from.
#[test]
fn claims_are_read_from_mirror_and_vendor_names() {
    let dir = tempfile::tempdir().unwrap();
    let ls = layers(Some(&cu124()), &[]);
    let c = config(&[], None);
    for name in [
        "docker.m.daocloud.io/pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
        "registry.example.cn/vendor/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
        "localhost:5000/mirror/pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
        "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
    ] {
        let archive = archive_of(&dir, name, &c, &ls);
        let mut sources = vec![archive.clone(), format!("{archive}:{name}")];
        sources.extend(oci_of(&dir, name, &c, &ls));
        let repo = name.rsplit_once(':').unwrap().0;
        let want_source = format!("tag 2.8.0-cuda12.8-cudnn9-runtime of {repo} (pytorch/pytorch scheme)");
        for source in &sources {
            let (code, doc) = verify(&[source]);
            assert_eq!(code, 1, "{source}: {:#}", doc["findings"]);
            assert_eq!(doc["claims_source"], serde_json::json!([want_source]), "{source}");
            let claims = doc["claims"].as_array().unwrap();
            let components: Vec<&str> = claims.iter().map(|c| c["component"].as_str().unwrap()).collect();
            assert_eq!(components, ["torch", "cuda", "cudnn"], "{source}");
            for claim in claims {
                assert_eq!(claim["source"], want_source.as_str(), "{source}");
            }
            assert_eq!(doc["claims_checked"], 3);
            assert_eq!(doc["covers"], serde_json::json!(["claims", "consistency"]));
            let lies = with_code(&doc, "image-claim-mismatch");
            assert!(
                lies.iter()
                    .any(|(_, m)| m.starts_with(&want_source) && m.contains("claims torch 2.8.0")),
                "{source}: {lies:#?}"
            );
        }
        // The human report shows the source above the claims it made.
        let out = text(&[&archive]);
        assert!(out.contains(&format!("claims from {want_source}:")), "{out}");
        assert!(
            out.contains("FAIL  torch: claimed 2.8.0, found 2.4.1+cu124"),
            "{out}"
        );
    }
    // A truthful tag under a mirror's name passes, its claims checked.
    let name = "docker.m.daocloud.io/pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime";
    let archive = archive_of(&dir, name, &c, &ls);
    let (code, doc) = verify(&[&archive]);
    assert_eq!(code, 0, "{:#}", doc["findings"]);
    assert_eq!(doc["claims_checked"], 3);
    assert!(!codes(&doc).contains(&"image-claims-none"));
    assert!(
        text(&[&archive])
            .trim_end()
            .ends_with("verdict: pass (claims and consistency)")
    );
}

/// An NGC release under a mirror's name is looked up in the catalog, and its claims say so.
#[test]
fn an_ngc_release_under_a_mirror_name_is_checked_against_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "nvcr.m.daocloud.io/nvidia/pytorch:25.01-py3",
        "registry.example.cn/ngc/pytorch:25.01-py3",
    ] {
        let path = dir.path().join("ngc.tar");
        std::fs::write(&path, ngc_image_named(name)).unwrap();
        let (_, doc) = verify(&[&format!("docker-archive:{}", path.display())]);
        let source = doc["claims"][0]["source"].as_str().unwrap();
        assert!(
            source.starts_with("catalog nvcr.io/nvidia/pytorch:25.01-py3 (compat-db image/ngc-25.01"),
            "{source}"
        );
        assert!(source.ends_with("(NGC scheme)") && source.contains(name.rsplit_once(':').unwrap().0));
        assert!(
            doc["claims_checked"].as_u64().unwrap() >= 2,
            "{:#}",
            doc["claims"]
        );
    }
    // A release the catalog does not know: nothing to compare, and the report says so.
    let path = dir.path().join("ngc-unknown.tar");
    std::fs::write(&path, ngc_image_named("nvcr.io/nvidia/pytorch:25.07-py3")).unwrap();
    let (_, doc) = verify(&[&format!("docker-archive:{}", path.display())]);
    let none = with_code(&doc, "image-claims-none");
    assert_eq!(none.len(), 1, "{:#}", doc["findings"]);
    assert!(
        none[0]
            .1
            .contains("NGC release 25.07, which compat-db has no record of"),
        "{none:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 2. When no claim was checked, the report says so.

/// Tags that merely look like versions, a repository named for something else, `--no-infer`,
/// an image without a name: no claim, a pass that covers consistency only, and why.
#[test]
fn no_claim_checked_is_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let ls = layers(Some(&cu124()), &[]);
    let c = config(&[], None);
    for (name, why) in [
        (
            "registry.example.cn/vendor/pytorch:latest",
            "follows none of the known schemes",
        ),
        ("registry.example.cn/vendor/pytorch:v2", "the tag `v2`"),
        (
            "registry.example.cn/vendor/pytorch:2024.05.01",
            "the tag `2024.05.01`",
        ),
        ("docker.m.daocloud.io/pytorch/pytorch:2.8.0", "follows none"),
        (
            "registry.example.cn/vendor/trainer:2.8.0-cuda12.8-cudnn9-runtime",
            "the repository is not named `pytorch`",
        ),
    ] {
        let archive = archive_of(&dir, name, &c, &ls);
        let (code, doc) = verify(&[&archive]);
        assert_eq!(code, 0, "{name}: {:#}", doc["findings"]);
        assert_eq!(doc["claims"], serde_json::json!([]), "{name}");
        assert_eq!(doc["claims_checked"], 0);
        assert_eq!(doc["covers"], serde_json::json!(["consistency"]));
        let none = with_code(&doc, "image-claims-none");
        assert_eq!(none.len(), 1, "{name}");
        assert_eq!(none[0].0, "warning");
        assert!(
            none[0].1.starts_with("no claim was checked (no --expect, and ")
                && none[0].1.contains(why)
                && none[0].1.contains("a pass covers consistency only"),
            "{name}: {}",
            none[0].1
        );
        let out = text(&[&archive]);
        assert!(
            out.trim_end()
                .ends_with("verdict: pass of consistency only: no claim was checked"),
            "{out}"
        );
        assert!(out.contains("image-claims-none: no claim was checked"), "{out}");
    }
    // --no-infer on a well-known tag; and an image with no name at all.
    let archive = archive_of(&dir, "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime", &c, &ls);
    let (code, doc) = verify(&[&archive, "--no-infer"]);
    assert_eq!(code, 0);
    assert!(
        with_code(&doc, "image-claims-none")[0]
            .1
            .contains("(no --expect, and --no-infer)")
    );
    let img = oci_image(&c, &ls, &ls);
    let tar = dir.path().join("nameless.oci.tar");
    std::fs::write(
        &tar,
        oci_archive(
            std::slice::from_ref(&img),
            vec![manifest_descriptor(&img.manifest, None, None)],
            false,
        ),
    )
    .unwrap();
    let (code, doc) = verify(&[&format!("oci-archive:{}", tar.display())]);
    assert_eq!(code, 0);
    assert!(
        with_code(&doc, "image-claims-none")[0]
            .1
            .contains("carries no name")
    );
    // With a target, the pass covers the target too.
    let (_, doc) = verify(&[
        &archive,
        "--no-infer",
        "--driver",
        "550.54.14",
        "--gpu",
        "H100 SXM",
    ]);
    assert_eq!(doc["covers"], serde_json::json!(["consistency", "target"]));
    assert!(
        with_code(&doc, "image-claims-none")[0]
            .1
            .contains("covers consistency and the target only")
    );
}

// ---------------------------------------------------------------------------------------
// 3. A claim whose fact is absent fails.

#[test]
fn a_claim_the_image_shows_no_trace_of_fails() {
    let dir = tempfile::tempdir().unwrap();
    // torch 2.5.1 CPU: no cuDNN, no NCCL, no CUDA anywhere.
    let cpu = Torch {
        version: "2.5.1+cpu",
        cuda: None,
        requires: Vec::new(),
        installed: &[],
    };
    let archive = archive_of(
        &dir,
        "example/cpu:1",
        &config(&[], None),
        &layers(Some(&cpu), &[]),
    );
    for (expect, component) in [
        ("cudnn=9", "cudnn"),
        ("nccl=2.21", "nccl"),
        ("torch=2.5,cudnn=9", "cudnn"),
        ("cuda=12.4", "cuda"),
    ] {
        let (code, doc) = verify(&[&archive, "--expect", expect]);
        assert_eq!(code, 1, "{expect}: {:#}", doc["findings"]);
        let unchecked = with_code(&doc, "image-claim-unchecked");
        assert_eq!(unchecked.len(), 1, "{expect}: {unchecked:?}");
        assert_eq!(unchecked[0].0, "incompatible");
        assert!(
            unchecked[0].1.contains(&format!("shows no trace of {component}")),
            "{unchecked:?}"
        );
        let claim = doc["claims"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["component"] == component)
            .unwrap();
        assert_eq!(claim["matches"], Value::Null);
        assert_eq!(claim["source"], "--expect");
        let out = text(&[&archive, "--expect", expect]);
        assert!(out.contains(&format!("FAIL  {component}: claimed")), "{out}");
        assert!(out.contains("found no trace"), "{out}");
        assert!(out.trim_end().ends_with("verdict: FAIL"), "{out}");
    }
    // The claims that can be compared and hold still pass.
    let (code, doc) = verify(&[&archive, "--expect", "torch=2.5.1,python=3.11"]);
    assert_eq!(code, 0, "{:#}", doc["findings"]);
    assert_eq!(doc["claims_checked"], 2);
    // An image without os-release cannot confirm an os claim.
    let bare = archive_of(
        &dir,
        "example/bare:1",
        &config(&[], None),
        &[layer(&[E::File("usr/bin/python3.11", b"\x7fELF")])],
    );
    let (code, doc) = verify(&[&bare, "--expect", "os=ubuntu22.04"]);
    assert_eq!(code, 1);
    assert_eq!(with_code(&doc, "image-claim-unchecked").len(), 1);
}

// ---------------------------------------------------------------------------------------
// 4. torch's pinned CUDA wheels.

/// torch 2.4.1+cu124 pinning cuDNN and cuBLAS, neither installed.
fn missing_wheels() -> Torch<'static> {
    Torch {
        version: "2.4.1+cu124",
        cuda: Some("12.4"),
        requires: vec![
            x86("nvidia-cudnn-cu12==9.1.0.70"),
            x86("nvidia-cublas-cu12==12.4.2.65"),
            x86("nvidia-nccl-cu12==2.20.5"),
        ],
        installed: &["nvidia_nccl_cu12-2.20.5"],
    }
}

#[test]
fn a_pinned_cuda_wheel_that_is_not_installed_fails() {
    let dir = tempfile::tempdir().unwrap();
    let archive = archive_of(
        &dir,
        "example/missing:1",
        &config(&[], None),
        &layers(Some(&missing_wheels()), &[]),
    );
    let (code, doc) = verify(&[&archive]);
    assert_eq!(code, 1, "{:#}", doc["findings"]);
    let missing = with_code(&doc, "image-torch-wheel-missing");
    assert_eq!(missing.len(), 2, "{missing:#?}");
    assert!(missing.iter().all(|(s, _)| s == "incompatible"));
    assert!(
        missing[0].1.contains("pins nvidia-cudnn-cu12==9.1.0.70, which is not installed in /opt/conda/lib/python3.11/site-packages")
            && missing[0].1.contains("no libcudnn.so.9 is where the loader looks")
            && missing[0].1.contains("`import torch` fails"),
        "{}",
        missing[0].1
    );
    assert!(
        missing[1].1.contains("nvidia-cublas-cu12==12.4.2.65")
            && missing[1].1.contains("no libcublas.so.12 or libcublasLt.so.12"),
        "{}",
        missing[1].1
    );
    let out = text(&[&archive]);
    assert!(
        out.contains("FAIL image-torch-wheel-missing: torch 2.4.1+cu124 pins nvidia-cudnn-cu12"),
        "{out}"
    );

    // One of cuBLAS's two libraries is not enough.
    let half = archive_of(
        &dir,
        "example/half:1",
        &config(&[], None),
        &layers(
            Some(&missing_wheels()),
            &[
                ("usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", b"\x7fELF"),
                ("usr/local/cuda-12.4/lib64/libcublas.so.12.4.2.65", b"\x7fELF"),
            ],
        ),
    );
    let (code, doc) = verify(&[&half]);
    assert_eq!(code, 1);
    let missing = with_code(&doc, "image-torch-wheel-missing");
    assert_eq!(missing.len(), 1, "{missing:#?}");
    assert!(
        missing[0].1.contains("no libcublasLt.so.12 is where"),
        "{}",
        missing[0].1
    );
    assert_eq!(with_code(&doc, "image-torch-wheel-stand-in").len(), 1);
}

/// A missing wheel with a copy of its library where the loader finds it: torch loads that
/// one, and the report says which, as a warning. A copy elsewhere does not count.
#[test]
fn a_system_copy_stands_in_for_a_missing_wheel() {
    let dir = tempfile::tempdir().unwrap();
    // (files added, image Env, the stand-ins the report must name)
    type Case<'a> = (&'a [(&'a str, &'a [u8])], &'a [&'a str], &'a [&'a str]);
    let cases: [Case; 5] = [
        // The distribution's library directory and the toolkit's.
        (
            &[
                ("usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", b"\x7fELF"),
                ("usr/local/cuda-12.4/lib64/libcublas.so.12.4.2.65", b"\x7fELF"),
                (
                    "usr/local/cuda-12.4/targets/x86_64-linux/lib/libcublasLt.so.12.4.2.65",
                    b"\x7fELF",
                ),
            ],
            &[],
            &[
                "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0 (a system library directory)",
                "/usr/local/cuda-12.4/lib64/libcublas.so.12.4.2.65 (the CUDA toolkit's library directory)",
            ],
        ),
        // A directory of LD_LIBRARY_PATH.
        (
            &[
                ("opt/libs/libcudnn.so.9", b"\x7fELF"),
                ("opt/libs/libcublas.so.12", b"\x7fELF"),
                ("opt/libs/libcublasLt.so.12", b"\x7fELF"),
            ],
            &["LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/libs"],
            &["/opt/libs/libcudnn.so.9 (a directory of LD_LIBRARY_PATH)"],
        ),
        // The wheels' files left behind without their metadata, or copies in torch/lib.
        (
            &[
                (
                    "opt/conda/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                    b"\x7fELF",
                ),
                (
                    "opt/conda/lib/python3.11/site-packages/torch/lib/libcublas.so.12",
                    b"\x7fELF",
                ),
                (
                    "opt/conda/lib/python3.11/site-packages/torch/lib/libcublasLt.so.12",
                    b"\x7fELF",
                ),
            ],
            &[],
            &[
                "nvidia/cudnn/lib/libcudnn.so.9 (the wheel's directory, without its metadata)",
                "torch/lib/libcublas.so.12 (torch's own lib directory)",
            ],
        ),
        // Another major, or a directory the loader never looks in: no stand-in.
        (
            &[
                ("usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7", b"\x7fELF"),
                ("opt/libs/libcublas.so.12", b"\x7fELF"),
                ("opt/libs/libcublasLt.so.12", b"\x7fELF"),
                ("usr/local/cuda-12.4/lib64/stubs/libcudnn.so.9", b"\x7fELF"),
            ],
            &[],
            &[],
        ),
        // A copy under LD_LIBRARY_PATH for one, nothing for the other.
        (
            &[("opt/libs/libcudnn.so.9.1.0", b"\x7fELF")],
            &["LD_LIBRARY_PATH=/opt/libs/"],
            &["/opt/libs/libcudnn.so.9.1.0"],
        ),
    ];
    for (i, (files, env, stand_ins)) in cases.into_iter().enumerate() {
        let archive = archive_of(
            &dir,
            &format!("example/stand-in:{i}"),
            &config(env, None),
            &layers(Some(&missing_wheels()), files),
        );
        let (code, doc) = verify(&[&archive]);
        let found = with_code(&doc, "image-torch-wheel-stand-in");
        let missing = with_code(&doc, "image-torch-wheel-missing");
        let all_found = i < 3;
        assert_eq!(
            code,
            if all_found { 0 } else { 1 },
            "case {i}: {:#}",
            doc["findings"]
        );
        assert_eq!(missing.is_empty(), all_found, "case {i}: {missing:#?}");
        for want in stand_ins {
            assert!(
                found
                    .iter()
                    .any(|(s, m)| s == "warning" && m.contains(want) && m.contains("torch loads that")),
                "case {i}: {want} in {found:#?}"
            );
        }
        if stand_ins.is_empty() {
            assert!(found.is_empty(), "case {i}: {found:#?}");
        }
    }
}

/// Pins whose marker does not hold for the image (another machine, an extra) are not
/// required; on an arm64 image the x86_64 pins are not.
#[test]
fn pins_that_do_not_apply_are_not_required() {
    let dir = tempfile::tempdir().unwrap();
    let t = Torch {
        version: "2.4.1+cu124",
        cuda: Some("12.4"),
        requires: vec![
            x86("nvidia-nccl-cu12==2.20.5"),
            "nvidia-cudnn-cu12==9.1.0.70 ; platform_system == \"Linux\" and platform_machine == \"aarch64\""
                .into(),
            "nvidia-cusparselt-cu12==0.6.2 ; platform_system == \"Windows\"".into(),
            "nvidia-ml-py==12.560.30 ; extra == \"monitor\"".into(),
            "nvidia-nvtx-cu12==12.4.127 ; python_version < \"3.10\"".into(),
        ],
        installed: &["nvidia_nccl_cu12-2.20.5"],
    };
    let archive = archive_of(
        &dir,
        "example/markers:1",
        &config(&[], None),
        &layers(Some(&t), &[]),
    );
    let (code, doc) = verify(&[&archive]);
    assert_eq!(code, 0, "{:#}", doc["findings"]);
    assert!(
        !codes(&doc).iter().any(|c| c.starts_with("image-torch-wheel")),
        "{:#}",
        doc["findings"]
    );
    // arm64: the aarch64 pin applies and is missing; the x86_64 one does not apply.
    let t = Torch { installed: &[], ..t };
    let arm = archive_of(
        &dir,
        "example/markers:arm64",
        &config(&[], Some("arm64")),
        &layers(Some(&t), &[]),
    );
    let (code, doc) = verify(&[&arm]);
    assert_eq!(code, 1);
    let missing = with_code(&doc, "image-torch-wheel-missing");
    assert_eq!(missing.len(), 1, "{missing:#?}");
    assert!(
        missing[0].1.contains("nvidia-cudnn-cu12==9.1.0.70"),
        "{}",
        missing[0].1
    );
    // A pinned nvidia wheel gpuenv knows no library of: missing is still a failure.
    let t = Torch {
        version: "2.4.1+cu124",
        cuda: Some("12.4"),
        requires: vec![x86("nvidia-newthing-cu12==1.0.0")],
        installed: &[],
    };
    let unknown = archive_of(
        &dir,
        "example/unknown-wheel:1",
        &config(&[], None),
        &layers(Some(&t), &[]),
    );
    let (code, doc) = verify(&[&unknown]);
    assert_eq!(code, 1);
    assert!(
        with_code(&doc, "image-torch-wheel-missing")[0]
            .1
            .contains("does not know which library it brings")
    );
}

// ---------------------------------------------------------------------------------------
// 5. No pass on a target without the facts.

fn host(name: &str) -> String {
    fixture(&format!("hosts/{name}/host.json")).display().to_string()
}

#[test]
fn a_host_without_a_driver_or_a_gpu_fails_a_cuda_build() {
    let dir = tempfile::tempdir().unwrap();
    let cuda = archive_of(
        &dir,
        "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime",
        &config(&[], None),
        &layers(Some(&cu124()), &[]),
    );
    let cpu = Torch {
        version: "2.5.1+cpu",
        cuda: None,
        requires: Vec::new(),
        installed: &[],
    };
    let cpu = archive_of(
        &dir,
        "example/cpu:1",
        &config(&[], None),
        &layers(Some(&cpu), &[]),
    );
    // An nvidia/cuda-style image without torch.
    let bare_cuda = archive_of(
        &dir,
        "example/cuda-base:1",
        &config(&["CUDA_VERSION=12.4.1", "NVIDIA_REQUIRE_CUDA=cuda>=12.4"], None),
        &layers(
            None,
            &[(
                "usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127",
                b"\x7fELF",
            )],
        ),
    );
    for (fixture, lacks) in [
        ("no-gpu", "this machine has no NVIDIA driver or GPU"),
        (
            "smi-missing",
            "the driver's user-space libraries are missing (only the kernel module 535.104.05 is loaded)",
        ),
    ] {
        let facts = host(fixture);
        for image in [&cuda, &bare_cuda] {
            let (code, doc) = verify(&[image, "--host-facts", &facts]);
            assert_eq!(code, 1, "{fixture} {image}: {:#}", doc["findings"]);
            let no_gpu = with_code(&doc, "image-target-no-gpu");
            assert_eq!(no_gpu.len(), 1, "{no_gpu:#?}");
            assert_eq!(no_gpu[0].0, "incompatible");
            assert!(
                no_gpu[0].1.contains("but no GPU is usable on this host") && no_gpu[0].1.contains(lacks),
                "{fixture}: {}",
                no_gpu[0].1
            );
            assert!(!codes(&doc).contains(&"image-starts"), "{:#}", doc["findings"]);
            assert_eq!(doc["target"]["source"], "this host");
            assert!(doc["target"]["no_gpu"].is_string(), "{:#}", doc["target"]);
            assert_eq!(doc["torch_on_target"], Value::Null);
            assert!(doc["covers"].as_array().unwrap().contains(&"target".into()));
        }
        let (code, doc) = verify(&[&cuda, "--host-facts", &facts]);
        assert!(
            with_code(&doc, "image-target-no-gpu")[0]
                .1
                .starts_with("torch 2.4.1+cu124 is a CUDA 12.4 build")
        );
        assert_eq!(code, 1);
        // A CPU build runs there.
        let (code, doc) = verify(&[&cpu, "--host-facts", &facts, "--expect", "torch=2.5.1"]);
        assert_eq!(code, 0, "{fixture}: {:#}", doc["findings"]);
        assert!(
            with_code(&doc, "cpu-build")[0]
                .1
                .contains("runs on this host without a GPU")
        );
        let out = text(&[&cuda, "--host-facts", &facts]);
        assert!(out.contains("target:     this host: "), "{out}");
        assert!(out.contains(lacks), "{out}");
    }
    // The driver and the GPU named on the command line are facts again.
    let (code, doc) = verify(&[
        &cuda,
        "--host-facts",
        &host("no-gpu"),
        "--driver",
        "550.54.14",
        "--gpu",
        "H100 SXM",
    ]);
    assert_eq!(code, 0, "{:#}", doc["findings"]);
    assert_eq!(doc["target"].get("no_gpu"), None);
    // A host with a GPU and a driver that runs it passes.
    let cu121 = Torch {
        version: "2.4.1+cu121",
        cuda: Some("12.1"),
        requires: vec![x86("nvidia-cudnn-cu12==9.1.0.70")],
        installed: &["nvidia_cudnn_cu12-9.1.0.70"],
    };
    let cu121 = archive_of(
        &dir,
        "example/cu121:1",
        &config(&[], None),
        &layers(Some(&cu121), &[]),
    );
    let (code, doc) = verify(&[&cu121, "--host-facts", &host("single-a100")]);
    assert_eq!(code, 0, "{:#}", doc["findings"]);
    assert_eq!(doc["target"]["driver"], "535.104.05");
    assert!(codes(&doc).contains(&"image-starts"));
}

/// The `GPUENV_*` overrides a host went through are listed, in text and JSON.
#[test]
fn verify_host_lists_the_overrides_it_used() {
    let dir = tempfile::tempdir().unwrap();
    let cuda = archive_of(
        &dir,
        "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime",
        &config(&[], None),
        &layers(Some(&cu124()), &[]),
    );
    let facts = host("no-gpu");
    let env = [("GPUENV_DRIVER", "550.54.14"), ("GPUENV_GPUS", "H100 SXMx8")];
    let (code, doc) = verify_env(&[&cuda, "--host-facts", &facts], &env);
    assert_eq!(code, 0, "{:#}", doc["findings"]);
    assert_eq!(
        doc["target"]["overrides"],
        serde_json::json!(["GPUENV_DRIVER=550.54.14", "GPUENV_GPUS=H100 SXMx8"])
    );
    assert_eq!(doc["target"]["gpus"], serde_json::json!(["8x H100 SXM"]));
    let mut a = vec!["verify", &cuda, "--host-facts", &facts];
    a.truncate(4);
    let run = gpuenv_env(&crate::support::root(), &a, &env);
    assert!(
        run.stdout
            .contains("overrides:  GPUENV_DRIVER=550.54.14, GPUENV_GPUS=H100 SXMx8"),
        "{}",
        run.stdout
    );
    // A driver override alone leaves the host without a GPU: still no pass.
    let (code, doc) = verify_env(&[&cuda, "--host-facts", &facts], &env[..1]);
    assert_eq!(code, 1);
    assert_eq!(
        doc["target"]["overrides"],
        serde_json::json!(["GPUENV_DRIVER=550.54.14"])
    );
    assert_eq!(doc["target"]["driver"], "550.54.14");
    assert_eq!(with_code(&doc, "image-target-no-gpu").len(), 1);
    // Without overrides there is no list.
    let (_, doc) = verify(&[&cuda, "--host-facts", &facts]);
    assert_eq!(doc["target"].get("overrides"), None);
}

/// A GPU of the host that compat-db has no record of leaves torch's kernels unconfirmed.
#[test]
fn a_host_gpu_compat_db_does_not_know_is_no_pass() {
    let dir = tempfile::tempdir().unwrap();
    let cuda = archive_of(
        &dir,
        "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime",
        &config(&[], None),
        &layers(Some(&cu124()), &[]),
    );
    // The single-A100 host, its GPU renamed to one no record has.
    let recorded = std::fs::read_to_string(host("single-a100")).unwrap();
    assert!(recorded.contains("A100-SXM4-80GB"));
    let facts = dir.path().join("host.json");
    std::fs::write(&facts, recorded.replace("A100-SXM4-80GB", "Imaginary X9")).unwrap();
    let facts = facts.display().to_string();
    let (code, doc) = verify(&[&cuda, "--host-facts", &facts]);
    assert_eq!(code, 1, "{:#}", doc["findings"]);
    let unknown = with_code(&doc, "image-target-gpu-unknown");
    assert_eq!(unknown.len(), 1, "{:#}", doc["findings"]);
    assert!(unknown[0].1.contains("Imaginary X9"), "{}", unknown[0].1);
    assert!(
        doc["target"]["unknown_gpus"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g.as_str().unwrap().contains("Imaginary X9")),
        "{:#}",
        doc["target"]
    );
    // Naming the GPU on the command line replaces the host's.
    let (code, doc) = verify(&[&cuda, "--host-facts", &facts, "--gpu", "A100 SXM4 80GB"]);
    assert_eq!(code, 0, "{:#}", doc["findings"]);
}

/// `--driver` and `--gpu` are read as `query` reads them, through the same code: branches
/// as their earliest release, names by their words, counts in every form.
#[test]
fn target_flags_are_read_as_query_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let image = archive_of(
        &dir,
        "example/train:1",
        &config(&[], None),
        &layers(Some(&cu124()), &[]),
    );
    for (driver, read_as) in [
        ("535", "535.43.02"),
        // R550's first release is its first tag, 550.40.07 (before CUDA 12.4's 550.54.14).
        ("R550", "550.40.07"),
        ("r550", "550.40.07"),
        ("550.x", "550.40.07"),
    ] {
        let (_, doc) = verify(&[&image, "--driver", driver, "--gpu", "H100 SXM"]);
        assert_eq!(doc["target"]["driver"], read_as, "{driver}");
        let note = doc["target"]["readings"][0]["note"].as_str().unwrap();
        assert!(note.contains("earliest"), "{driver}: {note}");
    }
    let (_, doc) = verify(&[&image, "--driver", "535.104.05", "--gpu", "8x H800"]);
    assert_eq!(doc["target"]["driver"], "535.104.05");
    // The database the image was judged with is dated, as in every JSON document.
    let date = json(&gpuenv(&["db", "stats", "--json"]))["db_date"].clone();
    assert!(date.is_string(), "{date}");
    assert_eq!(doc["db_date"], date);
    assert_eq!(doc["target"]["gpus"], serde_json::json!(["8x H800"]));
    for gpu in ["H800x8", "8*H800", "8卡 H800", "8 x NVIDIA H800 80G"] {
        let (_, doc) = verify(&[&image, "--driver", "550.54.14", "--gpu", gpu]);
        assert_eq!(doc["target"]["gpus"], serde_json::json!(["8x H800"]), "{gpu}");
    }
    let (_, doc) = verify(&[&image, "--driver", "550.54.14", "--gpu", "A100"]);
    assert_eq!(doc["target"]["gpus"], serde_json::json!(["1x A100 80GB SXM"]));
    assert!(
        doc["target"]["readings"][0]["note"]
            .as_str()
            .unwrap()
            .contains("names 4 GPUs"),
        "{doc:#}"
    );
    let out = text(&[&image, "--driver", "535", "--gpu", "H100"]);
    assert!(
        out.contains("read:       --driver 535: `535` is a branch"),
        "{out}"
    );
    for (args, says) in [
        (
            ["--driver", "535.x.1"],
            "--driver: invalid driver version `535.x.1`",
        ),
        (["--gpu", "8x H1000"], "no gpu record named `H1000`; did you mean"),
        (["--gpu", "H100x0"], "at least 1"),
    ] {
        let mut a = vec!["verify", image.as_str()];
        a.extend_from_slice(&args);
        let run = gpuenv(&a);
        assert_eq!(run.code, 2, "{args:?}");
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
}
