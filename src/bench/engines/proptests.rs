//! Property tests: no engine reader panics, whatever it is given: arbitrary text, lines
//! made of the words the real reports use, and every capture cut short anywhere.

use proptest::prelude::*;

use super::{dcgm, nccl_tests, nvbandwidth};

/// Every real capture of `tests/fixtures/bench/` this folder reads.
const CAPTURES: [&str; 8] = [
    include_str!("../../../tests/fixtures/bench/dcgm/dcgm-3.1.0-8gpu.json"),
    include_str!("../../../tests/fixtures/bench/dcgm/dcgm-4.5.2-gb10-r2.json"),
    include_str!("../../../tests/fixtures/bench/dcgm/dcgm-4.2.3-gb10-r2-skip.json"),
    include_str!("../../../tests/fixtures/bench/nccl-tests/h100x8-issue290.txt"),
    include_str!("../../../tests/fixtures/bench/nccl-tests/a100x8-superbench.txt"),
    include_str!("../../../tests/fixtures/bench/nvbandwidth/v0.5-1gpu.json"),
    include_str!("../../../tests/fixtures/bench/nvbandwidth/a6000x6-issue50.txt"),
    include_str!("../../../tests/fixtures/bench/nvbandwidth/readme-8gpu-d2d-write.txt"),
];

/// Runs every reader over `text`, and the figures of what they read; only panics matter.
fn read_everything(text: &str) {
    if let Ok(report) = dcgm::parse_diag(text) {
        let _ = report.figures();
        let _ = report.failures();
    }
    if let Ok(run) = nccl_tests::parse_all_reduce(text) {
        let _ = run.figures();
        let _ = run.corrupt();
    }
    if let Ok(run) = nvbandwidth::parse(text) {
        let _ = run.figures();
    }
    let _ = nvbandwidth::parse_json(text);
    let _ = nvbandwidth::parse_text(text);
}

#[test]
fn every_capture_cut_short_anywhere_is_read_or_refused() {
    for capture in CAPTURES {
        // Every line end and the characters around it (where a reader decides that a
        // row or a document is over), and every seventh character between: all of them
        // would take the debug build twenty seconds for no new branch.
        let ends = capture.char_indices().map(|(i, _)| i).filter(|&i| {
            i % 7 == 0
                || capture[i..].starts_with('\n')
                || capture[..i].ends_with('\n')
                || capture[i..].chars().nth(1) == Some('\n')
        });
        for end in ends {
            read_everything(&capture[..end]);
        }
    }
}

/// Lines in the vocabulary of the three reports, so that generated text reaches the
/// readers' inner branches rather than stopping at the first line.
fn report_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Running device_to_device_memcpy_read_ce.".to_string()),
        Just("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)".to_string()),
        Just("memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)".to_string()),
        Just("           0         1".to_string()),
        Just(" 0       N/A     26.34".to_string()),
        Just(" 1     26.34       N/A".to_string()),
        Just("SUM device_to_device_memcpy_read_ce 52.68".to_string()),
        Just("Waived: ".to_string()),
        Just("#  Rank  0 Group  0 Pid 1 on host device  0 [0x18] NVIDIA H100".to_string()),
        Just("# nThread 1 nGpus 8".to_string()),
        Just("# Avg bus bandwidth    : 1.5".to_string()),
        Just("   134217728      33554432     float     sum      -1    613.3  218.85  382.99      0    614.3  218.48  382.34      0".to_string()),
        Just(String::new()),
        "[0-9a-zA-Z#:./ ()<>-]{0,40}",
        (0u64..u64::MAX, -1e300f64..1e300).prop_map(|(a, b)| format!("{a} {b} float sum -1 {b} {b} {b} {a} {b} {b} {b} {a}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_is_read_or_refused(text in ".{0,600}") {
        read_everything(&text);
    }

    #[test]
    fn report_shaped_text_is_read_or_refused(lines in proptest::collection::vec(report_line(), 0..40)) {
        read_everything(&lines.join("\n"));
    }

    #[test]
    fn dcgm_shaped_json_is_read_or_refused(
        status in "(Pass|FAIL|skip|Not Run|[a-z]{0,5})",
        id in prop_oneof![Just("0".to_string()), Just("\"0,1\"".to_string()), Just("-1".to_string()), Just("null".to_string()), Just("1e99".to_string())],
        info in "[ -~\t]{0,60}",
    ) {
        let doc = format!(
            r#"{{"DCGM Diagnostic": {{"test_categories": [{{"category": "Integration", "tests": [{{"name": "pcie", "results": [{{"entity_group": "GPU", "entity_id": {id}, "gpu_ids": {id}, "status": "{status}", "info": [{info:?}]}}], "test_summary": {{"status": "{status}"}}}}]}}]}}}}"#
        );
        read_everything(&doc);
    }
}
