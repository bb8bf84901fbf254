//! `bench --image`: the GPU bench script run inside an image through the real Docker
//! daemon. This machine has no GPU, so the image's `python3` is a stand-in (a busybox
//! shell script, below) that checks it was handed the script and prints what the script
//! prints where torch is missing; the GPU device request is tested for its failure on a
//! daemon without the NVIDIA runtime.

use std::time::Duration;

use gpuenv::bench::gpu::{self, GpuOptions, Mode};
use gpuenv::docker::{ContainerSpec, Engine, Reference, run_container};

use crate::daemon::lock;

/// The daemon, reached as gpuenv reaches it. Only the daemon and busybox (made ready by
/// `scripts/test-services busybox`) are needed here, not the rest of `scripts/test-services`
/// (registry, Slurm, sshd), so that this test does not depend on them; it fails, never
/// skips, without a daemon.
fn engine() -> gpuenv::docker::Bollard {
    gpuenv::docker::Bollard::connect(Duration::from_secs(15)).unwrap_or_else(|e| {
        panic!(
            "the bench-in-an-image tests need the Docker daemon (DOCKER_HOST or /var/run/docker.sock): {e}"
        )
    })
}

const IMAGE: &str = "gpuenv-test/bench-gpu:standin";

/// The image's `python3`: what the script prints without torch, plus a line of an
/// entrypoint's banner and a line on stderr, so that both are seen to be passed over.
const STANDIN_PYTHON: &str = r##"#!/bin/sh
# Stand-in python3 of gpuenv's bench-in-an-image test.
[ "$1" = -c ] || { echo "stand-in python3: expected -c" >&2; exit 2; }
case "$2" in
    "# gpuenv's GPU bench script"*) ;;
    *) echo "stand-in python3: not the GPU bench script" >&2; exit 2 ;;
esac
shift 2
echo "== a banner an image's entrypoint prints =="
echo '{"kind": "header", "script_version": 1, "mode": "quick", "python": "3.12.3", "torch": null, "gpus": []}'
echo '{"kind": "skipped", "what": "all", "reason": "torch is not importable: stand-in"}'
echo "stand-in python3 ran with: $*" >&2
echo '{"kind": "done", "seconds": 0.01}'
"##;

fn rootfs() -> Vec<u8> {
    crate::support::tool("busybox");
    let busybox = std::env::var_os("GPUENV_BUSYBOX").unwrap_or_else(|| "/bin/busybox".into());
    let busybox = std::fs::read(&busybox).unwrap_or_else(|e| {
        panic!("a static busybox at {busybox:?} (Debian's busybox-static; `scripts/test-services` installs it): {e}")
    });
    let mut t = tar::Builder::new(Vec::new());
    let mut add = |path: &str, kind: tar::EntryType, mode: u32, data: &[u8], link: Option<&str>| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_mtime(0);
        match link {
            Some(target) => t.append_link(&mut h, path, target).unwrap(),
            None => t.append_data(&mut h, path, data).unwrap(),
        }
    };
    for d in ["bin", "usr", "usr/bin", "tmp"] {
        add(d, tar::EntryType::Directory, 0o755, b"", None);
    }
    add("bin/busybox", tar::EntryType::Regular, 0o755, &busybox, None);
    for a in ["sh", "echo", "sleep", "seq"] {
        add(
            &format!("bin/{a}"),
            tar::EntryType::Symlink,
            0o777,
            b"",
            Some("busybox"),
        );
    }
    add(
        "usr/bin/python3",
        tar::EntryType::Regular,
        0o755,
        STANDIN_PYTHON.as_bytes(),
        None,
    );
    t.into_inner().unwrap()
}

/// The stand-in image, removed again on drop.
struct Image<'a>(&'a gpuenv::docker::Bollard);

impl<'a> Image<'a> {
    fn make(engine: &'a gpuenv::docker::Bollard) -> Image<'a> {
        let reference = Reference::parse(IMAGE).unwrap();
        engine
            .import(rootfs(), &reference, &["ENV PATH=/usr/bin:/bin".to_string()])
            .unwrap();
        Image(engine)
    }
}

impl Drop for Image<'_> {
    fn drop(&mut self) {
        let _ = self.0.remove(IMAGE, true);
    }
}

/// The containers gpuenv made from the image and left (none, once a run is over).
fn left() -> String {
    let out = std::process::Command::new("docker")
        .args([
            "ps",
            "-a",
            "-q",
            "--filter",
            &format!("label=io.gpuenv.image={IMAGE}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn spec(cmd: &[&str], gpus: bool, timeout: Duration, cap: u64) -> ContainerSpec {
    ContainerSpec {
        image: IMAGE.into(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        gpus,
        timeout,
        output_cap: cap,
        purpose: "gpuenv's tests".into(),
    }
}

#[test]
fn the_script_runs_in_an_image_and_its_container_goes() {
    let _l = lock();
    let engine = engine();
    let _image = Image::make(&engine);

    let opts = GpuOptions {
        mode: Mode::Quick,
        gpus: Some(vec![0, 1]),
    };
    let mut cmd = vec!["python3", "-c", gpu::SCRIPT];
    let args = opts.args();
    cmd.extend(args.iter().map(String::as_str));
    let ran = run_container(&spec(&cmd, false, Duration::from_secs(60), 1 << 20)).unwrap();
    assert_eq!(
        (ran.status, ran.timed_out, ran.truncated),
        (Some(0), false, false),
        "{ran:?}"
    );
    assert!(
        ran.stderr
            .contains("stand-in python3 ran with: --quick --gpus 0,1"),
        "{ran:?}"
    );
    let run = gpu::read_output(
        "python3",
        &gpuenv::host::system::Outcome::Exited,
        ran.status,
        &ran.stdout,
        &ran.stderr,
    )
    .unwrap();
    assert!(run.finished);
    assert_eq!(
        run.skipped,
        vec!["all: torch is not importable: stand-in".to_string()]
    );
    assert_eq!(left(), "");

    // A command past its deadline is killed, what it printed kept, the container removed.
    let ran = run_container(&spec(
        &["sh", "-c", "echo before; sleep 600"],
        false,
        Duration::from_secs(2),
        1 << 20,
    ))
    .unwrap();
    assert!(ran.timed_out && ran.status.is_none(), "{ran:?}");
    assert_eq!(ran.stdout, "before\n");
    assert_eq!(left(), "");

    // Output past the cap is cut at the cap.
    let ran = run_container(&spec(
        &[
            "sh",
            "-c",
            "for i in $(seq 1 4000); do echo 0123456789012345678901234567890123456789; done",
        ],
        false,
        Duration::from_secs(60),
        4096,
    ))
    .unwrap();
    assert!(ran.truncated, "{ran:?}");
    assert_eq!(ran.stdout.len(), 4096);
    assert_eq!(left(), "");
}

#[test]
fn asking_for_gpus_without_the_nvidia_runtime_says_what_is_missing() {
    let _l = lock();
    let engine = engine();
    let _image = Image::make(&engine);
    let err = run_container(&spec(
        &["python3", "-c", gpu::SCRIPT],
        true,
        Duration::from_secs(60),
        1 << 20,
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("cannot give the container GPUs"), "{err}");
    assert!(err.contains("NVIDIA Container Toolkit"), "{err}");
    assert!(err.contains("nvidia"), "{err}");
    assert_eq!(left(), "");

    let err = gpu::measure_in_image(
        IMAGE,
        "python3",
        &GpuOptions {
            mode: Mode::Quick,
            gpus: None,
        },
    )
    .unwrap_err();
    assert!(err.contains("NVIDIA runtime"), "{err}");
    assert_eq!(left(), "");

    let err = gpu::measure_in_image(
        "gpuenv-test/no-such-image:none",
        "python3",
        &GpuOptions {
            mode: Mode::Quick,
            gpus: None,
        },
    )
    .unwrap_err();
    assert!(err.contains("no-such-image"), "{err}");
}
