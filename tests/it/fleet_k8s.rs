//! `gpuenv fleet k8s-manifest`: the manifest is checked against the Kubernetes API types
//! (k8s-openapi) without a cluster, keeps the contract `fleet collect --kubectl` reads it
//! by, and its container's shell line maps doctor's exit codes as the pods need; bad
//! values are refused before anything is printed.
//!
//! The check: the printed YAML is read into `Job` or `DaemonSet`, written back as JSON, and
//! must equal the YAML read as plain data. k8s-openapi drops fields it does not know, so a
//! misspelled or misplaced field, which the API server would refuse or ignore, makes the
//! two differ.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::support::{Run, gpuenv};

const NAME: &str = "app.kubernetes.io/name";
const INSTANCE: &str = "app.kubernetes.io/instance";

fn manifest(args: &[&str]) -> String {
    let mut a = vec!["fleet", "k8s-manifest"];
    a.extend_from_slice(args);
    let run = gpuenv(&a);
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    assert!(run.stderr.is_empty(), "{args:?}: {}", run.stderr);
    run.stdout
}

/// `yaml` read as `T`, or why it is not one: it does not read as `T`, or a field was lost
/// (or changed) on the way through `T`.
fn as_api_type<T: DeserializeOwned + Serialize>(yaml: &str) -> Result<T, String> {
    let plain: Value = serde_norway::from_str(yaml).map_err(|e| format!("not YAML: {e}"))?;
    let typed: T =
        serde_norway::from_str(yaml).map_err(|e| format!("not a {}: {e}", std::any::type_name::<T>()))?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    if back != plain {
        return Err(format!(
            "changed by the API type (a field unknown or misplaced):\nprinted:\n{}\nread back:\n{}",
            serde_json::to_string_pretty(&plain).unwrap(),
            serde_json::to_string_pretty(&back).unwrap()
        ));
    }
    Ok(typed)
}

fn job(args: &[&str]) -> Job {
    let yaml = manifest(args);
    as_api_type::<Job>(&yaml).unwrap_or_else(|e| panic!("{args:?}: {e}\n{yaml}"))
}

fn daemonset(args: &[&str]) -> DaemonSet {
    let mut a = vec!["--kind", "daemonset"];
    a.extend_from_slice(args);
    let yaml = manifest(&a);
    as_api_type::<DaemonSet>(&yaml).unwrap_or_else(|e| panic!("{args:?}: {e}\n{yaml}"))
}

fn labels_of(instance: &str) -> Value {
    json!({ NAME: "gpuenv-fleet", INSTANCE: instance })
}

fn the_container(spec: &PodSpec) -> &Container {
    assert_eq!(spec.containers.len(), 1, "{:?}", spec.containers);
    assert!(spec.init_containers.is_none());
    &spec.containers[0]
}

/// The pod's required anti-affinity terms.
fn anti_affinity(spec: &PodSpec) -> &[k8s_openapi::api::core::v1::PodAffinityTerm] {
    spec.affinity
        .as_ref()
        .unwrap()
        .pod_anti_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
}

fn env(c: &Container, name: &str) -> Option<String> {
    c.env.as_ref()?.iter().find(|e| e.name == name)?.value.clone()
}

/// What both kinds share: the labels, the container, the node's network and machine ID,
/// the GPU node affinity and the toleration.
fn assert_pod_contract(t: &PodTemplateSpec, instance: &str, selector: (&str, &str)) -> PodSpec {
    let labels = serde_json::to_value(t.metadata.as_ref().unwrap().labels.as_ref().unwrap()).unwrap();
    assert_eq!(labels, labels_of(instance));
    let spec = t.spec.clone().unwrap();
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    let c = the_container(&spec);
    assert_eq!(c.name, "gpuenv");
    assert_eq!(
        env(c, "NVIDIA_DRIVER_CAPABILITIES").as_deref(),
        Some("compute,utility")
    );
    let command = c.command.as_ref().unwrap();
    assert_eq!(command[..2], ["sh", "-c"]);
    assert!(c.args.is_none());

    let mount = c
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.mount_path == "/etc/machine-id")
        .expect("/etc/machine-id is mounted");
    assert_eq!(mount.read_only, Some(true));
    let volume = spec
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == mount.name)
        .expect("the mount's volume");
    let host = volume.host_path.as_ref().expect("a hostPath volume");
    assert_eq!(host.path, "/etc/machine-id");
    assert_eq!(host.type_.as_deref(), Some("File"));

    let tolerations = spec.tolerations.as_ref().unwrap();
    assert!(
        tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("nvidia.com/gpu")
                && t.operator.as_deref() == Some("Exists")
                && t.effect.as_deref() == Some("NoSchedule")),
        "{tolerations:?}"
    );

    let node = spec.affinity.as_ref().unwrap().node_affinity.as_ref().unwrap();
    let required = node
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap();
    assert_eq!(required.node_selector_terms.len(), 1);
    let exprs = required.node_selector_terms[0]
        .match_expressions
        .as_ref()
        .unwrap();
    assert_eq!(exprs.len(), 1);
    assert_eq!(exprs[0].key, selector.0);
    assert_eq!(exprs[0].operator, "In");
    assert_eq!(exprs[0].values.as_deref(), Some(&[selector.1.to_string()][..]));
    spec
}

#[test]
fn fleet_k8s_job_is_a_valid_job_that_keeps_the_contract() {
    let j = job(&[]);
    let meta = &j.metadata;
    assert_eq!(meta.name.as_deref(), Some("gpuenv-fleet"));
    assert_eq!(meta.namespace, None, "kubectl's namespace");
    assert_eq!(
        serde_json::to_value(meta.labels.as_ref().unwrap()).unwrap(),
        labels_of("gpuenv-fleet")
    );

    let s = j.spec.as_ref().unwrap();
    assert_eq!(s.completions, Some(2), "the documented default --nodes");
    assert_eq!(s.parallelism, Some(2));
    assert_eq!(s.completion_mode.as_deref(), Some("Indexed"));
    assert!(s.backoff_limit.is_some_and(|b| b >= 1));
    assert!(s.active_deadline_seconds.is_some_and(|d| d >= 600), "{s:?}");
    assert!(
        s.ttl_seconds_after_finished.is_some_and(|t| t >= 3600),
        "logs stay to be collected"
    );
    assert!(s.selector.is_none(), "the Job controller makes its own");

    let spec = assert_pod_contract(&s.template, "gpuenv-fleet", ("nvidia.com/gpu.present", "true"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    let c = the_container(&spec);
    let limits = c.resources.as_ref().unwrap().limits.as_ref().unwrap();
    assert_eq!(limits["nvidia.com/gpu"].0, "8");
    assert_eq!(
        env(c, "NVIDIA_VISIBLE_DEVICES"),
        None,
        "the device plugin sets it"
    );

    // One pod per node: the anti-affinity selects this instance's own pods.
    let terms = anti_affinity(&spec);
    assert_eq!(terms.len(), 1);
    assert_eq!(terms[0].topology_key, "kubernetes.io/hostname");
    let sel = terms[0].label_selector.as_ref().unwrap();
    assert_eq!(
        serde_json::to_value(sel.match_labels.as_ref().unwrap()).unwrap(),
        labels_of("gpuenv-fleet")
    );

    // Without --image: a plain Python that installs this very gpuenv, pip's words on stderr.
    assert_eq!(c.image.as_deref(), Some("python:3.12-slim"));
    let script = &c.command.as_ref().unwrap()[2];
    let pin = format!("'gpuenv=={}' >&2", env!("CARGO_PKG_VERSION"));
    assert!(
        script.contains("pip install") && script.contains(&pin),
        "{script}"
    );
}

#[test]
fn fleet_k8s_job_takes_every_flag() {
    let j = job(&[
        "--image",
        "registry.example.com:5000/team/train:2025-06",
        "--nodes",
        "16",
        "--gpus-per-node",
        "4",
        "--name",
        "probe-b200",
        "--namespace",
        "gpu-jobs",
        "--node-selector",
        "cloud.example.com/node-pool=b200",
    ]);
    assert_eq!(j.metadata.name.as_deref(), Some("probe-b200"));
    assert_eq!(j.metadata.namespace.as_deref(), Some("gpu-jobs"));
    let s = j.spec.as_ref().unwrap();
    assert_eq!((s.completions, s.parallelism), (Some(16), Some(16)));
    let spec = assert_pod_contract(&s.template, "probe-b200", ("cloud.example.com/node-pool", "b200"));
    let c = the_container(&spec);
    assert_eq!(
        c.image.as_deref(),
        Some("registry.example.com:5000/team/train:2025-06")
    );
    assert_eq!(
        c.resources.as_ref().unwrap().limits.as_ref().unwrap()["nvidia.com/gpu"].0,
        "4"
    );
    let script = &c.command.as_ref().unwrap()[2];
    assert!(!script.contains("pip"), "the image has gpuenv: {script}");
    let sel = anti_affinity(&spec)[0].label_selector.as_ref().unwrap();
    assert_eq!(
        serde_json::to_value(sel.match_labels.as_ref().unwrap()).unwrap(),
        labels_of("probe-b200")
    );
}

#[test]
fn fleet_k8s_daemonset_is_a_valid_daemonset_that_keeps_the_contract() {
    for (args, instance) in [
        (&[][..], "gpuenv-fleet"),
        (
            &["--name", "nightly", "--image", "train:1", "--namespace", "ops"][..],
            "nightly",
        ),
    ] {
        let d = daemonset(args);
        assert_eq!(d.metadata.name.as_deref(), Some(instance));
        let s = &d.spec;
        // The selector must match the template's labels, or the API server refuses it.
        let selected = serde_json::to_value(s.selector.match_labels.as_ref().unwrap()).unwrap();
        assert_eq!(selected, labels_of(instance));
        let spec = assert_pod_contract(&s.template, instance, ("nvidia.com/gpu.present", "true"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert!(
            spec.affinity.as_ref().unwrap().pod_anti_affinity.is_none(),
            "one per node already"
        );
        let c = the_container(&spec);
        assert!(c.resources.is_none(), "holds no GPU: {:?}", c.resources);
        assert_eq!(env(c, "NVIDIA_VISIBLE_DEVICES").as_deref(), Some("all"));
    }
}

#[test]
fn fleet_k8s_the_check_against_the_api_types_can_fail() {
    let yaml = manifest(&[]);
    as_api_type::<Job>(&yaml).unwrap();
    let broken = |from: &str, to: &str| {
        assert!(yaml.contains(from), "{from}");
        yaml.replacen(from, to, 1)
    };
    // Misspelled: k8s-openapi drops it, the round trip notices.
    let e = as_api_type::<Job>(&broken("restartPolicy:", "restartPolicyy:")).unwrap_err();
    assert!(e.contains("unknown or misplaced"), "{e}");
    // Misplaced: a pod's field one level too deep (into the template's metadata).
    let moved = broken("      hostNetwork: true\n", "").replacen(
        "    metadata:\n",
        "    metadata:\n      hostNetwork: true\n",
        1,
    );
    assert!(as_api_type::<Job>(&moved).is_err());
    // A wrong type, and the wrong kind.
    assert!(as_api_type::<Job>(&broken("completions: 2", "completions: two")).is_err());
    assert!(as_api_type::<DaemonSet>(&yaml).is_err());
}

/// The container's shell line, run by the machine's `sh` with a fake `gpuenv` (and `pip`)
/// first on PATH: the fake doctor prints a document and exits `code`.
fn shell(script: &str, bin: &Path, code: i32) -> Command {
    let mut cmd = Command::new("sh");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    cmd.args(["-c", script])
        .env("PATH", path)
        .env("FAKE_DOCTOR_CODE", code.to_string())
        .stdin(Stdio::null());
    cmd
}

const REPORT: &str = r#"{"schema_version": 1, "host": {}, "checks": []}"#;

fn fakes(pip_code: i32) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write(
        "gpuenv",
        format!(
            "#!/bin/sh\n[ \"$1 $2\" = 'doctor --json' ] || exit 99\necho 'probing' >&2\nprintf '%s\\n' '{REPORT}'\nexit \"$FAKE_DOCTOR_CODE\"\n"
        ),
    );
    // pip writes to stdout when it works: the line must send it to stderr.
    write(
        "pip",
        format!("#!/bin/sh\necho 'Successfully installed gpuenv'\nexit {pip_code}\n"),
    );
    dir
}

fn script_of(args: &[&str]) -> String {
    let yaml = manifest(args);
    let plain: Value = serde_norway::from_str(&yaml).unwrap();
    let command = &plain["spec"]["template"]["spec"]["containers"][0]["command"];
    command[2].as_str().unwrap().to_string()
}

#[test]
fn fleet_k8s_the_job_exits_0_on_a_report_with_findings_and_keeps_worse_codes() {
    let bin = fakes(0);
    for image in [&["--image", "train:1"][..], &[][..]] {
        let script = script_of(image);
        for (doctor, expected) in [(0, 0), (1, 0), (2, 2), (3, 3)] {
            let out = shell(&script, bin.path(), doctor).output().unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert_eq!(
                out.status.code(),
                Some(expected),
                "{image:?}, doctor {doctor}: {stdout}"
            );
            assert_eq!(
                stdout,
                format!("{REPORT}\n"),
                "{image:?}: stdout is the report alone"
            );
        }
    }
    // pip failing: gpuenv's own code for an environment that failed, and no report.
    let script = script_of(&[]);
    let out = shell(&script, fakes(1).path(), 0).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("could not install gpuenv=="));
}

#[test]
fn fleet_k8s_the_daemonset_pod_keeps_running_after_its_report_and_ends_on_term() {
    let bin = fakes(0);
    let script = script_of(&["--kind", "daemonset", "--image", "train:1"]);
    // Its own process group, so that the sleep it leaves behind is ended with it.
    let mut child = shell(&script, bin.path(), 1)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id() as libc::pid_t;
    let kill_group = || {
        // SAFETY: signalling the process group this test started.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    };
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, format!("{REPORT}\n"));
    std::thread::sleep(Duration::from_millis(300));
    let running = child.try_wait().unwrap().is_none();
    if !running {
        kill_group();
    }
    assert!(
        running,
        "a DaemonSet's pod that ends is restarted, and doctor runs again"
    );
    // SAFETY: signalling the shell this test started.
    unsafe { libc::kill(pgid, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(10) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    kill_group();
    let _ = child.wait();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "TERM ends it at once");

    // A doctor that could not report ends the pod, so that Kubernetes shows it failing.
    let out = shell(&script, bin.path(), 3).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
}

fn refused(args: &[&str]) -> Run {
    let mut a = vec!["fleet", "k8s-manifest"];
    a.extend_from_slice(args);
    let run = gpuenv(&a);
    assert_eq!(run.code, 2, "{args:?}: {}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    run
}

#[test]
fn fleet_k8s_bad_values_exit_2_naming_the_flag_and_print_nothing() {
    let long = "a".repeat(64);
    let long_for_a_job = "a".repeat(62);
    let cases: &[(&[&str], &str, &str)] = &[
        (&["--image", ""], "--image", "empty"),
        (&["--image", "Train Image"], "--image", "gpuenv on PATH"),
        (&["--nodes", "0"], "--nodes", "1 to 100000"),
        (&["--nodes", "100001"], "--nodes", "1 to 100000"),
        (&["--gpus-per-node", "0"], "--gpus-per-node", "at least 1"),
        (
            &["--node-selector", "nvidia.com/gpu.present"],
            "--node-selector",
            "KEY=VALUE",
        ),
        (&["--node-selector", "=true"], "--node-selector", "label key"),
        (&["--node-selector", "pool="], "--node-selector", "label value"),
        (&["--node-selector", "pool=a b"], "--node-selector", "label value"),
        (&["--name", "Fleet_1"], "--name", "DNS-1123"),
        (&["--name", ""], "--name", "DNS-1123"),
        (&["--name=-fleet"], "--name", "DNS-1123"),
        (&["--name", &long], "--name", "DNS-1123"),
        (
            &["--name", &long_for_a_job, "--nodes", "10"],
            "--name",
            "at most 61 characters",
        ),
        (&["--namespace", "Kube_System"], "--namespace", "DNS-1123"),
        (
            &["--kind", "daemonset", "--nodes", "3"],
            "--nodes",
            "every matching node",
        ),
        (
            &["--kind", "daemonset", "--gpus-per-node", "8"],
            "--gpus-per-node",
            "no GPU",
        ),
    ];
    for (args, flag, expected) in cases {
        let run = refused(args);
        assert!(run.stderr.contains(flag), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
    // clap's own refusals are usage errors too.
    for args in [
        &["--kind", "cronjob"][..],
        &["--nodes", "-1"][..],
        &["--nodes"][..],
    ] {
        refused(args);
    }
}
