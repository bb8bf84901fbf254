//! Health in every acceptance: recorded hosts, and copies of them with one fault planted
//! at a time. Each fault makes `check` NOT ACCEPTED (exit 1) and names its item; the same
//! host without it is accepted. An order relaxes an item only by saying so, and the
//! relaxation is printed.

use serde_json::Value;

use crate::support::{derived_host, fixture, gpuenv, json, ran};

const XML: &str = "nvidia-smi -q -x";
/// The kernel log command as the probe runs it.
const KERNEL_LOG: &str = "journalctl -k -b -q --no-pager -n 20000";
/// A kernel log since boot with the driver loaded and no XID.
const CLEAN_LOG: &str = "[    0.000000] Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103)\n\
[    5.118201] nvidia: module license 'NVIDIA' taints kernel.\n\
[    5.402113] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  590.44.01\n";
const PRO_6000: &str = "1x-rtx-pro-6000-gen4-slot";

/// `check --json` and the text run on the host record at `host` with `args`; both must
/// exit alike.
fn check(host: &std::path::Path, args: &[&str]) -> (i32, Value, String) {
    let h = host.to_str().unwrap();
    let mut a = vec!["check", "--host-facts", h];
    a.extend_from_slice(args);
    let text = gpuenv(&a);
    a.push("--json");
    let run = gpuenv(&a);
    assert_eq!(run.code, text.code, "{}{}", run.stderr, text.stderr);
    (run.code, json(&run), text.stdout)
}

fn recorded(name: &str) -> std::path::PathBuf {
    fixture(&format!("hosts/{name}/host.json"))
}

/// The host's recorded `nvidia-smi -q -x` with `from` replaced by `to` (which must be
/// there, once at least).
fn planted(name: &str, edits: &[(&str, &str)]) -> tempfile::TempDir {
    derived_host(name, |record| {
        let out = &mut record["commands"][XML]["stdout"];
        let mut xml = out.as_str().unwrap().to_string();
        for (from, to) in edits {
            assert!(xml.contains(from), "{name}: no `{from}` to plant a fault in");
            xml = xml.replace(from, to);
        }
        *out = Value::String(xml);
    })
}

fn failing(doc: &Value) -> Vec<String> {
    doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["pass"] != true)
        .map(|a| a["item"].as_str().unwrap().to_string())
        .collect()
}

fn item<'a>(doc: &'a Value, key: &str) -> &'a Value {
    doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["item"] == key)
        .unwrap_or_else(|| panic!("no item {key} in {doc:#}"))
}

/// The RTX PRO 6000 capture without the llama.cpp server: every health fact is there.
fn idle_pro_6000(extra: &[(&str, &str)]) -> tempfile::TempDir {
    derived_host(PRO_6000, |record| {
        let out = &mut record["commands"][XML]["stdout"];
        let xml = out.as_str().unwrap();
        // Cut the one process out: the element becomes empty, as an idle GPU reports it.
        let start = xml.find("<processes>").unwrap();
        let end = xml.find("</processes>").unwrap() + "</processes>".len();
        let mut xml = format!("{}<processes>\n\t\t</processes>{}", &xml[..start], &xml[end..]);
        for (from, to) in extra {
            assert!(xml.contains(from), "no `{from}` to plant a fault in");
            xml = xml.replace(from, to);
        }
        *out = Value::String(xml);
        record["commands"][KERNEL_LOG] = ran(CLEAN_LOG);
    })
}

#[test]
fn a_healthy_host_with_every_fact_is_accepted_and_each_planted_fault_is_not() {
    let idle = idle_pro_6000(&[]);
    let (code, doc, text) = check(&idle.path().join("host.json"), &["--expect-gpus", "1"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(doc["accepted"], true, "{doc:#}");
    assert!(text.contains("accepted: every item holds"), "{text}");
    for id in [
        "health-nvml",
        "health-ecc",
        "health-row-remap",
        "health-retired-pages",
        "health-mig",
        "health-processes",
        "health-throttle",
    ] {
        assert_eq!(item(&doc, id)["verdict"], "pass", "{id}: {doc:#}");
        assert!(
            item(&doc, id)["rule"].as_str().unwrap().len() > 20,
            "{id} has its rule"
        );
    }

    // A power brake.
    let brake = idle_pro_6000(&[(
        "<clocks_event_reason_hw_power_brake_slowdown>Not Active",
        "<clocks_event_reason_hw_power_brake_slowdown>Active",
    )]);
    let (code, doc, text) = check(&brake.path().join("host.json"), &["--expect-gpus", "1"]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(doc["accepted"], false);
    assert_eq!(failing(&doc), ["health-throttle"], "{text}");
    assert!(
        text.contains("FAIL  health-throttle: expected no hardware slowdown or power brake active, found GPU 0: HW Power Brake Slowdown active"),
        "{text}"
    );
    assert!(text.contains("not accepted: 1 failed"), "{text}");
    assert!(
        item(&doc, "health-throttle")["rule"]
            .as_str()
            .unwrap()
            .contains("https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html")
    );
}

#[test]
fn another_tenants_process_is_not_accepted_unless_the_order_allows_it() {
    let copy = derived_host(PRO_6000, |record| record["commands"][KERNEL_LOG] = ran(CLEAN_LOG));
    let host = copy.path().join("host.json");
    let (code, doc, text) = check(&host, &["--expect-gpus", "1"]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(doc["accepted"], false);
    assert_eq!(failing(&doc), ["health-processes"], "{text}");
    assert_eq!(
        item(&doc, "health-processes")["found"],
        "GPU 0: pid 116860 /root/src/llama.cpp/build/bin/llama-server holds 65710 MiB"
    );

    // Relaxed by the flag: accepted, and the relaxation said in the text and the JSON.
    let (code, doc, text) = check(&host, &["--expect-gpus", "1", "--allow-health", "processes"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(doc["accepted"], true);
    let p = item(&doc, "health-processes");
    assert_eq!(p["relaxed_by"], "--allow-health allows `processes`");
    assert!(
        text.contains("(relaxed: --allow-health allows `processes`)"),
        "{text}"
    );

    // Relaxed by the order file, which names its line.
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order.toml");
    std::fs::write(&order, "gpus = 1\nhealth_allow = [\"processes\"]\n").unwrap();
    let (code, doc, _) = check(&host, &["--order", order.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        item(&doc, "health-processes")["relaxed_by"]
            .as_str()
            .unwrap()
            .ends_with("line 2, key `health_allow` allows `processes`"),
        "{doc:#}"
    );
}

#[test]
fn row_remap_and_page_retirement_faults_on_an_a100_are_not_accepted() {
    // The recording has no clock-event reasons: unknowns are allowed, faults are not.
    let args = ["--expect-gpu", "A100", "--allow-health", "unknown"];
    let (code, doc, text) = check(&recorded("single-a100"), &args);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        item(&doc, "health-throttle")["relaxed_by"],
        "--allow-health allows `unknown`"
    );
    assert!(
        item(&doc, "health-throttle")["found"]
            .as_str()
            .unwrap()
            .starts_with("unknown: GPU 0: clock-event reasons not reported"),
        "{doc:#}"
    );

    let remap = planted(
        "single-a100",
        &[
            ("<remapped_row_pending>No", "<remapped_row_pending>Yes"),
            ("<remapped_row_failure>No", "<remapped_row_failure>Yes"),
        ],
    );
    let (code, doc, text) = check(&remap.path().join("host.json"), &args);
    assert_eq!(code, 1, "{text}");
    assert_eq!(failing(&doc), ["health-row-remap"], "{text}");
    assert_eq!(
        item(&doc, "health-row-remap")["found"],
        "GPU 0: row remap pending and failed"
    );

    let failed_only = planted(
        "single-a100",
        &[("<remapped_row_failure>No", "<remapped_row_failure>Yes")],
    );
    let (code, doc, _) = check(&failed_only.path().join("host.json"), &args);
    assert_eq!(code, 1);
    assert_eq!(item(&doc, "health-row-remap")["found"], "GPU 0: row remap failed");

    let retire = planted(
        "single-a100",
        &[
            ("<pending_retirement>N/A", "<pending_retirement>Yes"),
            (
                "<double_bit_retirement>\n                <retired_count>N/A",
                "<double_bit_retirement>\n                <retired_count>2",
            ),
        ],
    );
    let (code, doc, text) = check(&retire.path().join("host.json"), &args);
    assert_eq!(code, 1, "{text}");
    assert_eq!(failing(&doc), ["health-retired-pages"], "{text}");
    assert_eq!(
        item(&doc, "health-retired-pages")["found"],
        "GPU 0: page retirement pending, 2 pages retired after double-bit errors"
    );
}

#[test]
fn ecc_errors_and_mig_on_the_h100_are_named_and_relaxed_one_at_a_time() {
    let host = recorded("h100-mig");
    let args = ["--expect-gpu", "H100 PCIe", "--expect-gpu-memory", "80GB"];
    let (code, doc, text) = check(&host, &args);
    assert_eq!(code, 1, "{text}");
    assert_eq!(doc["accepted"], false);
    // No kernel log in the recording: the XID item is unknown, and fails.
    assert_eq!(
        failing(&doc),
        ["health-xid", "health-ecc", "health-mig", "health-throttle"],
        "{text}"
    );
    assert_eq!(
        item(&doc, "health-xid")["found"],
        "unknown: the kernel log could not be read (journalctl -k, dmesg)"
    );
    assert_eq!(
        item(&doc, "health-ecc")["found"],
        "GPU 0: uncorrected ECC errors, volatile 2, aggregate 2"
    );
    assert!(!text.contains("accepted: every item holds"), "{text}");

    // MIG allowed, unknowns allowed: the ECC errors still fail it.
    let mut relaxed = args.to_vec();
    relaxed.extend(["--allow-health", "mig", "--allow-health", "unknown"]);
    let (code, doc, _) = check(&host, &relaxed);
    assert_eq!(code, 1);
    assert_eq!(failing(&doc), ["health-ecc"]);

    // Without the errors and with MIG off, the same host is accepted.
    let fixed = derived_host("h100-mig", |record| {
        let out = &mut record["commands"][XML]["stdout"];
        let xml = out.as_str().unwrap();
        let xml = xml
            .replace("<current_mig>Enabled", "<current_mig>Disabled")
            .replace("<sram_uncorrectable_parity>1<", "<sram_uncorrectable_parity>0<")
            .replace("<sram_uncorrectable_secded>1<", "<sram_uncorrectable_secded>0<");
        *out = Value::String(xml);
    });
    let mut allow_unknown = args.to_vec();
    allow_unknown.extend(["--allow-health", "unknown"]);
    let (code, doc, text) = check(&fixed.path().join("host.json"), &allow_unknown);
    assert_eq!(code, 0, "{text}\n{doc:#}");
}

#[test]
fn a_driver_that_lists_gpus_nvml_cannot_reach_is_not_accepted() {
    let (code, doc, text) = check(&recorded("nvml-mismatch"), &["--expect-gpus", "1"]);
    assert_eq!(code, 1, "{text}");
    let nvml = item(&doc, "health-nvml");
    assert_eq!(nvml["pass"], false);
    assert!(
        nvml["found"]
            .as_str()
            .unwrap()
            .contains("Driver/library version mismatch"),
        "{nvml:#}"
    );
}

#[test]
fn empty_and_comment_only_orders_and_bad_relaxations_are_bad_input() {
    let host = recorded("single-a100");
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("empty.toml", ""),
        ("comments.toml", "# gpus = 8\n\n# memory = \"1TB\"\n"),
    ] {
        let order = dir.path().join(name);
        std::fs::write(&order, text).unwrap();
        let run = gpuenv(&[
            "check",
            "--host-facts",
            host.to_str().unwrap(),
            "--order",
            order.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 2, "{name}: {}", run.stdout);
        assert!(run.stdout.is_empty(), "refused before judging: {}", run.stdout);
        assert!(run.stderr.contains(name), "{}", run.stderr);
        assert!(
            run.stderr
                .contains("it names no item (expected at least one of gpu, gpus"),
            "{}",
            run.stderr
        );
    }
    let order = dir.path().join("bad.toml");
    std::fs::write(&order, "gpus = 1\nhealth_allow = [\"everything\"]\n").unwrap();
    let run = gpuenv(&[
        "check",
        "--host-facts",
        host.to_str().unwrap(),
        "--order",
        order.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("line 2, key `health_allow`: `everything` is not a health item"),
        "{}",
        run.stderr
    );
    let run = gpuenv(&[
        "check",
        "--host-facts",
        host.to_str().unwrap(),
        "--expect-gpus",
        "1",
        "--allow-health",
        "nope",
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("--allow-health `nope`: not a health item"),
        "{}",
        run.stderr
    );
}

/// The page of a sick host: NOT ACCEPTED at the top, the failing items named, doctor's
/// failing check as a warning beside the verdict, and no green banner anywhere; the same
/// in the DOM headless chromium builds.
#[test]
fn the_page_of_a_sick_host_says_not_accepted_at_the_top() {
    use crate::report_page::{browser_ready, dump_dom, page_errors};
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("acceptance.html");
    let host = recorded("h100-mig");
    let run = gpuenv(&[
        "check",
        "--host-facts",
        host.to_str().unwrap(),
        "--expect-gpu",
        "H100 PCIe",
        "--report",
        page.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    let verdict = "NOT ACCEPTED: 4 failed, 0 decided by an override (health-xid, health-ecc, health-mig, health-throttle)";
    assert!(html.contains(verdict), "{html}");
    assert!(!html.contains("ACCEPTED: every item holds"), "{html}");
    assert!(
        html.contains("<p id=\"overall\" class=\"overall fail\">"),
        "{html}"
    );
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("no `{needle}` in the page"))
    };
    // The verdict and its warning come before the order's table and the doctor checks.
    assert!(at(verdict) < at("<table id=\"acceptance\">"));
    let warning = "Warning: doctor check gpu-health fails: GPU 0 has uncorrected ECC errors";
    assert!(
        at(verdict) < at(warning) && at(warning) < at("<table id=\"acceptance\">"),
        "{html}"
    );

    browser_ready();
    let scratch = dir.path().join("chromium");
    std::fs::create_dir_all(&scratch).unwrap();
    let (dumped, _) = dump_dom(&page, &scratch);
    assert!(dumped.stdout.contains(verdict), "{}", dumped.stdout);
    assert!(!dumped.stdout.contains("ACCEPTED: every item holds"));
    assert!(page_errors(&dumped.stderr, &page).is_empty(), "{}", dumped.stderr);

    // A healthy host's page is green, with no warning beside it.
    let idle = idle_pro_6000(&[]);
    let page = dir.path().join("healthy.html");
    let run = gpuenv(&[
        "check",
        "--host-facts",
        idle.path().join("host.json").to_str().unwrap(),
        "--expect-gpus",
        "1",
        "--report",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("ACCEPTED: every item holds"),
        "{}\n{html}",
        run.stdout
    );
    assert!(!html.contains("NOT ACCEPTED"));
}

/// XID 79 in the kernel log since boot: not accepted, the XID and NVIDIA's meaning named;
/// an application's XID 13 alone is listed and passes.
#[test]
fn an_xid_of_a_gpu_fault_in_the_kernel_log_is_not_accepted() {
    let log_with = |line: &str| {
        derived_host(PRO_6000, |record| {
            let xml = record["commands"][XML]["stdout"].as_str().unwrap().to_string();
            let start = xml.find("<processes>").unwrap();
            let end = xml.find("</processes>").unwrap() + "</processes>".len();
            record["commands"][XML]["stdout"] = Value::String(format!(
                "{}<processes>\n\t\t</processes>{}",
                &xml[..start],
                &xml[end..]
            ));
            record["commands"][KERNEL_LOG] = ran(&format!("{CLEAN_LOG}{line}\n"));
        })
    };
    let fell = log_with(
        "[ 8812.004211] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    );
    let (code, doc, text) = check(&fell.path().join("host.json"), &["--expect-gpus", "1"]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(failing(&doc), ["health-xid"], "{text}");
    // The meaning and what to do come from compat-db's XID record (`gpuenv show xid 79`).
    assert_eq!(
        item(&doc, "health-xid")["found"],
        "XID 79 on PCI:0000:01:00: GPU has fallen off the bus; NVIDIA: at once RESTART_BM (restart the machine); \
         then CONTACT_SUPPORT (contact NVIDIA support)"
    );
    assert!(
        item(&doc, "health-xid")["rule"]
            .as_str()
            .unwrap()
            .contains("https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html")
    );

    // An XID that compat-db does not hold fails: no pass without the fact.
    let unknown = log_with("[ 77.1] NVRM: Xid (PCI:0000:01:00): 999, pid=1, something new");
    let (code, doc, text) = check(&unknown.path().join("host.json"), &["--expect-gpus", "1"]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(
        item(&doc, "health-xid")["found"],
        "XID 999 on PCI:0000:01:00: not in compat-db's XID table; see NVIDIA's Xid catalog"
    );

    // XID 63 (a row remap recorded) is an event the catalog says to ignore: listed, and
    // the remap itself is what health-row-remap judges.
    let event = log_with(
        "[ 12.5] NVRM: Xid (PCI:0000:01:00): 63, pid=1, Row Remapper: New row marked for remapping, reset gpu to activate.",
    );
    let (code, doc, text) = check(&event.path().join("host.json"), &["--expect-gpus", "1"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        item(&doc, "health-xid")["found"]
            .as_str()
            .unwrap()
            .contains("listed, of the application or an event only: XID 63 on PCI:0000:01:00: GPU memory remapping event"),
        "{doc:#}"
    );

    let app = log_with(
        "[  91.3] NVRM: Xid (PCI:0000:01:00): 13, pid=4242, name=python3, Graphics Exception: ESR 0x405840=0x0",
    );
    let (code, doc, text) = check(&app.path().join("host.json"), &["--expect-gpus", "1"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        item(&doc, "health-xid")["found"].as_str().unwrap().contains(
            "listed, of the application or an event only: XID 13 on PCI:0000:01:00: Graphics Engine Exception"
        ),
        "{doc:#}"
    );
}

/// `fleet report --order` accepts each node as `check` does, health included: the H100
/// with uncorrected ECC errors and MIG on is not accepted, for those two, even where
/// unknowns are allowed, and the idle RTX PRO 6000 beside it is.
#[test]
fn a_fleet_does_not_accept_the_sick_node() {
    let idle = idle_pro_6000(&[]);
    let dir = tempfile::tempdir().unwrap();
    for (name, facts) in [
        ("sick.json", recorded("h100-mig")),
        ("idle.json", idle.path().join("host.json")),
    ] {
        let run = gpuenv(&["doctor", "--host-facts", facts.to_str().unwrap(), "--json"]);
        assert!(run.code == 0 || run.code == 1, "{name}: {}", run.stderr);
        std::fs::write(dir.path().join(name), &run.stdout).unwrap();
    }
    let run = gpuenv(&[
        "fleet",
        "report",
        dir.path().to_str().unwrap(),
        "--expect-gpus",
        "1",
        "--allow-health",
        "unknown",
        "--json",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json(&run);
    // The recordings hold no hostname: each node is named by its file.
    let acceptance = |node: &str| {
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == node)
            .unwrap_or_else(|| panic!("no node {node} in {doc:#}"))["acceptance"]
            .clone()
    };
    let sick = acceptance("sick");
    assert_eq!(sick["verdict"], "fail", "{sick:#}");
    let failed: Vec<&str> = sick["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["item"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["health-ecc", "health-mig"], "{sick:#}");
    assert_eq!(acceptance("idle")["verdict"], "pass", "{doc:#}");
}
