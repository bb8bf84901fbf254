//! The JSON contract, snapshotted: each command's `--json` document on fixed inputs, so a
//! change to a field's name, shape or value shows up in review as a changed `.snap` file
//! under `tests/snapshots/`. And each document reads back: parsed into gpuenv's own type
//! and written again, it is the same bytes.
//!
//! The inputs are chosen to stay put as the clock moves: driver R535 and Python 3.10 are
//! past their end of life already, Python 3.12 not before 2028, so no end-of-life finding
//! comes or goes with the date. What still depends on where the tests run (the checkout's
//! path) is written as `[ROOT]`; what depends on the clock is redacted by insta.
//! The database is compiled in, so its date and records are fixed for a given commit: a
//! change to compat-db that changes an answer changes these snapshots too, on purpose.
//!
//! Review a change with `cargo insta review` (or accept every one with
//! `INSTA_UPDATE=always cargo nextest run -E 'test(/snapshots/)'`); CI runs with
//! `INSTA_UPDATE=no`, where a difference fails.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use gpuenv::report::doc::{CheckDoc, DoctorDoc, QueryDoc, ShowDoc, ShowJudgedDoc, StatsDoc, VerifyDoc};

use crate::support::{fixture, root};

/// Runs gpuenv with no `GPUENV_*` variable of the environment, and returns its stdout,
/// which must be JSON.
fn stdout(args: &[&str]) -> String {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpuenv"));
    cmd.args(args).current_dir(root());
    for (k, _) in std::env::vars() {
        if k.starts_with("GPUENV_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Every string in `v` with the checkout's path written as `[ROOT]`.
fn rooted(v: Value) -> Value {
    let here = root().to_string_lossy().into_owned();
    match v {
        Value::String(s) => Value::String(s.replace(&here, "[ROOT]")),
        Value::Array(items) => Value::Array(items.into_iter().map(rooted).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, rooted(v))).collect()),
        other => other,
    }
}

/// Snapshots a document under `tests/snapshots/NAME.snap`.
macro_rules! snap {
    ($name:expr, $doc:expr) => {
        insta::with_settings!({
            snapshot_path => "../snapshots",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_json_snapshot!($name, rooted($doc), {
                // Nothing the clock decides is part of these documents today; should one
                // come (a probe's duration, an age in days), it is redacted here.
                ".**.elapsed_ms" => "[duration]",
                ".**.age_days" => "[days]",
                // A record's staleness in `show` is its age against the clock.
                ".stale" => "[clock]",
            });
        })
    };
}

/// The document `text` as `T`, written again: it must be the same bytes.
fn reads_back<T: DeserializeOwned + Serialize>(what: &str, text: &str) -> T {
    let doc: T =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{what} does not read back: {e}\n{text}"));
    let again = serde_json::to_string_pretty(&doc).unwrap() + "\n";
    assert_eq!(again, text, "{what} read back and written again differs");
    doc
}

const QUERY: &[&str] = &[
    "query",
    "--gpu",
    "H100 SXM",
    "--driver",
    "535.104.05",
    "--torch",
    "2.4",
    "--python",
    "3.12",
    "--json",
];

fn host(name: &str) -> String {
    fixture(&format!("hosts/{name}")).to_string_lossy().into_owned()
}

fn check_args(h: &str) -> Vec<String> {
    [
        "check",
        "--host-facts",
        h,
        "--torch",
        "2.4",
        "--expect-gpu",
        "A100 80GB SXM",
        "--expect-gpus",
        "1",
        "--expect-driver",
        ">=535",
        "--expect-memory",
        "2TB",
        "--json",
    ]
    .map(str::to_string)
    .to_vec()
}

#[test]
fn query_json() {
    let text = stdout(QUERY);
    snap!("query", serde_json::from_str::<Value>(&text).unwrap());
}

#[test]
fn query_json_reads_back() {
    let doc: QueryDoc = reads_back("query --json", &stdout(QUERY));
    assert_eq!(doc.stacks[0].torch.to_string(), "2.4.1");
    assert!(
        doc.stacks[0]
            .findings
            .iter()
            .any(|f| f.code == gpuenv::resolve::Code::GpuSass)
    );
}

#[test]
fn show_gpu_json() {
    let text = stdout(&["show", "gpu", "H100 SXM", "--json"]);
    snap!("show-gpu", serde_json::from_str::<Value>(&text).unwrap());
    // The record reads back as a record (its id is the file's name, not a field of it).
    let doc: ShowDoc<gpuenv::db::Gpu> = serde_json::from_str(&text).unwrap();
    assert_eq!(doc.record.name, "H100 SXM");
}

#[test]
fn show_image_judged_json() {
    let text = stdout(&[
        "show",
        "image",
        "24.08",
        "--driver",
        "535.104.05",
        "--gpu",
        "H100 SXM",
        "--json",
    ]);
    snap!("show-image-judged", serde_json::from_str::<Value>(&text).unwrap());
    let doc: ShowJudgedDoc<gpuenv::db::Image> = serde_json::from_str(&text).unwrap();
    assert_eq!(doc.verdict.origin.transport, "catalog");
    assert_eq!(doc.verdict.covers, ["catalog", "target"]);
}

#[test]
fn db_stats_json() {
    let text = stdout(&["db", "stats", "--json"]);
    snap!("db-stats", serde_json::from_str::<Value>(&text).unwrap());
    reads_back::<StatsDoc>("db stats --json", &text);
}

#[test]
fn doctor_json() {
    let text = stdout(&["doctor", "--host-facts", &host("single-a100"), "--json"]);
    snap!("doctor", serde_json::from_str::<Value>(&text).unwrap());
}

#[test]
fn doctor_json_reads_back() {
    for name in ["single-a100", "no-gpu", "nvml-mismatch", "8x-h100-nvlink"] {
        let text = stdout(&["doctor", "--host-facts", &host(name), "--json"]);
        let doc: DoctorDoc = reads_back(&format!("doctor --json on {name}"), &text);
        assert_eq!(doc.checks[0].id, "gpus-visible", "{name}");
    }
}

#[test]
fn check_json() {
    let h = host("single-a100");
    let args = check_args(&h);
    let text = stdout(&args.iter().map(String::as_str).collect::<Vec<_>>());
    snap!("check", serde_json::from_str::<Value>(&text).unwrap());
}

#[test]
fn check_json_reads_back() {
    let h = host("single-a100");
    let args = check_args(&h);
    let text = stdout(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let doc: CheckDoc = reads_back("check --json", &text);
    assert!(doc.acceptance.iter().any(|a| a.item == "memory"));
    // With overrides, an item decided by one reads back with its variable.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gpuenv"));
    cmd.args(&args).env("GPUENV_CPUS", "64");
    let out = cmd.arg("--expect-cpus").arg("64").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let doc: CheckDoc = reads_back("check --json with an override", &text);
    let cpus = doc.acceptance.iter().find(|a| a.item == "cpus").unwrap();
    assert_eq!(cpus.overridden_by, Some("GPUENV_CPUS"));
}

/// `check --json` on the recorded 8x H200 host with its bench results (the constructed run
/// with a slow GPU 5) and an order that asks for figures: the `bench` field, and the
/// measured items beside the others.
fn check_bench_args() -> Vec<String> {
    let h = host("8x-h200-nvlink");
    let bench = fixture("bench/results/h200x8-slow-gpu5.json")
        .to_string_lossy()
        .into_owned();
    [
        "check",
        "--host-facts",
        &h,
        "--expect-gpus",
        "8",
        "--expect-bench",
        "--expect-min-nccl-busbw",
        "400",
        "--allow-health",
        "unknown",
        "--bench-results",
        &bench,
        "--json",
    ]
    .map(str::to_string)
    .to_vec()
}

#[test]
fn check_json_with_bench_results() {
    let args = check_bench_args();
    let text = stdout(&args.iter().map(String::as_str).collect::<Vec<_>>());
    snap!("check-bench", serde_json::from_str::<Value>(&text).unwrap());
}

#[test]
fn check_json_with_bench_results_reads_back() {
    let args = check_bench_args();
    let text = stdout(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let doc: CheckDoc = reads_back("check --json with bench results", &text);
    let bench = doc.bench.unwrap();
    assert!(bench.counts_for_acceptance);
    assert_eq!(bench.figures.len(), 121);
    assert!(
        doc.acceptance
            .iter()
            .any(|a| a.item == "min_nccl_busbw" && a.pass)
    );
    assert!(doc.acceptance.iter().any(|a| a.item == "bench" && !a.pass));
}

/// `verify --json`'s document, from the catalog's judge (no image to read here).
fn verify_json() -> String {
    use gpuenv::resolve::GpuAsk;
    let db = gpuenv::db::Db::embedded().unwrap();
    let rec = db
        .images
        .iter()
        .find(|i| i.tag.as_deref().is_some_and(|t| t.starts_with("24.08")))
        .unwrap();
    let mut target = gpuenv::verify::Target::default();
    target.source = "the target given".into();
    target.driver = Some("535.104.05".parse().unwrap());
    target.set_gpus(vec![(
        GpuAsk {
            gpu: db.gpu("H100 SXM").unwrap().clone(),
            count: 2,
        },
        None,
    )]);
    let v = gpuenv::verify::catalog::judge(db, rec, "24.08", &target);
    let mut out = Vec::new();
    gpuenv::report::verify(&mut out, &v, db.date(), true, gpuenv::report::Styles::PLAIN).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn verify_json_of_a_catalog_image() {
    snap!(
        "verify-catalog",
        serde_json::from_str::<Value>(&verify_json()).unwrap()
    );
}

#[test]
fn verify_json_reads_back() {
    let doc: VerifyDoc = reads_back("verify --json", &verify_json());
    assert_eq!(doc.verification.target.unwrap().gpus(), ["2x H100 SXM"]);
    // A code no registry holds is an error that names it, not a value.
    let bad = verify_json().replacen("\"code\": \"", "\"code\": \"no-such-", 1);
    let e = serde_json::from_str::<VerifyDoc>(&bad).unwrap_err();
    assert!(e.to_string().contains("unknown finding code `no-such-"), "{e}");
}

/// The other documents read back too: `db lint` (its key paths), `db list`, `pull
/// --dry-run` (a pull's fields absent, the catalog's present).
#[test]
fn the_other_documents_read_back() {
    use gpuenv::report::doc::{LintDoc, ListDoc, PullDoc};
    let broken = fixture("broken-db").to_string_lossy().into_owned();
    let doc: LintDoc = reads_back(
        "db lint --json",
        &stdout(&["db", "lint", "--json", "--db", &broken]),
    );
    assert!(!doc.clean && !doc.problems.is_empty());
    let doc: ListDoc = reads_back("db list --json", &stdout(&["db", "list", "gpu", "--json"]));
    assert!(doc.records.iter().any(|r| r.name == "H100 SXM"));
    let doc: PullDoc = reads_back(
        "pull --dry-run --json",
        &stdout(&[
            "pull",
            "--dry-run",
            "--torch",
            "2.4.1",
            "--cuda",
            "12.1",
            "--json",
        ]),
    );
    assert!(!doc.pulled && doc.result.is_none());
    assert_eq!(doc.choice.unwrap().stack.torch, "2.4.1");
}

/// `text` with the date in every "is after today (YYYY-MM-DD)" written `[today]`.
fn today_redacted(text: &str) -> String {
    const MARK: &str = "is after today (";
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(MARK) {
        let (head, tail) = rest.split_at(i + MARK.len());
        out.push_str(head);
        match tail.find(')') {
            Some(end) if end == 10 => {
                out.push_str("[today]");
                rest = &tail[end..];
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn db_lint_json_of_a_broken_database() {
    let broken = fixture("broken-db").to_string_lossy().into_owned();
    let text = stdout(&["db", "lint", "--json", "--db", &broken]);
    // The lint names today's date beside a `checked` date in the future; the snapshot
    // must not change with the calendar.
    let text = today_redacted(&text);
    snap!("db-lint-broken", serde_json::from_str::<Value>(&text).unwrap());
}

#[test]
fn db_list_json() {
    let text = stdout(&["db", "list", "driver", "--json"]);
    snap!("db-list-driver", serde_json::from_str::<Value>(&text).unwrap());
}

#[test]
fn pull_dry_run_json() {
    let text = stdout(&[
        "pull",
        "--dry-run",
        "--torch",
        "2.4.1",
        "--cuda",
        "12.1",
        "--json",
    ]);
    snap!("pull-dry-run", serde_json::from_str::<Value>(&text).unwrap());
}

/// `db refresh --json` on recorded PyPI answers, with a database that lacks two CUDA
/// toolkits and two cuDNN releases: the proposals, each with its pending keys. The
/// proposals' folder is a temporary one, written as `[OUT]`.
#[test]
fn db_refresh_json() {
    use crate::refresh::{TOOLKITS_REMOVED, refresh_into, replay};
    let server = replay();
    let db = crate::support::trimmed_db(&TOOLKITS_REMOVED);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_into(db.path(), &out, &server, true);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout.replace(&*out.to_string_lossy(), "[OUT]");
    snap!("db-refresh", serde_json::from_str::<Value>(&text).unwrap());
}

/// `verify --json` of an image read from a `docker save` file (an NGC-style image whose
/// cuda-compat serves R535, read from its ELF note), on an R535 data-center host: the
/// archive's temporary path is written as `[ARCHIVE]`.
#[test]
fn verify_json_of_an_archive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ngc.tar");
    std::fs::write(&path, crate::image::ngc_image()).unwrap();
    let reference = format!("docker-archive:{}", path.display());
    let text = stdout(&[
        "verify",
        &reference,
        "--driver",
        "535.104.05",
        "--gpu",
        "H100 SXM",
        "--json",
    ]);
    let text = text.replace(&*path.to_string_lossy(), "[ARCHIVE]");
    let doc: VerifyDoc = reads_back("verify --json of an archive", &text);
    let served = doc
        .verification
        .findings
        .iter()
        .find(|f| f.code == gpuenv::resolve::Code::ImageForwardCompat)
        .expect("the compat library's note serves R535");
    assert_eq!(served.severity, gpuenv::resolve::Severity::Info);
    assert!(
        served.message.contains("libcuda.so.570.86.10"),
        "{}",
        served.message
    );
    snap!("verify-archive", serde_json::from_str::<Value>(&text).unwrap());
}

/// `plan --json` on a model compat-db records, for two GPUs, with offers: the contract's
/// fields (`params`, `memory.per_gpu`, `fits`, `assumptions`, `offers`) and their values.
#[test]
fn plan_json() {
    let offers = fixture("plan/offers.csv");
    let text = stdout(&[
        "plan",
        "--model",
        "Llama-2-7B",
        "--method",
        "lora",
        "--checkpointing",
        "--gpu",
        "A100 80GB SXM",
        "--gpu",
        "RTX 4090",
        "--driver",
        "550.90.07",
        "--python",
        "3.11",
        "--tokens",
        "1B",
        "--offers",
        offers.to_str().unwrap(),
        "--json",
    ]);
    snap!("plan", serde_json::from_str::<Value>(&text).unwrap());
    let doc: gpuenv::report::doc::PlanDoc = reads_back("plan --json", &text);
    assert_eq!(doc.params, 6_738_415_616);
}
