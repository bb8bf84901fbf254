//! Property tests: every printed value parses back to itself, and orderings agree with the
//! numbers they stand for.

use proptest::prelude::*;

use super::*;

/// A dotted version of `min..=max` parts, possibly with leading zeros (`535.104.05`).
fn dotted(min: usize, max: usize) -> impl Strategy<Value = (String, Vec<u32>)> {
    prop::collection::vec((0u32..100_000, 0usize..2), min..=max).prop_map(|parts| {
        let text = parts
            .iter()
            .map(|(n, zeros)| format!("{}{n}", "0".repeat(*zeros)))
            .collect::<Vec<_>>()
            .join(".");
        (text, parts.into_iter().map(|(n, _)| n).collect())
    })
}

fn padded(v: &[u32]) -> [u32; 4] {
    let mut out = [0; 4];
    out[..v.len()].copy_from_slice(v);
    out
}

proptest! {
    #[test]
    fn dotted_prints_as_given((text, _) in dotted(2, 3)) {
        let v: DriverVersion = text.parse().unwrap();
        prop_assert_eq!(v.to_string(), text);
    }

    #[test]
    fn dotted_orders_numerically((a, pa) in dotted(2, 4), (b, pb) in dotted(2, 4)) {
        let va: CudnnVersion = a.parse().unwrap();
        let vb: CudnnVersion = b.parse().unwrap();
        prop_assert_eq!(va.cmp(&vb), padded(&pa).cmp(&padded(&pb)));
        prop_assert_eq!(va == vb, padded(&pa) == padded(&pb));
    }

    #[test]
    fn dotted_rejects_garbage(s in "[0-9.a-z ]{0,12}") {
        // Whatever the input, parsing answers without panicking, and an accepted string
        // prints back unchanged.
        if let Ok(v) = s.parse::<CudaVersion>() {
            prop_assert_eq!(v.to_string(), s);
        }
    }

    #[test]
    fn compute_capability_round_trip(major in 1u8..20, minor in 0u8..10, suffix in 0usize..3) {
        let s = format!("{major}.{minor}{}", ["", "a", "f"][suffix]);
        let cc: ComputeCapability = s.parse().unwrap();
        prop_assert_eq!(cc.to_string(), s);
        let sm: ComputeCapability = cc.sm().parse().unwrap();
        prop_assert_eq!(sm, cc);
    }

    #[test]
    fn compute_capability_orders_by_numbers(a in (1u8..20, 0u8..10), b in (1u8..20, 0u8..10)) {
        let ca = ComputeCapability::new(a.0, a.1);
        let cb = ComputeCapability::new(b.0, b.1);
        prop_assert_eq!(ca.cmp(&cb), a.cmp(&b));
    }

    #[test]
    fn variant_round_trip(major in 9u8..20, minor in 0u8..10) {
        let v = Variant::Cuda { major, minor };
        let parsed: Variant = v.to_string().parse().unwrap();
        prop_assert_eq!(parsed, v);
        prop_assert_eq!(Variant::for_cuda(&v.cuda().unwrap()), Some(v));
    }

    #[test]
    fn python_tag_round_trip(minor in 0u8..30, flag in 0usize..3) {
        let s = format!("cp3{minor}{}", ["", "t", "m"][flag]);
        let t: PythonTag = s.parse().unwrap();
        prop_assert_eq!(t.to_string(), s);
        prop_assert_eq!(t.version(), format!("3.{minor}"));
    }

    #[test]
    fn pep440_round_trip(
        release in prop::collection::vec(0u64..300, 1..4),
        pre in prop::option::of((0usize..3, 0u64..5)),
        local in prop::option::of("[a-z][a-z0-9]{0,9}"),
    ) {
        let mut s = release.iter().map(u64::to_string).collect::<Vec<_>>().join(".");
        if let Some((kind, n)) = pre {
            s.push_str(&format!("{}{n}", ["a", "b", "rc"][kind]));
        }
        if let Some(l) = &local {
            s.push('+');
            s.push_str(l);
        }
        let v = parse_version(&s).unwrap();
        prop_assert_eq!(v.to_string(), s);
        prop_assert_eq!(public(&v).is_local(), false);
    }

    #[test]
    fn pep440_release_orders_numerically(a in prop::collection::vec(0u64..50, 3), b in prop::collection::vec(0u64..50, 3)) {
        let va = parse_version(&format!("{}.{}.{}", a[0], a[1], a[2])).unwrap();
        let vb = parse_version(&format!("{}.{}.{}", b[0], b[1], b[2])).unwrap();
        prop_assert_eq!(va.cmp(&vb), a.cmp(&b));
        // A pre-release sorts before its release; a local build after it.
        let pre = parse_version(&format!("{}.{}.{}a0", a[0], a[1], a[2])).unwrap();
        let local = parse_version(&format!("{}.{}.{}+cu121", a[0], a[1], a[2])).unwrap();
        prop_assert!(pre < va);
        prop_assert!(local > va);
    }

    #[test]
    fn dates_round_trip(y in 1990u16..2100, m in 1u8..=12, d in 1u8..=28, precision in 0usize..3) {
        let s = match precision {
            0 => format!("{y:04}"),
            1 => format!("{y:04}-{m:02}"),
            _ => format!("{y:04}-{m:02}-{d:02}"),
        };
        let date: PartialDate = s.parse().unwrap();
        prop_assert_eq!(date.to_string(), s);
    }

    /// What people type never panics a reader, whatever the characters.
    #[test]
    fn written_values_never_panic(text in "\\PC{0,24}", digits in "[0-9x×*卡R. ,<>=!]{0,12}") {
        for t in [&text, &digits] {
            let _ = count_candidates(t);
            let _ = t.parse::<DriverInput>();
            let _ = t.parse::<DriverReq>();
            for of in [SeriesOf::Torch, SeriesOf::Python, SeriesOf::Cuda] {
                let _ = read_series(of, t);
            }
        }
    }

    /// A count and a name, in any of the written forms, read back as the same pair.
    #[test]
    fn counts_read_back(n in 1u32..=1024, form in 0usize..8) {
        let text = match form {
            0 => format!("{n}x H800"),
            1 => format!("{n} x H800"),
            2 => format!("H800x{n}"),
            3 => format!("H800 x {n}"),
            4 => format!("{n}*H800"),
            5 => format!("H800*{n}"),
            6 => format!("{n}×H800"),
            _ => format!("{n}卡 H800"),
        };
        let found: Vec<(String, u32)> = count_candidates(&text).into_iter().filter_map(Result::ok).collect();
        prop_assert!(found.contains(&("H800".to_string(), n)), "{}: {:?}", text, found);
    }

    /// A branch admits exactly its own releases, and a version requirement prints as written.
    #[test]
    fn driver_branches_admit_their_releases(b in 300u32..700, minor in 0u32..300, patch in 0u32..100, other in 300u32..700) {
        let v: DriverVersion = format!("{b}.{minor}.{patch:02}").parse().unwrap();
        for spec in [format!("{b}"), format!("R{b}"), format!("{b}.x")] {
            let req: DriverReq = spec.parse().unwrap();
            prop_assert!(req.contains(&v));
            let w: DriverVersion = format!("{other}.{minor}.{patch:02}").parse().unwrap();
            prop_assert_eq!(req.contains(&w), other == b);
        }
        let exact = format!(">={b}.{minor}.{patch:02}");
        let req: DriverReq = exact.parse().unwrap();
        prop_assert_eq!(req.to_string(), exact);
        prop_assert!(req.contains(&v));
    }
}
