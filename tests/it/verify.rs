//! `gpuenv verify`: planted lies and hazards in images built in the tests, read from an
//! archive, the daemon and a registry; the three sources agree.

use gpuenv::docker::{Engine, Reference};
use serde_json::Value;

use super::daemon;
use super::image::{UBUNTU_2204, base_layer, lying_pytorch_image, ngc_image, torch_metadata, version_py};
use super::image_build::*;
use crate::support::{gpuenv, json};

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

fn verify(args: &[&str]) -> (i32, Value) {
    let mut a = vec!["verify", "--json"];
    a.extend_from_slice(args);
    let run = gpuenv(&a);
    assert!(
        run.code == 0 || run.code == 1,
        "exit {}: {}",
        run.code,
        run.stderr
    );
    (run.code, json(&run))
}

fn codes(doc: &Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

/// torch 2.11.0+cu130 in an image whose NVIDIA_REQUIRE_CUDA only asks for CUDA 12.8.
fn cu130_behind_cuda_12_8() -> Vec<u8> {
    let sp = "usr/local/lib/python3.12/site-packages";
    let py = layer(&[
        E::File("usr/lib/os-release", UBUNTU_2204),
        E::Symlink("etc/os-release", "../usr/lib/os-release"),
        E::File("usr/local/bin/python3.12", b"\x7fELF"),
        E::File("usr/local/lib/python3.12/os.py", b"# os"),
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.11.0+cu130", Some("13.0")),
        ),
        E::File(
            &format!("{sp}/torch-2.11.0+cu130.dist-info/METADATA"),
            &torch_metadata("2.11.0+cu130", &["nvidia-cudnn-cu13==9.19.0.56"]),
        ),
        E::File(
            &format!("{sp}/nvidia_cudnn_cu13-9.19.0.56.dist-info/METADATA"),
            b"Name: nvidia-cudnn-cu13\n",
        ),
    ]);
    let c = Config {
        env: vec![
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "NVIDIA_REQUIRE_CUDA=cuda>=12.8",
            "NVIDIA_VISIBLE_DEVICES=all",
        ],
        ..Default::default()
    };
    docker_save_legacy("gpuenv-test/verify-cu130:1", &c, &[py], true)
}

/// An image whose second layer deletes the torch of the first with a whiteout and
/// installs another, in a conda layout.
fn replaced_torch() -> Vec<u8> {
    let sp = "opt/conda/lib/python3.11/site-packages";
    let old = layer(&[
        E::File("opt/conda/bin/python3.11", b"\x7fELF"),
        E::File(
            "opt/conda/conda-meta/python-3.11.9-hb806964_0_cpython.json",
            b"{}",
        ),
        E::File("opt/conda/lib/python3.11/os.py", b"# os"),
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.1.0+cu118", Some("11.8")),
        ),
        E::File(
            &format!("{sp}/torch-2.1.0+cu118.dist-info/METADATA"),
            &torch_metadata("2.1.0+cu118", &[]),
        ),
    ]);
    let new = layer(&[
        E::File(&format!("{sp}/.wh.torch"), b""),
        E::File(&format!("{sp}/.wh.torch-2.1.0+cu118.dist-info"), b""),
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.4.1+cu121", Some("12.1")),
        ),
        E::File(
            &format!("{sp}/torch-2.4.1+cu121.dist-info/METADATA"),
            &torch_metadata("2.4.1+cu121", &[]),
        ),
    ]);
    docker_save_legacy(
        "gpuenv-test/verify-replaced:1",
        &Config::default(),
        &[base_layer(), old, new],
        false,
    )
}

#[test]
fn a_tag_that_lies_fails_its_claims() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "lies.tar", &lying_pytorch_image(true));
    let (code, doc) = verify(&[&format!("docker-archive:{path}")]);
    assert_eq!(code, 1);
    assert_eq!(doc["facts"]["torch"][0]["version"]["value"], "2.4.1+cu124");
    let mismatches: Vec<&Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "image-claim-mismatch")
        .collect();
    let text: Vec<&str> = mismatches
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert!(
        text.iter()
            .any(|t| t.contains("claims torch 2.8.0") && t.contains("2.4.1+cu124")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("claims cuda 12.8") && t.contains("12.4")),
        "{text:#?}"
    );
    assert_eq!(doc["origin"]["transport"], "docker-archive");
    // The human report says it plainly.
    let run = gpuenv(&["verify", &format!("docker-archive:{path}")]);
    assert!(
        run.stdout
            .contains("FAIL  torch: claimed 2.8.0, found 2.4.1+cu124"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.trim_end().ends_with("verdict: FAIL"));
    // An explicit claim that holds passes.
    let (code, _) = verify(&[
        &format!("docker-archive:{path}"),
        "--no-infer",
        "--expect",
        "torch=2.4.1,cuda=12.4,python=3.11",
    ]);
    assert_eq!(code, 0);
}

#[test]
fn a_cu130_torch_behind_a_weaker_requirement() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "cu130.tar", &cu130_behind_cuda_12_8());
    let archive = format!("docker-archive:{path}");
    let (_, doc) = verify(&[&archive]);
    assert!(
        codes(&doc).contains(&"image-require-weaker".to_string()),
        "{:#}",
        doc["findings"]
    );
    // On a 570 driver (CUDA 12.8) the runtime starts it, and torch then cannot run on a
    // GeForce (no forward compatibility for it).
    let (code, doc) = verify(&[&archive, "--driver", "570.124.06", "--gpu", "RTX 4090"]);
    assert_eq!(code, 1);
    assert!(codes(&doc).contains(&"image-starts".to_string()));
    let stack = &doc["torch_on_target"][0];
    assert_eq!(stack["status"], "incompatible", "{stack:#}");
    // On a 535 driver (CUDA 12.2) the runtime refuses it.
    let (code, doc) = verify(&[&archive, "--driver", "535.104.05", "--gpu", "H100 SXM"]);
    assert_eq!(code, 1);
    assert!(
        codes(&doc).contains(&"image-will-not-start".to_string()),
        "{:#}",
        doc["findings"]
    );
    // On a 580 driver (CUDA 13.0) everything holds.
    let (code, doc) = verify(&[&archive, "--driver", "580.65.06", "--gpu", "H100 SXM"]);
    assert_eq!(code, 0, "{:#}", doc["findings"]);
}

#[test]
fn a_whiteout_replaces_torch() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "replaced.tar", &replaced_torch());
    let (_, doc) = verify(&[&format!("docker-archive:{path}")]);
    let torch = doc["facts"]["torch"].as_array().unwrap();
    assert_eq!(torch.len(), 1, "{torch:#?}");
    assert_eq!(torch[0]["version"]["value"], "2.4.1+cu121");
    assert_eq!(doc["facts"]["pythons"][0]["prefix"], "/opt/conda");
}

#[test]
fn an_ngc_image_is_checked_against_its_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "ngc.tar", &ngc_image());
    let (_, doc) = verify(&[&format!("docker-archive:{path}")]);
    assert!(
        doc["claims_source"][0]
            .as_str()
            .unwrap()
            .contains("compat-db image/ngc-25.01"),
        "{:#}",
        doc["claims_source"]
    );
    // NGC images declare cuda>=9.0: the runtime never enforces their real floor.
    assert!(codes(&doc).contains(&"image-require-weaker".to_string()));
    assert_eq!(doc["facts"]["cuda_compat"][0]["driver"], "570.86.10");
}

#[test]
fn bad_input_and_hostile_archives() {
    let run = gpuenv(&["verify", "docker-archive:/nonexistent/x.tar"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("cannot read archive `/nonexistent/x.tar`: no such file"),
        "{}",
        run.stderr
    );
    let run = gpuenv(&["verify", "docker://"]);
    assert_eq!(run.code, 2);
    let run = gpuenv(&["verify", "tarball:/x"]);
    assert_eq!(run.code, 2);
    let dir = tempfile::tempdir().unwrap();
    // The tar crate refuses to write `..`, so the header is written by hand.
    let mut h = tar::Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..16].copy_from_slice(b"../../etc/passwd");
    h.set_size(4);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let mut evil = h.as_bytes().to_vec();
    evil.extend_from_slice(b"root");
    evil.extend(std::iter::repeat_n(0u8, 508 + 1024));
    let path = write(
        &dir,
        "evil.tar",
        &docker_save_legacy("evil:1", &Config::default(), &[evil], false),
    );
    let run = gpuenv(&["verify", &format!("docker-archive:{path}")]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains(".."), "{}", run.stderr);
    let run = gpuenv(&["verify", &format!("docker-archive:{path}"), "--expect", "torch"]);
    assert_eq!(run.code, 2);
}

/// Everything but where it came from.
fn facts_of(doc: &Value) -> Value {
    let mut f = doc["facts"].clone();
    f.as_object_mut().unwrap().remove("platform");
    f
}

/// A conda torch 2.1.0 deleted by the whiteouts of a later layer, and 2.4.1 installed by
/// the one after (as `RUN pip uninstall` then `RUN pip install` leave it).
fn uninstalled_then_installed() -> Vec<u8> {
    let sp = "opt/conda/lib/python3.11/site-packages";
    let old = layer(&[
        E::File("opt/conda/bin/python3.11", b"\x7fELF"),
        E::Symlink("opt/conda/bin/python3", "python3.11"),
        E::File(
            "opt/conda/conda-meta/python-3.11.9-hb806964_0_cpython.json",
            b"{}",
        ),
        E::File("opt/conda/lib/python3.11/os.py", b"# os"),
        E::Dir(sp),
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.1.0+cu118", Some("11.8")),
        ),
        E::File(
            &format!("{sp}/torch-2.1.0+cu118.dist-info/METADATA"),
            &torch_metadata("2.1.0+cu118", &[]),
        ),
    ]);
    let uninstall = layer(&[
        E::File(&format!("{sp}/.wh.torch"), b""),
        E::File(&format!("{sp}/.wh.torch-2.1.0+cu118.dist-info"), b""),
    ]);
    let install = layer(&[
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.4.1+cu121", Some("12.1")),
        ),
        E::File(
            &format!("{sp}/torch-2.4.1+cu121.dist-info/METADATA"),
            &torch_metadata("2.4.1+cu121", &[]),
        ),
    ]);
    let c = Config {
        env: vec!["PATH=/opt/conda/bin:/usr/bin:/bin"],
        ..Default::default()
    };
    docker_save_legacy(
        "gpuenv-test/verify-reinstalled:1",
        &c,
        &[base_layer(), old, uninstall, install],
        false,
    )
}

/// torch pins nvidia-cudnn-cu12 9.1.0.70, and a later `pip install` put 9.5.0.50 there.
fn shadowed_cudnn() -> Vec<u8> {
    let sp = "usr/local/lib/python3.11/site-packages";
    let py = layer(&[
        E::File("usr/lib/os-release", UBUNTU_2204),
        E::File("usr/local/bin/python3.11", b"\x7fELF"),
        E::Symlink("usr/local/bin/python3", "python3.11"),
        E::File("usr/local/lib/python3.11/os.py", b"# os"),
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.4.1+cu124", Some("12.4")),
        ),
        E::File(
            &format!("{sp}/torch-2.4.1+cu124.dist-info/METADATA"),
            &torch_metadata("2.4.1+cu124", &["nvidia-cudnn-cu12==9.1.0.70"]),
        ),
    ]);
    let upgraded = layer(&[E::File(
        &format!("{sp}/nvidia_cudnn_cu12-9.5.0.50.dist-info/METADATA"),
        b"Name: nvidia-cudnn-cu12\n",
    )]);
    let c = Config {
        env: vec!["PATH=/usr/local/bin:/usr/bin:/bin"],
        ..Default::default()
    };
    docker_save_legacy(
        "gpuenv-test/verify-shadowed:1",
        &c,
        &[base_layer(), py, upgraded],
        true,
    )
}

/// torch pins cuDNN and cuBLAS wheels that are not installed; a system cuDNN 9 stands in
/// for the one, nothing for the other.
fn missing_cuda_wheels() -> Vec<u8> {
    let sp = "usr/local/lib/python3.11/site-packages";
    let py = layer(&[
        E::File("usr/lib/os-release", UBUNTU_2204),
        E::File("usr/local/bin/python3.11", b"\x7fELF"),
        E::Symlink("usr/local/bin/python3", "python3.11"),
        E::File("usr/local/lib/python3.11/os.py", b"# os"),
        E::File(
            &format!("{sp}/torch/version.py"),
            &version_py("2.4.1+cu124", Some("12.4")),
        ),
        E::File(
            &format!("{sp}/torch-2.4.1+cu124.dist-info/METADATA"),
            &torch_metadata(
                "2.4.1+cu124",
                &["nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.4.2.65"],
            ),
        ),
        E::File("usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", b"\x7fELF"),
        E::Symlink("usr/lib/x86_64-linux-gnu/libcudnn.so.9", "libcudnn.so.9.1.0"),
    ]);
    let c = Config {
        env: vec!["PATH=/usr/local/bin:/usr/bin:/bin"],
        ..Default::default()
    };
    docker_save_legacy(
        "gpuenv-test/verify-missing-wheels:1",
        &c,
        &[base_layer(), py],
        false,
    )
}

/// A local image is read by paths through a never-started container, not exported; what
/// it finds is what reading every layer finds. Where the layout calls for the layers
/// (torch without metadata, a pinned wheel at another version), they are read.
///
/// (The whiteout image is not loaded here: a layer whose `.wh.torch` is followed by a new
/// `torch/` is valid OCI, but the daemon's fuse-overlayfs driver applies it as deleting
/// the new files too, and fails to export it again.)
#[test]
fn local_images_read_by_paths_agree_with_every_layer() {
    let _guard = daemon::lock();
    let engine = daemon::engine();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, &str, Option<&str>); 6] = [
        (
            "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
            lying_pytorch_image(false),
            "paths",
            None,
        ),
        (
            "gpuenv-test/verify-cu130:1",
            cu130_behind_cuda_12_8(),
            "paths",
            None,
        ),
        (
            "gpuenv-test/verify-reinstalled:1",
            uninstalled_then_installed(),
            "paths",
            None,
        ),
        (
            "nvcr.io/nvidia/pytorch:25.01-py3",
            ngc_image(),
            "layers",
            Some(
                "has no metadata at /usr/local/lib/python3.12/dist-packages/torch-2.6.0a0+ecf3bae40a.nv25.1.dist-info",
            ),
        ),
        (
            "gpuenv-test/verify-shadowed:1",
            shadowed_cudnn(),
            "layers",
            Some(
                "torch pins nvidia-cudnn-cu12==9.1.0.70, but /usr/local/lib/python3.11/site-packages/nvidia_cudnn_cu12-9.1.0.70.dist-info is not there",
            ),
        ),
        // A missing CUDA wheel: every layer is read, so the loader's directories are seen.
        (
            "gpuenv-test/verify-missing-wheels:1",
            missing_cuda_wheels(),
            "layers",
            Some(
                "torch pins nvidia-cudnn-cu12==9.1.0.70, but /usr/local/lib/python3.11/site-packages/nvidia_cudnn_cu12-9.1.0.70.dist-info is not there",
            ),
        ),
    ];
    let containers_before = engine_containers();
    for (name, bytes, read, because) in cases {
        let path = write(&dir, "image.tar", &bytes);
        let (_, from_archive) = verify(&[&format!("docker-archive:{path}"), "--no-infer"]);
        engine.load(bytes).unwrap();
        let (_, by_paths) = verify(&[name, "--no-infer"]);
        let (_, full) = verify(&[name, "--no-infer", "--full"]);
        let text = gpuenv(&["verify", name, "--no-infer"]);
        let _ = engine.remove(name, true);
        assert_eq!(
            by_paths["origin"]["read"], read,
            "{name}: {:#}",
            by_paths["origin"]
        );

        assert_eq!(
            by_paths["origin"]["layers_because"]
                .as_str()
                .map(|b| b.contains(because.unwrap_or("-"))),
            because.map(|_| true),
            "{name}: {:#}",
            by_paths["origin"]
        );
        if read == "paths" {
            let asked = by_paths["origin"]["paths_asked"].as_u64().unwrap();
            assert!((10..150).contains(&asked), "{name}: {asked} paths");
            // The human report says how it was read.
            assert!(
                text.stdout.contains(&format!(
                    "read:       {asked} paths through a container never started"
                )),
                "{}",
                text.stdout
            );
        }
        assert_eq!(facts_of(&from_archive), facts_of(&by_paths), "{name}");
        assert_eq!(full["origin"]["read"], "layers");
        assert_eq!(facts_of(&from_archive), facts_of(&full), "{name}");
        assert_eq!(codes(&from_archive), codes(&by_paths), "{name}");
        if name.contains("missing-wheels") {
            let codes = codes(&by_paths);
            assert!(
                codes.contains(&"image-torch-wheel-missing".to_string()),
                "{codes:?}"
            );
            assert!(
                codes.contains(&"image-torch-wheel-stand-in".to_string()),
                "{codes:?}"
            );
        }
        if name.contains("reinstalled") {
            let torch = by_paths["facts"]["torch"].as_array().unwrap();
            assert_eq!(torch.len(), 1, "{torch:#?}");
            assert_eq!(torch[0]["version"]["value"], "2.4.1+cu121");
        }
    }
    // The container each read made is gone.
    assert_eq!(engine_containers(), containers_before);
}

/// How many containers the daemon has, stopped ones included.
fn engine_containers() -> usize {
    let out = std::process::Command::new("docker")
        .args(["ps", "-aq", "--no-trunc"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn the_three_sources_agree() {
    let _guard = daemon::lock();
    let engine = daemon::engine();
    let registry = daemon::registry();
    let dir = tempfile::tempdir().unwrap();
    let bytes = lying_pytorch_image(true);
    let path = write(&dir, "lies.tar", &bytes);
    let (_, from_archive) = verify(&[&format!("docker-archive:{path}"), "--no-infer"]);

    // The daemon: loaded under the archive's tag, then given a unique one.
    engine.load(bytes).unwrap();
    let local = format!("gpuenv-test/verify-lies:{}", std::process::id());
    engine
        .tag(
            "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
            &Reference::parse(&local).unwrap(),
        )
        .unwrap();
    let (_, from_daemon) = verify(&[&format!("docker-daemon:{local}"), "--no-infer"]);
    let (_, bare) = verify(&[&local, "--no-infer"]);

    // A registry: pushed to the loopback one.
    let remote = format!("{registry}/gpuenv-test/verify-lies:{}", std::process::id());
    let remote_ref = Reference::parse(&remote).unwrap();
    engine.tag(&local, &remote_ref).unwrap();
    let digest = engine
        .push(&remote_ref, None, &mut |_| {})
        .unwrap()
        .unwrap_or_default();
    let mut pushed = daemon::Pushed::new(&registry);
    pushed.add(&remote, &digest);
    let (_, from_registry) = verify(&[&format!("docker://{remote}"), "--no-infer"]);

    // Under a mirror's namespace, in the registry and in the daemon, the tag's claims are
    // read all the same, and say where they came from.
    let mirrored = format!(
        "{registry}/gpuenv-test-{}/pytorch:2.8.0-cuda12.8-cudnn9-runtime",
        std::process::id()
    );
    let mirrored_ref = Reference::parse(&mirrored).unwrap();
    engine.tag(&local, &mirrored_ref).unwrap();
    let digest2 = engine
        .push(&mirrored_ref, None, &mut |_| {})
        .unwrap()
        .unwrap_or_default();
    pushed.add(&mirrored, &digest2);
    let want = format!(
        "tag 2.8.0-cuda12.8-cudnn9-runtime of {} (pytorch/pytorch scheme)",
        mirrored.rsplit_once(':').unwrap().0
    );
    for source in [format!("docker://{mirrored}"), mirrored.clone()] {
        let (code, doc) = verify(&[&source]);
        assert_eq!(code, 1, "{source}: {:#}", doc["findings"]);
        assert_eq!(doc["claims_source"], serde_json::json!([want]), "{source}");
        assert_eq!(doc["claims"][0]["source"], want.as_str(), "{source}");
    }

    for name in [
        &local,
        &remote,
        &mirrored,
        &"pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime".to_string(),
    ] {
        let _ = engine.remove(name, true);
    }
    assert_eq!(facts_of(&from_archive), facts_of(&from_daemon));
    assert_eq!(facts_of(&from_archive), facts_of(&bare));
    assert_eq!(facts_of(&from_archive), facts_of(&from_registry));
    assert_eq!(from_registry["origin"]["transport"], "registry");
    assert_eq!(from_registry["origin"]["digest"], digest);
    assert_eq!(from_daemon["origin"]["transport"], "daemon");
}
