//! `gpuenv fleet k8s-manifest`: the Kubernetes workload that runs `gpuenv doctor --json`
//! once on every GPU node, so that each pod's log is one node's report.
//!
//! Owns: the manifest as data (a Job or a DaemonSet, as a [`serde_json::Value`] in
//! Kubernetes' field order), the contract `fleet collect --kubectl` reads it by (the labels
//! [`NAME_LABEL`] and [`INSTANCE_LABEL`], the container [`CONTAINER`], a log that is one
//! report), the shell line that maps doctor's exit codes for Kubernetes, and the checks of
//! the flags' values against what the API server accepts ([`InputError`]). Must not: print
//! or choose a format (that is `report`), parse image names (the caller hands over one the
//! image grammar read), or talk to a cluster: nothing here runs `kubectl`.

use serde_json::{Value, json};

/// The label every pod carries, whatever the instance: what the workload is.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// [`NAME_LABEL`]'s value.
pub const APP: &str = "gpuenv-fleet";
/// The label that tells one run from another: `--name`'s value. `fleet collect --kubectl
/// NAME` lists the pods by it.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// The container whose log is the report.
pub const CONTAINER: &str = "gpuenv";
/// `--name` when none is given.
pub const DEFAULT_NAME: &str = "gpuenv-fleet";
/// The image without `--image`: a Python to `pip install gpuenv` into.
pub const DEFAULT_IMAGE: &str = "python:3.12-slim";
/// `--nodes` when none is given: the smallest count at which drift means anything.
pub const DEFAULT_NODES: u32 = 2;
/// `--gpus-per-node` when none is given: the common size of a training node.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;
/// The node label NVIDIA GPU Feature Discovery (and so the GPU Operator) sets on a node
/// with a GPU.
pub const GPU_PRESENT_LABEL: &str = "nvidia.com/gpu.present";
/// The resource and the taint of NVIDIA's device plugin.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// How long a Job may run, pulls included: a training image of tens of GB can take many
/// minutes to pull, doctor itself takes seconds.
pub const JOB_DEADLINE_S: u32 = 1800;
/// How long a finished Job (and so its pods' logs) is kept for collection: a day.
pub const JOB_TTL_S: u32 = 86_400;
/// Kubernetes refuses an Indexed Job of more completions than this.
pub const MAX_NODES: u32 = 100_000;

/// Which workload runs doctor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// A Job of a pod per node, each ending once doctor ran.
    Job,
    /// A pod on every matching node, which sleeps once doctor ran.
    DaemonSet,
}

/// What the flags asked for. Unset values take this module's defaults.
#[derive(Debug, Clone)]
pub struct Request {
    /// An image with gpuenv on PATH and `/bin/sh`, already read as an image name; `None`
    /// for [`DEFAULT_IMAGE`], which installs gpuenv from PyPI.
    pub image: Option<String>,
    /// The workload.
    pub workload: Workload,
    /// The Job's pod count (a Job only).
    pub nodes: Option<u32>,
    /// The GPUs each Job pod asks for (a Job only).
    pub gpus_per_node: Option<u32>,
    /// The workload's name and the [`INSTANCE_LABEL`] value; `None` for [`DEFAULT_NAME`].
    pub name: Option<String>,
    /// The namespace; `None` leaves it to `kubectl`'s context.
    pub namespace: Option<String>,
    /// `KEY=VALUE`: the node label required in place of [`GPU_PRESENT_LABEL`]`=true`.
    pub node_selector: Option<String>,
}

/// A flag's value that Kubernetes (or this manifest) cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {flag} `{value}`: {expected}")]
pub struct InputError {
    /// The flag, `--name`.
    pub flag: &'static str,
    /// The value given.
    pub value: String,
    /// What was expected instead, in words.
    pub expected: String,
}

fn bad(flag: &'static str, value: impl ToString, expected: impl Into<String>) -> InputError {
    InputError {
        flag,
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// Whether `s` is a DNS-1123 label: what Kubernetes takes as a namespace, a host name, and
/// (as [`INSTANCE_LABEL`]'s value too) the name of a Job or DaemonSet here.
pub fn dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Whether `s` is a label's name part or a non-empty label value: up to 63 of
/// `[A-Za-z0-9_.-]`, starting and ending alphanumeric.
fn label_word(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Whether `s` is a label key: `[PREFIX/]NAME`, the prefix a DNS-1123 subdomain.
fn label_key(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => prefix.len() <= 253 && prefix.split('.').all(dns_label) && label_word(name),
        None => label_word(s),
    }
}

const LABEL_RULE: &str =
    "up to 63 letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit";

/// The checked flags, defaults filled in.
struct Checked<'a> {
    name: &'a str,
    selector: (&'a str, &'a str),
    nodes: u32,
    gpus: u32,
}

fn check(r: &Request) -> Result<Checked<'_>, InputError> {
    let name = r.name.as_deref().unwrap_or(DEFAULT_NAME);
    if !dns_label(name) {
        return Err(bad(
            "--name",
            name,
            "expected a DNS-1123 label (up to 63 lowercase letters, digits or `-`, starting and ending with a letter or digit), as Kubernetes requires of a name and a label value",
        ));
    }
    if let Some(ns) = r.namespace.as_deref().filter(|ns| !dns_label(ns)) {
        return Err(bad(
            "--namespace",
            ns,
            "expected a namespace's name: a DNS-1123 label (up to 63 lowercase letters, digits or `-`, starting and ending with a letter or digit)",
        ));
    }
    let selector = match r.node_selector.as_deref() {
        None => (GPU_PRESENT_LABEL, "true"),
        Some(s) => {
            let Some((key, value)) = s.split_once('=') else {
                return Err(bad(
                    "--node-selector",
                    s,
                    format!(
                        "expected KEY=VALUE, a node label and its value, such as `{GPU_PRESENT_LABEL}=true`"
                    ),
                ));
            };
            if !label_key(key) {
                return Err(bad(
                    "--node-selector",
                    s,
                    format!(
                        "`{key}` is not a label key; expected [PREFIX/]NAME, the prefix a DNS subdomain and NAME {LABEL_RULE}"
                    ),
                ));
            }
            if !label_word(value) {
                return Err(bad(
                    "--node-selector",
                    s,
                    format!("`{value}` is not a label value; expected {LABEL_RULE}"),
                ));
            }
            (key, value)
        }
    };
    let (nodes, gpus) = match r.workload {
        Workload::DaemonSet => {
            // A DaemonSet has neither: it runs on every matching node and holds no GPU.
            // Taking either silently would let a user believe it counted.
            if let Some(n) = r.nodes {
                return Err(bad(
                    "--nodes",
                    n,
                    "a DaemonSet runs on every matching node; leave --nodes out, or use --kind job",
                ));
            }
            if let Some(n) = r.gpus_per_node {
                return Err(bad(
                    "--gpus-per-node",
                    n,
                    "a DaemonSet asks for no GPU (it sees them all); leave --gpus-per-node out, or use --kind job",
                ));
            }
            (0, 0)
        }
        Workload::Job => {
            let nodes = r.nodes.unwrap_or(DEFAULT_NODES);
            if !(1..=MAX_NODES).contains(&nodes) {
                return Err(bad(
                    "--nodes",
                    nodes,
                    format!("expected 1 to {MAX_NODES} nodes (Kubernetes' limit for an Indexed Job)"),
                ));
            }
            let gpus = r.gpus_per_node.unwrap_or(DEFAULT_GPUS_PER_NODE);
            if gpus == 0 {
                return Err(bad(
                    "--gpus-per-node",
                    gpus,
                    "expected at least 1: a pod that asks for no GPU sees none (--kind daemonset sees them all without holding them)",
                ));
            }
            // The Job controller names each pod's host `NAME-INDEX`, which must be a DNS
            // label too, or every pod of the Job is refused.
            let longest = name.len() + 1 + (nodes - 1).to_string().len();
            if longest > 63 {
                return Err(bad(
                    "--name",
                    name,
                    format!(
                        "the Job's pods are given the host names `{name}-0` to `{name}-{}`, which Kubernetes refuses past 63 characters; expected a name of at most {} characters",
                        nodes - 1,
                        63 - (longest - name.len())
                    ),
                ));
            }
            (nodes, gpus)
        }
    };
    Ok(Checked {
        name,
        selector,
        nodes,
        gpus,
    })
}

/// The shell line the container runs: `sh -c` only for doctor's exit code, which a pod
/// cannot map by itself.
pub fn script(image_has_gpuenv: bool, workload: Workload) -> String {
    let mut lines = Vec::new();
    if !image_has_gpuenv {
        let version = env!("CARGO_PKG_VERSION");
        // The log must be the report alone: pip's words go to stderr, and `--quiet` with
        // the root and version warnings off leaves it silent when the install works.
        lines.push(format!(
            "pip install --quiet --no-cache-dir --disable-pip-version-check --root-user-action=ignore 'gpuenv=={version}' >&2 || {{ echo 'gpuenv-fleet: pip could not install gpuenv=={version} from PyPI' >&2; exit 3; }}"
        ));
    }
    lines.push("gpuenv doctor --json".into());
    // doctor's 1 is a report with a failing check: a good report all the same, or
    // Kubernetes would run it again and again on a node with findings.
    lines.push("code=$?".into());
    lines.push(r#"if [ "$code" -gt 1 ]; then exit "$code"; fi"#.into());
    match workload {
        Workload::Job => lines.push("exit 0".into()),
        Workload::DaemonSet => {
            // A DaemonSet's pod must keep running, or it is restarted and doctor runs again
            // into a fresh log. `wait` lets the TERM of a deletion end it at once.
            lines.push("trap 'exit 0' TERM".into());
            lines.push("while :; do sleep 3600 & wait $!; done".into());
        }
    }
    lines.join("\n") + "\n"
}

/// The manifest `r` asks for, or the first flag whose value Kubernetes would refuse.
pub fn manifest(r: &Request) -> Result<Value, InputError> {
    let c = check(r)?;
    let labels = json!({ NAME_LABEL: APP, INSTANCE_LABEL: c.name });
    let mut metadata = json!({ "name": c.name });
    if let Some(ns) = &r.namespace {
        metadata["namespace"] = json!(ns);
    }
    metadata["labels"] = labels.clone();

    let (key, value) = c.selector;
    let mut affinity = json!({
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    { "matchExpressions": [ { "key": key, "operator": "In", "values": [value] } ] }
                ]
            }
        }
    });
    // NVIDIA's container toolkit injects nvidia-smi and NVML only for `utility`.
    let mut env = vec![json!({ "name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility" })];
    if r.workload == Workload::DaemonSet {
        // Asking for GPUs would hold them while the pod sleeps; the NVIDIA runtime shows
        // every GPU to a container that names them all instead.
        env.push(json!({ "name": "NVIDIA_VISIBLE_DEVICES", "value": "all" }));
    }
    let mut container = json!({
        "name": CONTAINER,
        "image": r.image.as_deref().unwrap_or(DEFAULT_IMAGE),
        "command": ["sh", "-c", script(r.image.is_some(), r.workload)],
        "env": env,
    });
    if r.workload == Workload::Job {
        // One pod per node while they run: a second on a node would report it twice.
        affinity["podAntiAffinity"] = json!({
            "requiredDuringSchedulingIgnoredDuringExecution": [
                { "labelSelector": { "matchLabels": labels }, "topologyKey": "kubernetes.io/hostname" }
            ]
        });
        // The pod sees only the GPUs it was given, so it asks for all of the node's. A
        // quantity is a string in the API's types; a bare number would not read back as one.
        container["resources"] = json!({ "limits": { GPU_RESOURCE: c.gpus.to_string() } });
    }
    container["volumeMounts"] = json!([
        { "name": "machine-id", "mountPath": "/etc/machine-id", "readOnly": true }
    ]);

    let restart = match r.workload {
        Workload::Job => "Never",
        Workload::DaemonSet => "Always",
    };
    let pod = json!({
        "metadata": { "labels": labels },
        "spec": {
            "restartPolicy": restart,
            // The node's network namespace brings its host name (what `fleet report` keys
            // a node by) and its NICs and RDMA devices into the report.
            "hostNetwork": true,
            "dnsPolicy": "ClusterFirstWithHostNet",
            // doctor never calls the API server.
            "automountServiceAccountToken": false,
            "affinity": affinity,
            "tolerations": [
                { "key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule" }
            ],
            "containers": [container],
            // `host.machine_id` is derived from it: the node's, not the image's.
            "volumes": [
                { "name": "machine-id", "hostPath": { "path": "/etc/machine-id", "type": "File" } }
            ]
        }
    });

    Ok(match r.workload {
        Workload::Job => json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": metadata,
            "spec": {
                "completions": c.nodes,
                "parallelism": c.nodes,
                "completionMode": "Indexed",
                // A failure a node on average before the Job gives up: one bad node
                // must not end the others' pods.
                "backoffLimit": c.nodes,
                "activeDeadlineSeconds": JOB_DEADLINE_S,
                "ttlSecondsAfterFinished": JOB_TTL_S,
                "template": pod
            }
        }),
        Workload::DaemonSet => json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": metadata,
            "spec": {
                "selector": { "matchLabels": labels },
                "template": pod
            }
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Request {
        Request {
            image: None,
            workload: Workload::Job,
            nodes: None,
            gpus_per_node: None,
            name: None,
            namespace: None,
            node_selector: None,
        }
    }

    #[test]
    fn the_defaults_make_a_job_of_two_pods_of_eight_gpus() {
        let m = manifest(&job()).unwrap();
        assert_eq!(m["kind"], "Job");
        assert_eq!(m["spec"]["completions"], 2);
        assert_eq!(m["spec"]["parallelism"], 2);
        let c = &m["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["name"], CONTAINER);
        assert_eq!(c["image"], DEFAULT_IMAGE);
        assert_eq!(c["resources"]["limits"][GPU_RESOURCE], "8");
        assert_eq!(m["metadata"]["labels"][INSTANCE_LABEL], DEFAULT_NAME);
        assert!(m["metadata"].get("namespace").is_none());
    }

    #[test]
    fn names_are_dns_labels() {
        for ok in ["a", "gpuenv-fleet", "x1-2", &"a".repeat(63)] {
            assert!(dns_label(ok), "{ok}");
        }
        for not in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!dns_label(not), "{not}");
        }
    }

    #[test]
    fn label_keys_take_a_subdomain_prefix() {
        for ok in ["nvidia.com/gpu.present", "node-pool", "a/B_c.d", "k8s.io/x"] {
            assert!(label_key(ok), "{ok}");
        }
        for not in ["", "/x", "x/", "Nvidia.com/x", "a/b/c", "a/-b", &"a".repeat(64)] {
            assert!(!label_key(not), "{not}");
        }
    }

    #[test]
    fn a_long_name_is_refused_when_the_pods_host_names_would_pass_63() {
        let mut r = job();
        r.name = Some("a".repeat(61));
        r.nodes = Some(10);
        assert!(manifest(&r).is_ok(), "a-9 fits");
        r.nodes = Some(11);
        let e = manifest(&r).unwrap_err();
        assert_eq!(e.flag, "--name");
        assert!(e.expected.contains("at most 60 characters"), "{e}");
    }

    #[test]
    fn a_daemonset_takes_no_count() {
        let mut r = job();
        r.workload = Workload::DaemonSet;
        assert!(manifest(&r).is_ok());
        r.nodes = Some(2);
        assert_eq!(manifest(&r).unwrap_err().flag, "--nodes");
        r.nodes = None;
        r.gpus_per_node = Some(8);
        assert_eq!(manifest(&r).unwrap_err().flag, "--gpus-per-node");
    }

    #[test]
    fn the_script_maps_doctor_findings_to_success() {
        let s = script(true, Workload::Job);
        assert!(!s.contains("pip"));
        assert!(
            s.contains(r#"if [ "$code" -gt 1 ]; then exit "$code"; fi"#),
            "{s}"
        );
        let s = script(false, Workload::DaemonSet);
        assert!(
            s.contains(&format!("'gpuenv=={}' >&2", env!("CARGO_PKG_VERSION"))),
            "{s}"
        );
        assert!(s.contains("while :; do sleep"), "{s}");
    }
}
