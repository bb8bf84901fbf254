//! What gpuenv leaves and shows when others misbehave: SIGTERM and Ctrl-C during `verify`
//! of a local image and during `build` (what it made in the daemon is removed, the exit
//! code is the signal's), an image whose symbolic links loop (the image is at fault, its
//! layers are read instead, the daemon's own paths are not shown), and text from an archive
//! that tries to drive the terminal or forge a line (it reaches neither stdout nor stderr
//! raw).
//!
//! Everything these tests create in the daemon is named `gpuenv-proc-...`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use gpuenv::docker::{Bollard, CREATED_BY, Engine, Reference};

use super::daemon::{self, Cleanup, StandIns};
use super::image_build::*;
use crate::support::{gpuenv_command, json, root, run};

/// A unique suffix, so that parallel runs on one daemon never share names.
fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{nanos}", std::process::id())
}

/// Whether `text` holds a character a terminal would act on: any control character but a
/// line end or a tab.
fn has_control(text: &str) -> bool {
    text.chars().any(|c| c.is_control() && c != '\n' && c != '\t')
}

/// The value every hostile field of the archive carries: a screen clear, a forged line
/// after CR LF, an OSC 8 link and a bidi override.
const HOSTILE: &str =
    "x\u{1b}[2J\r\nFAKE pass \u{1b}]8;;http://evil.example/\u{1b}\\link\u{1b}]8;;\u{1b}\\ \u{202e}dne";

#[test]
fn text_from_a_hostile_archive_reaches_the_terminal_only_made_safe() {
    // A line break in os-release ends the value: only the rest of it can reach the report.
    let os_release = format!(
        "ID=ubuntu\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu {}\"\n",
        HOSTILE.replace("\r\n", " ")
    );
    let prefix = format!("opt/{HOSTILE}");
    let python = format!("{prefix}/bin/python3.11");
    let lib = format!("{prefix}/lib/python3.11/os.py");
    let files = layer(&[
        E::File("etc/os-release", os_release.as_bytes()),
        E::File(&python, b"\x7fELF"),
        E::File(&lib, b"# os"),
    ]);
    let env = format!("NVIDIA_REQUIRE_CUDA=cuda>=12.0 {HOSTILE}");
    let path_env = format!("PATH=/{prefix}/bin:/usr/bin:/bin");
    let user = format!("root{HOSTILE}");
    let c = Config {
        env: vec![&env, &path_env],
        labels: vec![
            ("com.nvidia.cudnn.version", HOSTILE),
            ("org.example.note", HOSTILE),
        ],
        user: Some(&user),
        ..Default::default()
    };
    let tag = format!("gpuenv-proc/hostile:1.0{HOSTILE}");
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("hostile.tar");
    std::fs::write(&saved, docker_save_legacy(&tag, &c, &[files], true)).unwrap();
    let source = format!("docker-archive:{}", saved.display());

    let text = run(&mut gpuenv_command(&root(), &["verify", &source], &[]));
    assert!(
        text.code == 0 || text.code == 1,
        "exit {}: {}",
        text.code,
        text.stderr
    );
    for (name, out) in [("stdout", &text.stdout), ("stderr", &text.stderr)] {
        assert!(!has_control(out), "{name} holds a control character:\n{out:?}");
        assert!(
            !out.lines().any(|l| l.trim_start().starts_with("FAKE")),
            "{name} holds a forged line:\n{out}"
        );
    }
    // The values are there, their line breaks shown as escapes.
    for shown in [
        "OS:         Ubuntu x FAKE pass link dne",
        "require:    NVIDIA_REQUIRE_CUDA=cuda>=12.0 x\\r\\nFAKE pass link dne",
        "user:       rootx\\r\\nFAKE pass link dne",
        "Python:     3.11 at /opt/x\\r\\nFAKE pass link dne",
    ] {
        assert!(text.stdout.contains(shown), "no `{shown}` in:\n{}", text.stdout);
    }

    // JSON keeps every value as it is, escaped by JSON's own rules.
    let doc = run(&mut gpuenv_command(&root(), &["verify", "--json", &source], &[]));
    assert!(!has_control(&doc.stdout), "{:?}", doc.stdout);
    let doc = json(&doc);
    assert_eq!(doc["facts"]["user"], serde_json::json!(user));
    assert!(doc["origin"]["names"][0].as_str().unwrap().ends_with(HOSTILE));

    // A message about a broken archive quotes the member it names, made safe.
    let broken = dir.path().join("broken.tar");
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": format!("{HOSTILE}.json"),
        "RepoTags": [tag],
        "Layers": [format!("{HOSTILE}/layer.tar")],
    }]))
    .unwrap();
    std::fs::write(&broken, archive(&[("manifest.json".into(), manifest)])).unwrap();
    let err = run(&mut gpuenv_command(
        &root(),
        &["verify", &format!("docker-archive:{}", broken.display())],
        &[],
    ));
    assert_eq!(err.code, 2, "{}", err.stderr);
    assert!(!has_control(&err.stderr), "{:?}", err.stderr);
    assert_eq!(err.stderr.lines().count(), 1, "one line: {}", err.stderr);
    assert!(err.stderr.starts_with("error: "), "{}", err.stderr);
}

/// A connection of the test's own, for what `Engine` does not ask: the containers that
/// carry a label.
fn labelled(label: &str) -> Vec<(String, std::collections::HashMap<String, String>)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let docker = bollard::Docker::connect_with_defaults().unwrap();
        let options = bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some([("label".to_string(), vec![label.to_string()])].into()),
            ..Default::default()
        };
        docker
            .list_containers(Some(options))
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.id.unwrap_or_default(), c.labels.unwrap_or_default()))
            .collect()
    })
}

/// Whether the daemon has a container of that id (or id prefix).
fn container_exists(id: &str) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let docker = bollard::Docker::connect_with_defaults().unwrap();
        match docker.inspect_container(id, None).await {
            Ok(_) => true,
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => false,
            Err(e) => panic!("inspect container {id}: {e}"),
        }
    })
}

/// Sends `signal` to a child.
fn kill(child: &Child, signal: libc::c_int) {
    // SAFETY: signalling our own child, which has not been reaped yet.
    let r = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
}

/// Waits for a child at most `limit`, killing it past that: its exit code (128 + the
/// signal when a signal ended it) and its stderr so far.
fn wait(mut child: Child, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            return status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An image whose read through the daemon takes a while: a CUDA toolkit layout whose
/// cuda-compat library (which `verify` fetches whole, to read its ELF note) is 192 MiB,
/// written by a build step in the daemon (so that this test process stays small: a child
/// it starts shares its memory until it runs the program, which other tests measure).
fn slow_image(engine: &Bollard, name: &str) {
    let base = format!("{name}-base");
    let base_ref = Reference::parse(&base).unwrap();
    engine
        .import(daemon::os_rootfs(), &base_ref, &["ENV PATH=/bin".into()])
        .unwrap();
    let dockerfile = format!(
        "FROM {base}\n\
         RUN mkdir -p /usr/local/cuda-12.4/compat \\\n\
         && dd if=/dev/zero of=/usr/local/cuda-12.4/compat/libcuda.so.550.54.15 bs=1048576 count=192 \\\n\
         && ln -s libcuda.so.550.54.15 /usr/local/cuda-12.4/compat/libcuda.so.1 \\\n\
         && ln -s cuda-12.4 /usr/local/cuda\n\
         ENV CUDA_VERSION=12.4.1\n"
    );
    let mut ctx = gpuenv::docker::context::Context::new();
    ctx.add_file("Dockerfile", dockerfile.into_bytes(), 0o644)
        .unwrap();
    let built = gpuenv::docker::build(
        engine,
        ctx.to_tar().unwrap(),
        &Reference::parse(name).unwrap(),
        &mut |_| {},
    );
    let _ = engine.remove(&base, false);
    built.unwrap_or_else(|e| panic!("build {name}: {e}"));
}

/// Starts `gpuenv verify NAME`, signals it once its container exists, and checks that
/// the container is gone when it ends, with the signal's exit code.
fn signal_verify(name: &str, signal: libc::c_int, code: i32, said: &str) {
    let mut child = gpuenv_command(&root(), &["verify", name], &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
        err
    });
    let pid_label = format!("io.gpuenv.pid={}", child.id());
    let start = Instant::now();
    let containers = loop {
        let found = labelled(&pid_label);
        if !found.is_empty() {
            break found;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no container labelled {pid_label} appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let (_, labels) = &containers[0];
    assert_eq!(labels.get(CREATED_BY).map(String::as_str), Some("gpuenv"));
    assert_eq!(labels.get("io.gpuenv.image").map(String::as_str), Some(name));
    kill(&child, signal);
    let code_got = wait(child, Duration::from_secs(40));
    let err = reader.join().unwrap();
    assert_eq!(code_got, code, "{err}");
    assert!(err.contains(said), "{err}");
    assert_eq!(labelled(&pid_label), [], "a container was left");
}

#[test]
fn sigterm_or_ctrl_c_during_verify_removes_the_container_it_created() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let name = format!("gpuenv-proc/slow:{}", unique());
    let _cleanup = Cleanup {
        engine: &engine,
        names: vec![name.clone()],
    };
    slow_image(&engine, &name);
    signal_verify(&name, libc::SIGTERM, 143, "error: stopped by SIGTERM");
    signal_verify(&name, libc::SIGINT, 130, "error: stopped by SIGINT");
    // Uninterrupted, the container goes too.
    let done = run(&mut gpuenv_command(&root(), &["verify", "--json", &name], &[]));
    assert!(done.code <= 1, "{}", done.stderr);
    assert_eq!(json(&done)["origin"]["read"], "paths");
    assert!(
        labelled(&format!("{CREATED_BY}=gpuenv"))
            .iter()
            .all(|(_, l)| l.get("io.gpuenv.image") != Some(&name)),
        "a container was left"
    );
}

#[test]
fn sigterm_during_a_build_cancels_it_and_leaves_no_container_image_or_tag() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("requirements.txt"),
        "einops==0.8.0\ngpuenv-standin-sleep==1.0\n",
    )
    .unwrap();
    let flags = [
        "--torch",
        "2.6.0+cu124",
        "--python",
        "3.11",
        "--requirements",
        "requirements.txt",
    ];
    let dockerfile = run(&mut gpuenv_command(
        dir.path(),
        &[&["dockerfile"][..], &flags].concat(),
        &[],
    ));
    assert_eq!(dockerfile.code, 0, "{}", dockerfile.stderr);
    let bases: Vec<String> = dockerfile
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("FROM "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(String::from)
        .collect();
    let _standins = StandIns::create(&engine, &bases);
    let tag = format!("gpuenv-proc/build-stopped:{}", unique());
    let _cleanup = Cleanup {
        engine: &engine,
        names: vec![tag.clone()],
    };
    let mut child = gpuenv_command(
        dir.path(),
        &[&["build"][..], &flags, &["--tag", &tag]].concat(),
        &[],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Stderr read on a thread, line by line; the step that waits says so.
    let (lines, seen) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = lines.send(line.clone());
            all.push(line);
        }
        all
    });
    let start = Instant::now();
    loop {
        let line = seen
            .recv_timeout(Duration::from_secs(120).saturating_sub(start.elapsed()))
            .unwrap_or_else(|e| panic!("the waiting step never started: {e}"));
        if line.contains("gpuenv-standin-sleep==1.0 waits") {
            break;
        }
    }
    kill(&child, libc::SIGTERM);
    let code = wait(child, Duration::from_secs(40));
    let err = reader.join().unwrap();
    assert_eq!(code, 143, "{}", err.join("\n"));
    assert_eq!(
        err.last().map(String::as_str),
        Some("error: stopped by SIGTERM; what gpuenv had made in the Docker daemon was removed")
    );
    // Every build line is set off, so that none passes for gpuenv's own.
    assert!(err.iter().any(|l| l.starts_with("  | Step 1/")), "{err:?}");
    // The step's container, the images the build committed, and the tag: none is left.
    let ids = |prefix: &str| -> Vec<String> {
        err.iter()
            .filter_map(|l| l.strip_prefix("  | ")?.trim().strip_prefix(prefix))
            .map(|id| id.trim().to_string())
            .collect()
    };
    let running = ids("---> Running in ");
    assert!(!running.is_empty(), "{err:?}");
    for c in &running {
        assert!(!container_exists(c), "the step's container {c} was left");
    }
    let bases: Vec<String> = bases
        .iter()
        .filter_map(|b| engine.inspect(b).unwrap())
        .map(|d| d.id)
        .collect();
    let committed: Vec<String> = ids("---> ")
        .into_iter()
        .filter(|id| id.chars().all(|c| c.is_ascii_hexdigit()))
        .filter(|id| {
            !bases
                .iter()
                .any(|b| b.trim_start_matches("sha256:").starts_with(id.as_str()))
        })
        .collect();
    assert!(!committed.is_empty(), "{err:?}");
    for id in &committed {
        assert!(engine.inspect(id).unwrap().is_none(), "image {id} was left");
    }
    assert!(engine.inspect(&tag).unwrap().is_none(), "the tag was made");
}

#[test]
fn an_image_whose_symlinks_loop_is_read_from_its_layers_and_named_at_fault() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let name = format!("gpuenv-proc/loop:{}", unique());
    let _cleanup = Cleanup {
        engine: &engine,
        names: vec![name.clone()],
    };
    let rootfs = layer(&[
        E::Dir("etc"),
        E::File("etc/os-release", b"ID=ubuntu\nVERSION_ID=\"22.04\"\n"),
        E::Dir("usr"),
        E::Dir("usr/local"),
        E::Symlink("usr/local/cuda", "cuda"),
    ]);
    engine
        .import(
            rootfs,
            &Reference::parse(&name).unwrap(),
            &["ENV CUDA_VERSION=12.4.1".into()],
        )
        .unwrap();
    for json_out in [true, false] {
        let mut args = vec!["verify", name.as_str()];
        if json_out {
            args.push("--json");
        }
        let r = run(&mut gpuenv_command(&root(), &args, &[]));
        assert!(r.code <= 1, "exit {}: {}", r.code, r.stderr);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(!all.contains("/var/lib/docker"), "{all}");
        if json_out {
            let doc = json(&r);
            assert_eq!(doc["origin"]["read"], "layers", "{doc}");
            let why = doc["origin"]["layers_because"].as_str().unwrap();
            assert!(
                why.starts_with("the daemon cannot read /usr/local/cuda in it: its symbolic links there lead back to themselves"),
                "{why}"
            );
            assert_eq!(doc["facts"]["os"]["id"], "ubuntu", "{doc}");
        } else {
            assert!(
                r.stdout
                    .contains("read:       every layer, because the daemon cannot read /usr/local/cuda"),
                "{}",
                r.stdout
            );
        }
    }
    // Where no layer can stand in (one file asked for), the image is named at fault.
    let e = engine
        .read_file(&name, "/usr/local/cuda/version.json", 1024)
        .unwrap_err();
    assert!(
        matches!(&e, gpuenv::docker::DockerError::ImageContent { path, .. } if path == "/usr/local/cuda/version.json"),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(!msg.contains("/var/lib/docker"), "{msg}");
    assert!(
        msg.contains(&format!(
            "the image `{name}` cannot be read at `/usr/local/cuda/version.json`"
        )),
        "{msg}"
    );
    assert!(
        labelled(&format!("{CREATED_BY}=gpuenv"))
            .iter()
            .all(|(_, l)| l.get("io.gpuenv.image") != Some(&name)),
        "a container was left"
    );
}

#[test]
fn probe_output_echoed_in_doctor_reaches_the_terminal_only_made_safe() {
    // A host whose NVML error and torch's CUDA warning (both echoed in reasons) try to
    // clear the screen, hide a link and forge a passing check.
    let dir = crate::support::derived_host("nvml-mismatch", |r| {
        r["nvml"]["error"] = serde_json::json!(format!("Driver/library version mismatch{HOSTILE}"));
        let warning =
            serde_json::to_string(&format!("Error 804{HOSTILE}\r\n  pass cuda-available: fine")).unwrap();
        let probe = r["commands"]["python3 -c <python-probe>"]["stdout"]
            .as_str()
            .unwrap()
            .replace(
                "Error 804: forward compatibility was attempted on non supported HW",
                warning.trim_matches('"'),
            );
        r["commands"]["python3 -c <python-probe>"]["stdout"] = probe.into();
    });
    let host = dir.path().to_str().unwrap();
    let r = run(&mut gpuenv_command(
        &root(),
        &["doctor", "--host-facts", host],
        &[],
    ));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(!has_control(&r.stdout), "{:?}", r.stdout);
    assert!(
        !r.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("FAKE")
                || l.trim_start().starts_with("pass cuda-available: fine")),
        "{}",
        r.stdout
    );
    for shown in [
        "Error 804x\\r\\nFAKE pass link dne\\r\\n  pass cuda-available: fine",
        "nvml: Driver/library version mismatchx\\r\\nFAKE pass link dne",
    ] {
        assert!(
            r.stdout.contains(shown),
            "no `{shown}`, escaped, in: {}",
            r.stdout
        );
    }
}
