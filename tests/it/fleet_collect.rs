//! `gpuenv fleet collect` through real engines: a Slurm cluster of two nodes (Debian's
//! slurmctld, two slurmd and munge, started by `scripts/test-services`), a loopback sshd,
//! and, for `--kubectl` (no cluster here), a stand-in `kubectl` that answers as the real one
//! does. Each node is handed its own recorded host (Slurm's task prolog, ssh's `SetEnv`)
//! so that the nodes differ as rented nodes do.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

use crate::support::{derived_host, gpuenv_env, json, root, services};

/// One collection at a time: the test cluster's nodes have one CPU each, and a second
/// `srun` would wait for the first.
static CLUSTER: Mutex<()> = Mutex::new(());

fn slurm_conf() -> String {
    root()
        .join("target/test-services/slurm/slurm.conf")
        .display()
        .to_string()
}

/// Hands Slurm node `node` the recorded host `facts` (the task prolog exports
/// `GPUENV_HOST_FACTS` for it), or a file that is no record when `None`.
fn plant(node: &str, facts: Option<&Path>) {
    let dir = root().join("target/test-services/slurm/nodes").join(node);
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("host.json");
    let _ = std::fs::remove_file(&target);
    match facts {
        Some(f) => {
            std::fs::copy(f.join("host.json"), &target).unwrap();
        }
        // A record that does not read: gpuenv on that node refuses it and exits 2.
        None => std::fs::write(&target, "not a host record").unwrap(),
    }
}

fn unplant() {
    let _ = std::fs::remove_dir_all(root().join("target/test-services/slurm/nodes"));
}

/// A recorded host renamed to `hostname`.
fn named(host: &str, hostname: &str) -> tempfile::TempDir {
    let name = format!("{hostname}\n");
    derived_host(host, |r| {
        r["files"]["/proc/sys/kernel/hostname"] = Value::String(name);
    })
}

/// Two nodes as a rented pair can differ: 8x H100 with RDMA, and one whose kernel module
/// differs from its user-space driver and shows no GPU.
fn plant_drift() -> (tempfile::TempDir, tempfile::TempDir) {
    let a = named("2-socket-rdma", "gpu-node-07");
    let b = named("nvml-mismatch", "gpu-node-08");
    plant("node1", Some(a.path()));
    plant("node2", Some(b.path()));
    (a, b)
}

fn collect(dir: &Path, args: &[&str]) -> (i32, Value, String) {
    let conf = slurm_conf();
    let mut all = vec!["fleet", "collect"];
    all.extend_from_slice(args);
    all.push("--json");
    let run = gpuenv_env(dir, &all, &[("SLURM_CONF", &conf)]);
    let doc = if run.stdout.trim().is_empty() {
        Value::Null
    } else {
        json(&run)
    };
    (run.code, doc, run.stderr)
}

fn fleet_report(dir: &Path) -> (i32, Value) {
    let run = gpuenv_env(
        Path::new("."),
        &["fleet", "report", dir.to_str().unwrap(), "--json"],
        &[],
    );
    (run.code, json(&run))
}

fn drift_kinds(doc: &Value) -> Vec<String> {
    doc["drift"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_string())
        .collect()
}

fn drift_of<'a>(doc: &'a Value, kind: &str) -> &'a Value {
    doc["drift"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} drift in {doc:#}"))
}

#[test]
fn slurm_collects_every_node_and_the_report_sees_the_planted_drift() {
    services();
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let _facts = plant_drift();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("reports");
    let (code, doc, stderr) = collect(
        work.path(),
        &["--slurm", "--out", out.to_str().unwrap(), "--timeout", "120"],
    );
    unplant();
    // gpu-node-08 fails doctor's own driver-module check.
    assert_eq!(code, 1, "{stderr}\n{doc:#}");
    assert_eq!(doc["engine"], "slurm");
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{doc:#}");
    assert!(nodes.iter().all(|n| n["collected"] == true), "{doc:#}");
    let mut hosts: Vec<&str> = nodes.iter().map(|n| n["hostname"].as_str().unwrap()).collect();
    hosts.sort();
    assert_eq!(hosts, ["gpu-node-07", "gpu-node-08"]);
    // The Slurm node names stay beside the host names they reported.
    let mut slurm_names: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    slurm_names.sort();
    assert_eq!(slurm_names, ["node1", "node2"]);
    assert!(out.join("gpu-node-07.json").is_file());
    assert!(out.join("gpu-node-08.json").is_file());

    let (code, report) = fleet_report(&out);
    assert_eq!(code, 1, "{report:#}");
    let kinds = drift_kinds(&report);
    for k in ["gpu-model", "gpu-count", "failing-checks"] {
        assert!(kinds.contains(&k.to_string()), "{k} missing: {kinds:?}");
    }
    let failing = drift_of(&report, "failing-checks");
    let driver_module = failing["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["value"].as_str().unwrap().contains("driver-module"))
        .unwrap_or_else(|| panic!("{failing:#}"));
    assert_eq!(driver_module["nodes"], serde_json::json!(["gpu-node-08"]));
}

#[test]
fn slurm_inside_an_allocation_uses_it() {
    services();
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let a = named("8x-h100-nvlink", "alloc-a");
    let b = named("8x-h100-nvlink", "alloc-b");
    plant("node1", Some(a.path()));
    plant("node2", Some(b.path()));
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("reports");
    let conf = slurm_conf();
    // salloc holds both nodes and runs gpuenv with SLURM_JOB_ID set: its srun must run in
    // that allocation (a new one would wait for the nodes salloc holds, until the timeout).
    let run = crate::support::run(
        crate::support::command(
            Path::new("/usr/bin/salloc"),
            work.path(),
            &[
                "--nodes=2",
                "--time=3",
                "--quiet",
                env!("CARGO_BIN_EXE_gpuenv"),
                "fleet",
                "collect",
                "--slurm",
                "--out",
                out.to_str().unwrap(),
                "--timeout",
                "60",
                "--json",
            ],
            &[("SLURM_CONF", &conf)],
        )
        .env_remove("SLURM_JOB_ID"),
    );
    unplant();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = json(&run);
    let mut hosts: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["hostname"].as_str().unwrap())
        .collect();
    hosts.sort();
    assert_eq!(hosts, ["alloc-a", "alloc-b"], "{doc:#}");
    let (code, report) = fleet_report(&out);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["drift"], Value::Array(vec![]), "{report:#}");
}

#[test]
fn a_slurm_node_that_fails_is_kept_with_srun_reason() {
    services();
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let a = named("8x-h100-nvlink", "good-node");
    plant("node1", Some(a.path()));
    // gpuenv on node2 is handed a file that is no host record: it exits 2.
    plant("node2", None);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("reports");
    let (code, doc, stderr) = collect(
        work.path(),
        &[
            "--slurm",
            "--nodelist",
            "node[1-2]",
            "--out",
            out.to_str().unwrap(),
            "--timeout",
            "120",
        ],
    );
    unplant();
    assert_eq!(code, 1, "{stderr}\n{doc:#}");
    let nodes = doc["nodes"].as_array().unwrap();
    let failed: Vec<&Value> = nodes.iter().filter(|n| n["collected"] == false).collect();
    assert_eq!(failed.len(), 1, "{doc:#}");
    assert_eq!(failed[0]["node"], "node2");
    let reason = failed[0]["reason"].as_str().unwrap();
    assert!(reason.contains("exit code 2"), "srun's words: {reason}");
    // The failure is a file of its own, with the node's last error lines.
    let text = std::fs::read_to_string(out.join("node2.json")).unwrap();
    let f: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(f["collect_failure"]["engine"], "slurm");
    assert_eq!(f["collect_failure"]["exit_code"], 2);
    assert!(
        !f["collect_failure"]["stderr"].as_array().unwrap().is_empty(),
        "{f:#}"
    );

    let (code, report) = fleet_report(&out);
    assert_eq!(code, 1, "{report:#}");
    let none = drift_of(&report, "no-report");
    assert_eq!(none["values"][0]["nodes"][0], "node2", "{none:#}");
    // Its unknown facts are not drift.
    assert!(
        !drift_kinds(&report).contains(&"gpu-count".to_string()),
        "{report:#}"
    );
}

#[test]
fn a_slurm_node_that_hangs_is_kept_as_timed_out() {
    services();
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let hang = work.path().join("hang.sh");
    std::fs::write(&hang, "#!/bin/sh\nexec sleep 300\n").unwrap();
    std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = work.path().join("reports");
    let started = std::time::Instant::now();
    let (code, doc, stderr) = collect(
        work.path(),
        &[
            "--slurm",
            "--nodes",
            "1",
            "--gpuenv",
            hang.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--timeout",
            "5",
        ],
    );
    assert_eq!(code, 1, "{stderr}\n{doc:#}");
    let n = &doc["nodes"][0];
    assert_eq!(n["collected"], false, "{doc:#}");
    // Named by the node Slurm gave the job, though it printed nothing.
    assert!(n["node"].as_str().unwrap().starts_with("node"), "{doc:#}");
    let reason = n["reason"].as_str().unwrap();
    assert!(
        reason.contains("TIME LIMIT") || reason.contains("within 5s"),
        "{reason}"
    );
    // gpuenv stopped srun at its deadline and cancelled the job, not after the hang's five
    // minutes.
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

#[test]
fn slurm_bad_input_runs_nothing() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("full");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("old.json"), "{}").unwrap();
    let (code, _, stderr) = collect(work.path(), &["--slurm", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not empty"), "{stderr}");
    let (code, _, stderr) = collect(work.path(), &["--partition", "gpu"]);
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = collect(work.path(), &["--slurm", "--nodes", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--nodes"), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// ssh
// ---------------------------------------------------------------------------------------

fn ssh_dir() -> PathBuf {
    root().join("target/test-services/sshd")
}

fn ssh_port() -> String {
    std::env::var("GPUENV_TEST_SSH_PORT").unwrap_or_else(|_| "16822".into())
}

fn user() -> String {
    let out = std::process::Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// An ssh configuration for the loopback sshd: each host with its own recorded facts
/// (`SetEnv`), and `node-down` on a port where nothing listens.
fn ssh_config(dir: &Path, hosts: &[(&str, &Path)]) -> PathBuf {
    let d = ssh_dir();
    let mut text = String::new();
    for (name, facts) in hosts {
        text.push_str(&format!(
            "Host {name}\n  HostName 127.0.0.1\n  Port {}\n  SetEnv GPUENV_HOST_FACTS={}\n",
            ssh_port(),
            facts.join("host.json").display()
        ));
    }
    text.push_str("Host node-down\n  HostName 127.0.0.1\n  Port 1\n");
    text.push_str(&format!(
        "Host *\n  User {}\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
        user(),
        d.join("client_ed25519").display(),
        d.join("known_hosts").display()
    ));
    let path = dir.join("ssh_config");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn ssh_collects_each_host_and_keeps_the_unreachable_one() {
    services();
    let work = tempfile::tempdir().unwrap();
    let a = named("2-socket-rdma", "ssh-a");
    let b = named("7x-a100-40gb-driver-525", "ssh-b");
    let config = ssh_config(work.path(), &[("node-a", a.path()), ("node-b", b.path())]);
    let hosts = work.path().join("hosts");
    std::fs::write(
        &hosts,
        "# the rented nodes\nnode-a\nnode-b   # the older one\nnode-down\n",
    )
    .unwrap();
    let out = work.path().join("reports");
    let (code, doc, stderr) = collect(
        work.path(),
        &[
            "--hosts",
            hosts.to_str().unwrap(),
            "--ssh-config",
            config.to_str().unwrap(),
            "--gpuenv",
            env!("CARGO_BIN_EXE_gpuenv"),
            "--parallel",
            "2",
            "--timeout",
            "60",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{stderr}\n{doc:#}");
    assert_eq!(doc["engine"], "ssh");
    let nodes = doc["nodes"].as_array().unwrap();
    // In the file's order.
    let names: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(names, ["node-a", "node-b", "node-down"]);
    assert_eq!(nodes[0]["hostname"], "ssh-a", "{doc:#}");
    assert_eq!(nodes[1]["hostname"], "ssh-b", "{doc:#}");
    assert_eq!(nodes[2]["collected"], false);
    let reason = nodes[2]["reason"].as_str().unwrap();
    assert!(
        reason.contains("ssh failed") && reason.contains("refused"),
        "{reason}"
    );
    assert!(out.join("node-down.json").is_file());

    let (code, report) = fleet_report(&out);
    assert_eq!(code, 1, "{report:#}");
    let kinds = drift_kinds(&report);
    for k in ["driver-branch", "gpu-count", "no-report"] {
        assert!(kinds.contains(&k.to_string()), "{k} missing: {kinds:?}");
    }
}

#[test]
fn a_hosts_file_line_that_ssh_would_read_as_an_option_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let hosts = work.path().join("hosts");
    std::fs::write(&hosts, "node-a\n-oProxyCommand=touch /tmp/pwned\nnode-b node-c\n").unwrap();
    let out = work.path().join("reports");
    let (code, _, stderr) = collect(
        work.path(),
        &["--hosts", hosts.to_str().unwrap(), "--out", out.to_str().unwrap()],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(":2:") && stderr.contains(":3:"), "{stderr}");
    assert!(!out.exists());
}

// ---------------------------------------------------------------------------------------
// kubectl (simulated: no cluster here)
// ---------------------------------------------------------------------------------------

/// A stand-in `kubectl` in `dir`: `get pods` answers `pods.json`, `logs POD` the file
/// `POD.log`; each call's arguments are appended to `calls`.
fn fake_kubectl(dir: &Path) {
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {d}/calls\ncase \"$1\" in\n  get) cat {d}/pods.json ;;\n  logs) cat {d}/\"$2\".log ;;\n  *) echo \"unknown: $1\" >&2; exit 1 ;;\nesac\n",
        d = dir.display()
    );
    let path = dir.join("kubectl");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn kubectl_reads_each_pod_log_and_keeps_the_pending_pod() {
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    fake_kubectl(&bin);
    let facts = named("8x-h100-nvlink", "k8s-gpu-1");
    let report = gpuenv_env(
        work.path(),
        &["doctor", "--host-facts", facts.path().to_str().unwrap(), "--json"],
        &[],
    );
    std::fs::write(bin.join("gpuenv-fleet-0-abcde.log"), &report.stdout).unwrap();
    std::fs::write(
        bin.join("pods.json"),
        serde_json::json!({
            "apiVersion": "v1", "kind": "List",
            "items": [
                {"metadata": {"name": "gpuenv-fleet-0-abcde"},
                 "spec": {"nodeName": "k8s-gpu-1"},
                 "status": {"phase": "Succeeded", "containerStatuses": [
                     {"name": "gpuenv", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}},
                {"metadata": {"name": "gpuenv-fleet-1-fghij"},
                 "spec": {},
                 "status": {"phase": "Pending", "conditions": [
                     {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]}}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = work.path().join("reports");
    let run = gpuenv_env(
        work.path(),
        &[
            "fleet",
            "collect",
            "--kubectl",
            "gpuenv-fleet",
            "--namespace",
            "gpu-check",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
        &[("PATH", &path)],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc = json(&run);
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes[0]["node"], "k8s-gpu-1");
    assert_eq!(nodes[0]["collected"], true);
    assert_eq!(nodes[1]["collected"], false);
    let reason = nodes[1]["reason"].as_str().unwrap();
    assert!(reason.contains("Insufficient nvidia.com/gpu"), "{reason}");
    let calls = std::fs::read_to_string(bin.join("calls")).unwrap();
    assert!(
        calls.contains("--selector app.kubernetes.io/instance=gpuenv-fleet")
            && calls.contains("--namespace gpu-check"),
        "{calls}"
    );
    assert!(
        calls.contains("logs gpuenv-fleet-0-abcde --container gpuenv"),
        "{calls}"
    );
    assert!(
        !calls.contains("gpuenv-fleet-1-fghij"),
        "a pending pod has no log: {calls}"
    );
    assert!(out.join("k8s-gpu-1.json").is_file());

    // The pending pod's node is judged nowhere: neither accepted nor refused.
    let run = gpuenv_env(
        work.path(),
        // The pods' reports replay a host recorded before `doctor` read every health
        // fact: unknowns allowed.
        &[
            "fleet",
            "report",
            out.to_str().unwrap(),
            "--expect-gpus",
            "8",
            "--allow-health",
            "unknown",
        ],
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.contains("k8s-gpu-1: order: accepted")
            && run
                .stdout
                .contains("pod/gpuenv-fleet-1-fghij: order: not judged, no report"),
        "{}",
        run.stdout
    );
}

#[test]
fn kubectl_name_must_be_a_kubernetes_name() {
    let work = tempfile::tempdir().unwrap();
    let run = gpuenv_env(
        work.path(),
        &["fleet", "collect", "--kubectl", "Bad_Name", "--out", "x"],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--kubectl"), "{}", run.stderr);
}

#[test]
fn doctor_record_puts_each_host_under_its_own_name() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("records").join("{hostname}");
    let run = gpuenv_env(
        work.path(),
        &["doctor", "--json", "--record", target.to_str().unwrap()],
        &[],
    );
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let record = work.path().join("records").join(name.trim()).join("host.json");
    assert!(record.is_file(), "no {}", record.display());
    assert!(!work.path().join("records").join("{hostname}").exists());
}

// ---------------------------------------------------------------------------------------
// --bench: `gpuenv bench --json` on every node
// ---------------------------------------------------------------------------------------

/// The host side of the bench, small: each node measures this machine's disk (under
/// `disk`), memory and loopback network, and downloads nothing.
fn small_bench(disk: &Path) -> Vec<String> {
    let mut args = Vec::new();
    for word in [
        "--host-only",
        "--allow-system-disk",
        "--path",
        disk.to_str().unwrap(),
        "--disk-size",
        "64MiB",
        "--memory-size",
        "64MiB",
        "--seconds=1",
        "--no-download",
    ] {
        args.push("--bench-arg".to_string());
        args.push(word.to_string());
    }
    args
}

fn figures_of(file: &Path) -> Vec<Value> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(doc["schema_version"], 1, "{doc:#}");
    doc["figures"].as_array().unwrap().clone()
}

#[test]
fn slurm_bench_collects_results_that_fleet_report_matches_to_the_node() {
    services();
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    // This machine as it is on both nodes: the bench measures it, and doctor reads it.
    unplant();
    let work = tempfile::tempdir().unwrap();
    let results = work.path().join("bench");
    let mut args: Vec<String> = ["--slurm", "--nodelist", "node[1-2]", "--bench", "--out"]
        .map(String::from)
        .to_vec();
    args.push(results.to_str().unwrap().into());
    args.extend(small_bench(work.path()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, doc, stderr) = collect(work.path(), &args);
    assert_eq!(code, 0, "{stderr}\n{doc:#}");
    assert_eq!(doc["engine"], "slurm");
    assert_eq!(doc["command"], "bench");
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{doc:#}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    for n in nodes {
        assert_eq!(n["collected"], true, "{doc:#}");
        assert_eq!(n["hostname"], host, "{doc:#}");
        assert_eq!(n["worst"], "pass", "{doc:#}");
        // Each node's results, as its bench printed them: the host's figures.
        let figures = figures_of(&results.join(n["file"].as_str().unwrap()));
        let metrics: Vec<&str> = figures.iter().map(|f| f["metric"].as_str().unwrap()).collect();
        for m in ["disk-seq-read", "disk-seq-write", "host-memory-bandwidth"] {
            assert!(metrics.contains(&m), "{m} missing: {metrics:?}");
        }
    }
    // Both nodes are this machine: named apart, none dropped.
    assert_eq!(nodes[0]["file"], format!("{host}.json"), "{doc:#}");
    assert_eq!(nodes[1]["file"], format!("{host}~node2.json"), "{doc:#}");
    // No test file left behind on the disk the nodes measured.
    let left: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".gpuenv-bench"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // The node's doctor report beside its bench results: fleet report matches them (one
    // node, so one report and one of the results).
    let reports = work.path().join("reports");
    let (code, doc, stderr) = collect(
        work.path(),
        &[
            "--slurm",
            "--nodelist",
            "node1",
            "--out",
            reports.to_str().unwrap(),
        ],
    );
    assert!(code == 0 || code == 1, "{stderr}\n{doc:#}");
    assert_eq!(doc["command"], "doctor");
    std::fs::remove_file(results.join(format!("{host}~node2.json"))).unwrap();
    let run = gpuenv_env(
        Path::new("."),
        &[
            "fleet",
            "report",
            reports.to_str().unwrap(),
            results.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    let report = json(&run);
    assert_eq!(report["problems"], Value::Array(vec![]), "{report:#}");
    let node = &report["nodes"][0];
    assert_eq!(node["node"], host, "{report:#}");
    let bench_file = node["bench"]["file"]
        .as_str()
        .unwrap_or_else(|| panic!("{report:#}"));
    assert!(bench_file.ends_with(&format!("{host}.json")), "{report:#}");
}

#[test]
fn ssh_bench_keeps_a_node_that_measured_nothing_as_a_failure() {
    services();
    let work = tempfile::tempdir().unwrap();
    let a = named("8x-h100-nvlink", "ssh-bench-a");
    let config = ssh_config(work.path(), &[("node-a", a.path())]);
    let hosts = work.path().join("hosts");
    std::fs::write(&hosts, "node-a\nnode-down\n").unwrap();
    let out = work.path().join("bench");
    // This machine has no GPU: `bench --gpu-only` prints results with no figure and exits 3.
    let (code, doc, stderr) = collect(
        work.path(),
        &[
            "--hosts",
            hosts.to_str().unwrap(),
            "--ssh-config",
            config.to_str().unwrap(),
            "--gpuenv",
            env!("CARGO_BIN_EXE_gpuenv"),
            "--bench",
            "--bench-arg",
            "--gpu-only",
            "--timeout",
            "120",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{stderr}\n{doc:#}");
    assert_eq!(doc["command"], "bench");
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes[0]["node"], "node-a");
    assert_eq!(nodes[0]["collected"], false, "{doc:#}");
    let reason = nodes[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("status 3") && reason.contains("measured nothing") && reason.contains("--gpu-only"),
        "{reason}"
    );
    let f: Value = serde_json::from_str(&std::fs::read_to_string(out.join("node-a.json")).unwrap()).unwrap();
    assert_eq!(f["collect_failure"]["exit_code"], 3, "{f:#}");
    assert_eq!(f["collect_failure"]["engine"], "ssh", "{f:#}");
    assert_eq!(nodes[1]["collected"], false);
    assert!(
        nodes[1]["reason"].as_str().unwrap().contains("ssh failed"),
        "{doc:#}"
    );
}

#[test]
fn ssh_bench_collects_results_with_the_flags_passed_on() {
    services();
    let work = tempfile::tempdir().unwrap();
    let a = named("8x-h100-nvlink", "ssh-bench-a");
    let config = ssh_config(work.path(), &[("node-a", a.path())]);
    let hosts = work.path().join("hosts");
    std::fs::write(&hosts, "node-a\n").unwrap();
    let out = work.path().join("bench");
    let mut args: Vec<String> = vec![
        "--hosts".into(),
        hosts.to_str().unwrap().into(),
        "--ssh-config".into(),
        config.to_str().unwrap().into(),
        "--gpuenv".into(),
        env!("CARGO_BIN_EXE_gpuenv").into(),
        "--bench".into(),
        "--out".into(),
        out.to_str().unwrap().into(),
    ];
    args.extend(small_bench(work.path()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, doc, stderr) = collect(work.path(), &args);
    assert_eq!(code, 0, "{stderr}\n{doc:#}");
    let n = &doc["nodes"][0];
    assert_eq!(n["collected"], true, "{doc:#}");
    let figures = figures_of(&out.join(n["file"].as_str().unwrap()));
    // The flags reached the node: a 64 MiB file in the directory given, and fio's random
    // reads timed for the one second given.
    let detail = |engine: &str| {
        figures
            .iter()
            .find(|f| f["metric"] == "disk-rand-read" && f["engine"] == engine)
            .and_then(|f| f["detail"].as_str())
            .unwrap_or_else(|| panic!("no {engine} random reads: {figures:#?}"))
            .to_string()
    };
    let ours = detail("gpuenv");
    assert!(
        ours.contains("of a 64 MiB file") && ours.contains(&format!("in `{}`", work.path().display())),
        "{ours}"
    );
    assert!(detail("fio").contains("--runtime=1 "), "{}", detail("fio"));
}

#[test]
fn bench_flags_outside_the_allow_list_and_kubectl_are_refused_before_anything_runs() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("bench");
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--slurm",
                "--bench",
                "--bench-arg",
                "--record",
                "--bench-arg",
                "/tmp/x",
            ],
            "not a bench flag",
        ),
        (
            &["--slurm", "--bench", "--bench-arg=--peer=evil"],
            "not a bench flag",
        ),
        (
            &["--slurm", "--bench", "--bench-arg", "--burn"],
            "value is missing",
        ),
        (
            &[
                "--slurm",
                "--bench",
                "--bench-arg",
                "--path",
                "--bench-arg",
                "-oProxyCommand=x",
            ],
            "expected its value",
        ),
        (
            &["--slurm", "--bench", "--bench-arg", "--quick=yes"],
            "takes no value",
        ),
        (
            &[
                "--slurm",
                "--bench",
                "--bench-arg",
                "--quick",
                "--bench-arg",
                "--full",
            ],
            "would be refused",
        ),
        (
            &[
                "--slurm",
                "--bench",
                "--bench-arg",
                "--disk-size",
                "--bench-arg",
                "lots",
            ],
            "--disk-size",
        ),
        (&["--slurm", "--bench", "--record", "/tmp/r"], "--record"),
        (
            &["--kubectl", "gpuenv-fleet", "--bench"],
            "run `gpuenv doctor --json`",
        ),
        (&["--slurm", "--bench-arg", "--quick"], "--bench"),
    ];
    for (args, says) in cases {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--out", out.to_str().unwrap()]);
        let (code, _, stderr) = collect(work.path(), &all);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?}");
    }
}
