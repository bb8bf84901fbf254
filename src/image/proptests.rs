//! Property tests: no reader panics, whatever the bytes.

use proptest::prelude::*;

use super::layer::{Budget, Interest, Limits, read_layer};
use super::tar::Kind;
use super::{archive, claims, pyfiles, reference, require};

fn everything(_: &str, kind: Kind) -> Interest {
    match kind {
        Kind::File => Interest::Capture,
        _ => Interest::Record,
    }
}

/// A small valid tar to mutate: mutations of real structure reach deeper than noise.
fn seed_tar() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in [
        (
            "usr/lib/python3.11/site-packages/torch/version.py",
            &b"__version__ = '2.4.0'\n"[..],
        ),
        ("etc/.wh.os-release", b""),
        ("opt/.wh..wh..opq", b""),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path, data).expect("in-memory tar");
    }
    b.into_inner().expect("in-memory tar")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn layer_reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let mut budget = Budget::new(Limits::default());
        let _ = read_layer(&bytes[..], &everything, &mut budget);
    }

    #[test]
    fn mutated_tars_never_panic(flips in proptest::collection::vec((0usize..4096, any::<u8>()), 1..16), cut in 0usize..4096) {
        let mut bytes = seed_tar();
        for (at, b) in flips {
            let n = bytes.len();
            bytes[at % n] = b;
        }
        bytes.truncate(cut.max(1).min(bytes.len()));
        let mut budget = Budget::new(Limits::default());
        let _ = read_layer(&bytes[..], &everything, &mut budget);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &bytes).expect("in memory");
        let gz = gz.finish().expect("in memory");
        let _ = read_layer(&gz[..gz.len() / 2], &everything, &mut budget);
    }

    #[test]
    fn archive_reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let streamed = archive::read_archive(&bytes[..], &archive::ReadOptions::default());
        // The same bytes as a file, read by its index: same outcome, never a panic.
        let mut file = tempfile::tempfile().expect("a temporary file");
        std::io::Write::write_all(&mut file, &bytes).expect("a temporary file");
        let filed = archive::read_archive_file(&file, &archive::ReadOptions::default());
        prop_assert_eq!(streamed.is_ok(), filed.is_ok());
    }

    #[test]
    fn text_parsers_never_panic(text in "\\PC{0,300}") {
        let _ = pyfiles::parse_version_py(&text);
        let meta = pyfiles::parse_metadata(&text);
        let _ = pyfiles::cuda_pins(&meta);
        let _ = pyfiles::dist_name(&text);
        let _ = require::parse_expression(&text);
        let host = require::HostTarget::default();
        let _ = require::evaluate(&[("NVIDIA_REQUIRE_CUDA".into(), text.clone()), ("CUDA_VERSION".into(), text.clone())], &host);
        let _ = reference::ImageRef::parse(&text);
        let _ = claims::parse_expect(&text);
        let _ = claims::from_tag(&text);
    }

    /// `verify IMAGE` and `--expect` as typed: any characters (control characters, any
    /// script), after each transport's prefix.
    #[test]
    fn references_and_claims_take_any_text(
        text in any::<String>(),
        transport in prop_oneof![
            Just(""), Just("docker://"), Just("docker-daemon:"), Just("docker-archive:"),
            Just("oci-archive:"), Just("oci:"), Just("docker://127.0.0.1:5555/"),
        ],
    ) {
        let input = format!("{transport}{text}");
        if let Ok(reference::ImageRef::Registry(r)) = reference::ImageRef::parse(&input) {
            // What is read prints back as the same reference.
            let again = reference::RegistryRef::parse(&r.to_string());
            prop_assert_eq!(again.as_ref().ok(), Some(&r), "{}", r);
        }
        let _ = claims::parse_expect(&text);
        let _ = claims::read_tag(&text);
        let _ = claims::from_tag(&input);
    }

    /// `--expect` lists: known and unknown keys, any values, separators where they fall.
    #[test]
    fn expect_lists_never_panic(
        pairs in proptest::collection::vec((
            prop_oneof![
                Just("torch".to_string()), Just("cuda".to_string()), Just("cudnn".to_string()),
                Just("python".to_string()), Just("nccl".to_string()), "\\PC{0,6}", any::<String>(),
            ],
            prop_oneof![Just("="), Just("=="), Just(":"), Just(""), Just(" = ")],
            prop_oneof!["[0-9.x*+a-z]{0,10}", "\\PC{0,10}", any::<String>()],
        ), 0..5),
        sep in prop_oneof![Just(","), Just(", "), Just(";"), Just(",,")],
    ) {
        let text: Vec<String> = pairs.iter().map(|(k, eq, v)| format!("{k}{eq}{v}")).collect();
        let _ = claims::parse_expect(&text.join(sep));
    }

    #[test]
    fn requirement_grammar_never_panics(expr in "[a-zA-Z<>=!., 0-9]{0,80}", cuda in "[0-9.]{0,8}", driver in "[0-9.]{0,12}") {
        let host = require::HostTarget {
            cuda: cuda.parse().ok(),
            driver: driver.parse().ok(),
            gpus: vec![require::GpuTarget { arch: "8.6".parse().ok(), brand: Some("tesla".into()) }],
        };
        let _ = require::evaluate_expression(&expr, &host);
        let _ = require::parse_expression(&expr);
    }
}
