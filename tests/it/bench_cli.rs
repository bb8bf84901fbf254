//! `gpuenv bench` as a user runs it on a GPU machine, without one: a recorded host
//! replayed (`--host-facts`), and gpuenv's GPU script run for real through the stand-in
//! torch (`tests/fixtures/bench/fake-torch`), recorded and replayed.

use std::path::Path;

use crate::support::{derived_host, fixture, gpuenv_in, json, ran};

/// The constructed 8-GPU script output (`tests/fixtures/bench/gpu/`, GPU 5 at 60% of the
/// others), its GPUs named as the recorded 8x H100 host names them, so that the host's
/// GPUs and the script's agree; the figures are as constructed.
fn slow_gpu5_on_h100() -> String {
    std::fs::read_to_string(fixture("bench/gpu/constructed-8gpu-slow-gpu5.jsonl"))
        .unwrap()
        .replace("\"NVIDIA H200\"", "\"NVIDIA H100 80GB HBM3\"")
}

/// The recorded 8x H100 host, its Python's torch answering the GPU script's quick run.
fn h100_host_with_run(stdout: &str) -> tempfile::TempDir {
    derived_host("8x-h100-nvlink", |r| {
        r["commands"]["python3 -c <gpu-bench> --quick"] = ran(stdout);
    })
}

fn host_facts(dir: &Path) -> String {
    dir.join("host.json").to_str().unwrap().to_string()
}

#[test]
fn an_8_gpu_run_with_one_slow_gpu_names_that_gpu() {
    let host = h100_host_with_run(&slow_gpu5_on_h100());
    let facts = host_facts(host.path());
    let run = gpuenv_in(
        host.path(),
        &["bench", "--gpu-only", "--host-facts", &facts, "--json"],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc = json(&run);
    let outliers = doc["judgement"]["outliers"].as_array().unwrap();
    assert!(!outliers.is_empty(), "{doc}");
    // Every per-GPU metric names GPU 5, and no other GPU is named.
    for o in outliers {
        if o["peer"].is_null() {
            assert_eq!(o["gpu"], 5, "{o}");
        } else {
            assert!(o["gpu"] == 5 || o["peer"] == 5, "{o}");
        }
    }
    for metric in ["matmul-bf16", "memory-bandwidth", "resnet50"] {
        assert!(
            outliers.iter().any(|o| o["metric"] == metric && o["gpu"] == 5),
            "{metric}: {}",
            doc["judgement"]["outliers"]
        );
    }
    // The figures are judged against the H100's datasheet, each with its verdict.
    let judged = doc["judgement"]["figures"].as_array().unwrap();
    let bf16 = judged
        .iter()
        .find(|j| j["figure"]["metric"] == "matmul-bf16" && j["figure"]["gpu"] == 0)
        .unwrap_or_else(|| panic!("{doc}"));
    assert!(bf16["datasheet"].as_f64().unwrap() > 900.0, "{bf16}");
    assert!(bf16["verdict"].is_string(), "{bf16}");
    // No engine was installed on the recorded host: said, and gpuenv's script measured.
    let skipped = doc["skipped"].to_string();
    assert!(skipped.contains("dcgmi is not installed"), "{skipped}");
    assert!(skipped.contains("nvbandwidth is not installed"), "{skipped}");
    assert!(
        doc["figures"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["engine"] == "gpuenv"),
        "{doc}"
    );

    // The text names it too.
    let text = gpuenv_in(host.path(), &["bench", "--gpu-only", "--host-facts", &facts]);
    assert_eq!(text.code, 1, "{}", text.stderr);
    assert!(text.stdout.contains("below their peers:"), "{}", text.stdout);
    assert!(text.stdout.contains("GPU 5 matmul-bf16"), "{}", text.stdout);
}

#[test]
fn the_pages_show_each_figure_beside_its_datasheet_and_the_slow_gpu() {
    let host = h100_host_with_run(&slow_gpu5_on_h100());
    let facts = host_facts(host.path());
    let html = host.path().join("bench.html");
    let md = host.path().join("bench.md");
    for page in [&html, &md] {
        let run = gpuenv_in(
            host.path(),
            &[
                "bench",
                "--gpu-only",
                "--host-facts",
                &facts,
                "--report",
                page.to_str().unwrap(),
            ],
        );
        assert_eq!(run.code, 1, "{}", run.stderr);
    }
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("<table id=\"bench-figures\">"), "{html}");
    assert!(
        html.contains("GPU 5 matmul-bf16: 432.0 TFLOPS is 40% below"),
        "no outlier in the page"
    );
    assert!(
        html.contains("989.5 TFLOPS (H100 SXM bf16_tflops)"),
        "the H100's dense BF16 datasheet figure is not beside the measured one"
    );
    assert!(html.contains("FINDINGS"), "overall verdict missing");
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("## Below their peers"), "{md}");
    assert!(md.contains("| **"), "{md}");
}

#[test]
fn a_host_without_a_cuda_torch_measures_no_gpu_and_says_why() {
    let run = gpuenv_in(
        Path::new("."),
        &[
            "bench",
            "--gpu-only",
            "--host-facts",
            fixture("hosts/no-gpu/host.json").to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("no Python with a CUDA torch"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--python PATH"), "{}", run.stderr);
}

/// A Python that finds the stand-in torch first, showing `gpus` GPUs.
fn stand_in_python(dir: &Path, gpus: u32) -> String {
    use std::os::unix::fs::PermissionsExt;
    let fake = fixture("bench/fake-torch");
    let path = dir.join("python");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nFAKE_TORCH_GPUS={gpus} PYTHONDONTWRITEBYTECODE=1 PYTHONPATH='{}' exec python3 -s \"$@\"\n",
            fake.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_run_through_the_stand_in_torch_is_recorded_and_replays_to_the_same_figures() {
    let dir = tempfile::tempdir().unwrap();
    let python = stand_in_python(dir.path(), 2);
    let rec = dir.path().join("rec");
    let live = gpuenv_in(
        dir.path(),
        &[
            "bench",
            "--gpu-only",
            "--python",
            &python,
            "--record",
            rec.to_str().unwrap(),
            "--json",
        ],
    );
    // The stand-in's figures are a counter's, not a GPU's: exit 0 or 1 (a pair can fall
    // below its peer), never an error.
    assert!(
        live.code == 0 || live.code == 1,
        "{}\n{}",
        live.stdout,
        live.stderr
    );
    let live = json(&live);
    let figures = live["figures"].as_array().unwrap();
    for metric in [
        "matmul-bf16",
        "memory-bandwidth",
        "peer-to-peer",
        "nccl-busbw",
        "resnet50",
    ] {
        assert!(figures.iter().any(|f| f["metric"] == metric), "{metric}: {live}");
    }
    assert_eq!(live["gpus"].as_array().unwrap().len(), 2, "{live}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rec.join("host.json")).unwrap()).unwrap();
    let key = format!("{python} -c <gpu-bench> --quick");
    assert!(record["commands"][&key].is_object(), "{key} not recorded");

    let again = gpuenv_in(
        dir.path(),
        &[
            "bench",
            "--gpu-only",
            "--python",
            &python,
            "--host-facts",
            rec.to_str().unwrap(),
            "--json",
        ],
    );
    let again = json(&again);
    assert_eq!(again["figures"], live["figures"]);
    assert_eq!(again["judgement"], live["judgement"]);
}

#[test]
fn bad_bench_flags_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "--dcgm-level", "4"], "--dcgm-level 4"),
        (&["bench", "--burn", "5x"], "--burn `5x`"),
        (
            &["bench", "--burn", "1m", "--host-only"],
            "--burn with --host-only",
        ),
        (&["bench", "--image", "Not An Image"], "invalid --image"),
        (&["bench", "--report", "out.pdf"], "invalid --report"),
        (&["bench", "--host-facts", "missing.json"], "missing.json"),
        (
            &["bench", "--download-image", "Bad Name"],
            "--download-image `Bad Name`",
        ),
    ];
    for (args, needle) in cases {
        let run = gpuenv_in(dir.path(), args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "something was written"
    );
}

/// Pushes an image of one 4 MiB layer of bytes that do not compress to the loopback
/// registry and removes the local copy; the name pushed.
fn push_layer(engine: &gpuenv::docker::Bollard, reg: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let name = format!("{reg}/gpuenv-test/bench-download:{}-{nanos}", std::process::id());
    // xorshift: bytes a registry or a gzip cannot shrink, so the read is 4 MiB on the wire.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ u64::from(nanos);
    let data: Vec<u8> = (0..4 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    b.append_data(&mut h, "blob", &data[..]).unwrap();
    let r = gpuenv::docker::Reference::parse(&name).unwrap();
    use gpuenv::docker::Engine;
    engine.import(b.into_inner().unwrap(), &r, &[]).unwrap();
    engine
        .push(&r, None, &mut |_: gpuenv::docker::Progress| {})
        .unwrap_or_else(|e| panic!("push {name}: {e}"));
    engine.remove(&name, true).unwrap();
    name
}

/// A small host-only bench in `dir` whose one download is `image`'s largest layer.
fn host_bench_downloading(dir: &Path, data: &Path, image: &str) -> serde_json::Value {
    let run = gpuenv_in(
        dir,
        &[
            "bench",
            "--host-only",
            "--allow-system-disk",
            "--path",
            data.to_str().unwrap(),
            "--disk-size",
            "16MiB",
            "--memory-size",
            "16MiB",
            "--seconds",
            "1",
            "--download-image",
            image,
            "--json",
        ],
    );
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    json(&run)
}

#[test]
fn the_download_speed_of_an_image_layer_is_read_from_its_registry() {
    let _lock = crate::daemon::lock();
    let engine = crate::daemon::engine();
    let reg = crate::daemon::registry();
    let name = push_layer(&engine, &reg);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let doc = host_bench_downloading(dir.path(), &data, &name);
    let downloads: Vec<&serde_json::Value> = doc["figures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["metric"] == "download")
        .collect();
    // Only the image asked for: no default URL or image is tried alongside it.
    assert_eq!(downloads.len(), 1, "{doc}");
    let detail = downloads[0]["detail"].as_str().unwrap();
    // The whole layer (4 MiB and the tar's and gzip's framing) was read, and named.
    assert!(detail.contains(" of layer sha256:"), "{detail}");
    let bytes: u64 = detail.split(' ').next().unwrap().parse().unwrap();
    assert!(bytes > 4 << 20 && bytes < 5 << 20, "{detail}");
    assert!(detail.contains(&reg), "{detail}");
    assert!(downloads[0]["value"].as_f64().unwrap() > 0.0);

    // A name the registry does not have: the part is skipped with the registry's answer,
    // and the rest of the bench stands.
    let missing = format!("{reg}/gpuenv-test/bench-download:absent");
    let doc = host_bench_downloading(dir.path(), &data, &missing);
    let skipped = doc["skipped"].to_string();
    assert!(skipped.contains("download (registry)"), "{skipped}");
    assert!(
        doc["figures"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["metric"] == "disk-seq-read")
    );
}

#[test]
fn check_measures_here_when_the_order_asks_for_figures_and_none_are_given() {
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order.toml");
    // This machine has no GPU: its health facts are unknown, allowed here so that only
    // the measured item decides.
    std::fs::write(
        &order,
        "min_disk_read = \"1MB/s\"\nhealth_allow = [\"unknown\"]\n",
    )
    .unwrap();
    let run = gpuenv_in(
        dir.path(),
        &["check", "--order", order.to_str().unwrap(), "--json"],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc = json(&run);
    // The bench ran here: the host's own figures are in the document check judged.
    let figures = doc["bench"]["figures"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", doc["bench"]));
    assert!(
        figures
            .iter()
            .any(|j| j["figure"]["metric"] == "host-memory-bandwidth"),
        "{}",
        doc["bench"]
    );
    let item = doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["item"] == "min_disk_read")
        .unwrap_or_else(|| panic!("{}", doc["acceptance"]));
    // Whether or not the disk could be measured here, the item is judged on what was:
    // a figure at least 1 MB/s passes, a disk not measured never does.
    let disk = figures.iter().find(|j| j["figure"]["metric"] == "disk-seq-read");
    match disk {
        Some(_) => assert_eq!(item["pass"], true, "{item}"),
        None => {
            assert_eq!(item["pass"], false, "{item}");
            assert!(item["found"].as_str().unwrap().contains("not measured"), "{item}");
        }
    }
    // A recorded host is not this machine: nothing is measured, and the item says how to
    // give the figures.
    let run = gpuenv_in(
        dir.path(),
        &[
            "check",
            "--order",
            order.to_str().unwrap(),
            "--host-facts",
            fixture("hosts/single-a100/host.json").to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json(&run);
    assert!(doc["bench"].is_null(), "{}", doc["bench"]);
    let text = doc["acceptance"].to_string();
    assert!(text.contains("--bench-results"), "{text}");
}
