//! `gpuenv check` against an order: order files and `--expect-*` flags read the same way,
//! tolerances and unit conversions said, overrides never taken as evidence, and bad orders
//! refused with the file, line, key and what was expected.

use serde_json::Value;

use crate::support::{fixture, gpuenv_env, json, root};

fn host(name: &str) -> String {
    fixture(&format!("hosts/{name}")).to_str().unwrap().to_string()
}

/// `check` on a recorded host with `args` and the environment `env`: the JSON run and the
/// text run. These tests judge the order's own items; the recorded hosts lack some health
/// facts (clock-event reasons, processes), so unknown health is allowed here, and the
/// health items are tested on their own in `health.rs`.
fn check(host_name: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let h = host(host_name);
    let mut a = vec!["check", "--host-facts", h.as_str(), "--allow-health", "unknown"];
    a.extend_from_slice(args);
    let text = gpuenv_env(&root(), &a, env);
    a.push("--json");
    let run = gpuenv_env(&root(), &a, env);
    assert_eq!(run.code, text.code, "{}{}", run.stderr, text.stderr);
    (run.code, json(&run), text.stdout)
}

fn item<'a>(doc: &'a Value, key: &str) -> &'a Value {
    doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["item"] == key)
        .unwrap_or_else(|| panic!("no item {key} in {doc:#}"))
}

/// An order file the test writes, in a directory that lives as long as it.
struct Order {
    dir: tempfile::TempDir,
}

impl Order {
    fn new(text: &str) -> Order {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("order.toml"), text).unwrap();
        Order { dir }
    }

    fn path(&self) -> String {
        self.dir.path().join("order.toml").to_str().unwrap().to_string()
    }
}

#[test]
fn an_item_decided_by_an_override_is_not_accepted() {
    // The short delivery (7x A100 40GB), with GPUENV_GPUS pretending it is the order.
    let env = [("GPUENV_GPUS", "A100 80GB SXMx8")];
    let (code, doc, text) = check(
        "7x-a100-40gb-driver-525",
        &[
            "--expect-gpu",
            "A100 80GB SXM",
            "--expect-gpus",
            "8",
            "--expect-disk",
            "2TB",
        ],
        &env,
    );
    assert_eq!(code, 1, "an overridden item is never accepted");
    assert_eq!(doc["accepted"], false);
    assert_eq!(
        doc["overrides"],
        serde_json::json!(["GPUENV_GPUS=A100 80GB SXMx8"])
    );
    for key in ["gpu", "gpus"] {
        let a = item(&doc, key);
        assert_eq!(a["verdict"], "overridden", "{a}");
        assert_eq!(a["overridden_by"], "GPUENV_GPUS", "{a}");
        assert_eq!(a["pass"], false, "{a}");
    }
    assert_eq!(item(&doc, "gpus")["found"], "8");
    // Disk has no override: decided on evidence, and it says nothing of one.
    assert_eq!(item(&doc, "disk")["verdict"], "pass");
    assert!(item(&doc, "disk").get("overridden_by").is_none());
    assert!(
        text.contains("OVER  gpus: expected 8, found 8 from GPUENV_GPUS (an override is not evidence)"),
        "{text}"
    );
    assert!(
        text.contains(
            "overrides:  GPUENV_GPUS=A100 80GB SXMx8 (facts they replace are not evidence for acceptance)"
        ),
        "{text}"
    );
    assert!(
        text.contains("not accepted: 0 failed, 2 decided by an override"),
        "{text}"
    );
}

#[test]
fn each_override_names_the_items_it_can_decide() {
    let env = [
        ("GPUENV_DRIVER", "550.54.14"),
        ("GPUENV_CPUS", "64"),
        ("GPUENV_MEMORY_GIB", "1024"),
    ];
    let order =
        Order::new("driver = \">=535\"\ncpus = 64\nmemory = \"1TB\"\ngpus = 8\ngpu_memory = \"80GB\"\n");
    let (code, doc, _) = check("8x-h100-nvlink", &["--order", &order.path()], &env);
    assert_eq!(code, 1);
    // The order's items; the health items (no override decides them) are tested apart.
    let by: Vec<(String, String, String)> = doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| !a["item"].as_str().unwrap().starts_with("health-"))
        .map(|a| {
            (
                a["item"].as_str().unwrap().to_string(),
                a["verdict"].as_str().unwrap().to_string(),
                a["overridden_by"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want = [
        ("gpus", "pass", ""),
        ("gpu_memory", "pass", ""),
        ("driver", "overridden", "GPUENV_DRIVER"),
        ("cpus", "overridden", "GPUENV_CPUS"),
        ("memory", "overridden", "GPUENV_MEMORY_GIB"),
    ]
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(by, want);
    assert_eq!(
        doc["overrides"],
        serde_json::json!([
            "GPUENV_DRIVER=550.54.14",
            "GPUENV_CPUS=64",
            "GPUENV_MEMORY_GIB=1024"
        ])
    );
}

#[test]
fn an_override_no_item_rests_on_is_listed_and_harmless() {
    let (code, doc, text) = check(
        "8x-h100-nvlink",
        &["--expect-gpus", "8", "--expect-memory", "2TB"],
        &[("GPUENV_NVCC", "12.4")],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["accepted"], true);
    assert_eq!(doc["overrides"], serde_json::json!(["GPUENV_NVCC=12.4"]));
    assert!(text.contains("overrides:  GPUENV_NVCC=12.4"), "{text}");
    assert!(text.contains("accepted: every item holds"), "{text}");
    // And with none, the list is there and empty.
    let (_, doc, text) = check("8x-h100-nvlink", &["--expect-gpus", "8"], &[]);
    assert_eq!(doc["overrides"], serde_json::json!([]));
    assert!(!text.contains("overrides:"), "{text}");
}

#[test]
fn tolerances_and_conversions_are_shown() {
    // 8x H100: 79.6 GiB per GPU, 2015.6 GiB of memory, 8171 GB of disk.
    let (code, doc, text) = check(
        "8x-h100-nvlink",
        &[
            "--expect-gpu-memory",
            "80GB",
            "--expect-memory",
            "2TB",
            "--expect-disk",
            "8TB",
        ],
        &[],
    );
    assert_eq!(code, 0, "{doc:#}");
    let mem = item(&doc, "memory");
    assert_eq!(mem["expected"], "2048 GiB");
    assert_eq!(mem["found"], "2015.6 GiB");
    assert_eq!(
        mem["rule"],
        "\"2TB\" read as 2048 GiB; at least 95% of 2048 GiB (1945.6 GiB): memory is sold in binary sizes \
         (1 TB = 1024 GiB) and the kernel keeps some for itself"
    );
    let gm = item(&doc, "gpu_memory");
    assert_eq!(gm["found"], "79.6 GiB (smallest GPU)");
    assert!(
        gm["rule"].as_str().unwrap().contains(
            "at least 95% of 80 GiB (76.0 GiB) on the smallest GPU: GPU memory is sold in binary sizes"
        ),
        "{gm}"
    );
    let disk = item(&doc, "disk");
    assert_eq!(disk["expected"], "8000 GB");
    assert_eq!(disk["found"], "8171 GB");
    assert!(
        disk["rule"].as_str().unwrap().starts_with(
            "\"8TB\" read as 8000 GB; at least 95% of 8000 GB (7600 GB) over all real filesystems"
        ),
        "{disk}"
    );
    assert!(
        text.contains(
            "  pass  memory: expected 2048 GiB, found 2015.6 GiB\n          rule: \"2TB\" read as 2048 GiB; at least 95% of 2048 GiB (1945.6 GiB)"
        ),
        "{text}"
    );
    // Every item carries a rule, a verdict and the fields it had before.
    for a in doc["acceptance"].as_array().unwrap() {
        for field in ["item", "expected", "found", "pass", "verdict", "rule"] {
            assert!(a.get(field).is_some(), "{field} missing in {a}");
        }
    }

    // Outside the tolerance: 8.6 TB of disk and 2.2 TB of memory were not delivered.
    let (code, doc, text) = check(
        "8x-h100-nvlink",
        &["--expect-memory", "2.2TB", "--expect-disk", "8.61TB"],
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(item(&doc, "memory")["verdict"], "fail");
    assert_eq!(item(&doc, "disk")["verdict"], "fail");
    assert!(
        text.contains("FAIL  disk: expected 8610 GB, found 8171 GB"),
        "{text}"
    );
    assert!(
        text.contains("not accepted: 2 failed, 0 decided by an override"),
        "{text}"
    );
}

#[test]
fn an_order_file_and_the_flags_read_values_the_same_way() {
    let order = Order::new(
        "# as the vendor's order page put it\ngpu = \"H100 SXM\"\ngpus = \"8\"\ngpu_memory = \"80 GB\"\n\
         driver = \">=535\"\ncpus = 32\nmemory = \"2 TB\"\ndisk = \"7.5TiB\"\n",
    );
    let (code, file_doc, _) = check("8x-h100-nvlink", &["--order", &order.path()], &[]);
    assert_eq!(code, 0, "{file_doc:#}");
    let (code, flag_doc, _) = check(
        "8x-h100-nvlink",
        &[
            "--expect-gpu",
            "H100 SXM",
            "--expect-gpus",
            "8",
            "--expect-gpu-memory",
            "80 GB",
            "--expect-driver",
            ">=535",
            "--expect-cpus",
            "32",
            "--expect-memory",
            "2 TB",
            "--expect-disk",
            "7.5TiB",
        ],
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(file_doc["acceptance"], flag_doc["acceptance"]);
    assert_eq!(item(&file_doc, "disk")["expected"], "8246.34 GB");
    // A flag given as well wins over the file.
    let (code, doc, _) = check(
        "8x-h100-nvlink",
        &["--order", &order.path(), "--expect-gpus", "16"],
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(item(&doc, "gpus")["expected"], "16");
    assert_eq!(item(&doc, "gpus")["verdict"], "fail");
}

#[test]
fn a_bad_order_file_names_file_line_key_and_what_was_expected() {
    for (text, line, wanted) in [
        (
            "gpus = 8\ngpu_memory = \"80G\"\nmemory = \"1 XB\"\n",
            "line 3, key `memory`: `\"1 XB\"` has an unknown unit `XB`; expected the memory as a number of GiB, \
             or a string with its unit (\"512GB\", \"1TB\"); memory is sold in binary sizes, so 1 TB = 1024 GiB \
             (`memory = 512`)",
            "memory",
        ),
        (
            "gpu_memory = \"80X\"\n",
            "line 1, key `gpu_memory`: `\"80X\"` has an unknown unit `X`",
            "gpu_memory = 80",
        ),
        ("\ngpus = 0\n", "line 2, key `gpus`: `0` is zero", "gpus = 8"),
        ("cpus = -8\n", "line 1, key `cpus`: `-8` is negative", "cpus = 64"),
        (
            "cpus = 1.5\n",
            "line 1, key `cpus`: `1.5` is not a whole number",
            "cpus = 64",
        ),
        (
            "disk = nan\n",
            "line 1, key `disk`: `nan` is not a number",
            "disk = 2000",
        ),
        (
            "disk = \"inf TB\"\n",
            "line 1, key `disk`: `\"inf TB\"` is not a number",
            "disk = 2000",
        ),
        (
            "driver = \"\"\n",
            "line 1, key `driver`: the value is empty",
            "driver = \">=535\"",
        ),
        (
            "gpu = 8\n",
            "line 1, key `gpu`: `8` is a number, not a string",
            "gpu = \"H100 SXM\"",
        ),
        (
            "memory = true\n",
            "line 1, key `memory`: found a boolean",
            "memory = 512",
        ),
        (
            "gpus = 8\ngpu_count = 8\n",
            "line 2: unknown key `gpu_count`",
            "gpu, gpus, gpu_memory",
        ),
        ("gpus = 8\ngpus = 4\n", "line 2: not valid TOML", "duplicate key"),
    ] {
        let order = Order::new(text);
        let run = gpuenv_env(
            &root(),
            &[
                "check",
                "--host-facts",
                &host("8x-h100-nvlink"),
                "--order",
                &order.path(),
            ],
            &[],
        );
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        assert!(
            run.stdout.is_empty(),
            "{text}: nothing is written: {}",
            run.stdout
        );
        let at = format!("order `{}` {line}", order.path());
        assert!(run.stderr.contains(&at), "{text}:\n{}\nwant: {at}", run.stderr);
        assert!(
            run.stderr.contains(wanted),
            "{text}:\n{}\nwant: {wanted}",
            run.stderr
        );
    }
    let run = gpuenv_env(&root(), &["check", "--order", "/nonexistent/order.toml"], &[]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("cannot read order `/nonexistent/order.toml`: no such file"),
        "{}",
        run.stderr
    );
}

#[test]
fn bad_expect_flags_are_bad_input() {
    for (args, said) in [
        (
            ["--expect-gpus", "0"],
            "--expect-gpus `0`: `0` is zero; expected a whole number of GPUs above 0 (`--expect-gpus 8`)",
        ),
        (
            ["--expect-memory", "-512"],
            "--expect-memory `-512`: `-512` is negative",
        ),
        (
            ["--expect-disk", "inf"],
            "--expect-disk `inf`: `inf` is not a number",
        ),
        (
            ["--expect-gpu-memory", "80 gigs"],
            "--expect-gpu-memory `80 gigs`: `80 gigs` has an unknown unit `gigs`",
        ),
        (
            ["--expect-cpus", "64.5"],
            "--expect-cpus `64.5`: `64.5` is not a whole number",
        ),
        (["--expect-driver", ""], "--expect-driver ``: the value is empty"),
    ] {
        let mut a = vec!["check", "--host-facts"];
        let h = host("8x-h100-nvlink");
        a.push(&h);
        a.extend_from_slice(&args);
        let run = gpuenv_env(&root(), &a, &[]);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty());
        assert!(
            run.stderr.contains(said),
            "{args:?}:\n{}\nwant: {said}",
            run.stderr
        );
    }
}

/// The order a buyer of an 8x H100 node writes, every layout key in it, on a recorded host
/// whose data disk rotates and whose NVSwitches no `lspci` answered for: those two fail,
/// each with what was found and where; the rest pass on their facts.
#[test]
fn a_full_order_names_what_the_delivery_lacks() {
    let order = Order::new(
        "gpu = \"8x H100 SXM\"\ngpu_memory = \"80GB\"\ndriver = \">=550\"\ncuda = \"12.4\"\nnvlink = \"all\"\n\
         topology = \"nvswitch\"\ncpu_model = \"2x EPYC 72F3\"\nmemory = \"2TB\"\nsystem_disk = \"480GB\"\n\
         data_disk = \"16TB\"\ndata_disk_type = \"nvme\"\nrdma = \"400G\"\nnic_speed = \"25G\"\ncontainer_runtime = true\n",
    );
    let (code, doc, text) = check("2-socket-rdma", &["--order", &order.path()], &[]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(doc["accepted"], false);
    let failed: Vec<&str> = doc["acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["verdict"] != "pass")
        .map(|a| a["item"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["topology", "data_disk_type"], "{text}");
    assert_eq!(
        item(&doc, "data_disk_type")["found"],
        "/data (/dev/sdb1, 15999 GB, hdd) (from /sys/block/sdb/queue/rotational)"
    );
    assert_eq!(item(&doc, "sockets")["found"], "2");
    assert_eq!(
        item(&doc, "rdma")["found"],
        "mlx5_0/1 InfiniBand 400 Gb/s ACTIVE; mlx5_1/1 InfiniBand 400 Gb/s ACTIVE"
    );
    assert!(
        text.contains("FAIL  topology: expected GPUs on an NVSwitch fabric, found NVSwitches unknown"),
        "{text}"
    );
    // The flags say the same as the file.
    let (code, doc, _) = check(
        "2-socket-rdma",
        &[
            "--expect-nvlink",
            "--expect-rdma",
            "--expect-data-disk-type",
            "hdd",
            "--expect-cpu-model",
            "EPYC*",
            "--expect-container-runtime",
        ],
        &[],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["accepted"], true);
    // Five items ordered, and the eight health items every order holds.
    assert_eq!(doc["acceptance"].as_array().unwrap().len(), 5 + 8);
}

/// A bad value of each new kind exits 2 and names the key or the flag, with nothing probed.
#[test]
fn bad_layout_values_exit_2_naming_the_key() {
    for (text, says) in [
        (
            "rdma = \"200 parsecs\"\n",
            "key `rdma`: `\"200 parsecs\"` has an unknown unit `parsecs`",
        ),
        (
            "data_disk = \"-4TB\"\n",
            "key `data_disk`: `\"-4TB\"` is negative",
        ),
        (
            "nvlinks = true\n",
            "unknown key `nvlinks` (did you mean `nvlink`?)",
        ),
        (
            "topology = \"ring\"\n",
            "key `topology`: `\"ring\"` is not a topology gpuenv knows",
        ),
    ] {
        let order = Order::new(text);
        let run = gpuenv_env(
            &root(),
            &[
                "check",
                "--host-facts",
                &host("2-socket-rdma"),
                "--order",
                &order.path(),
            ],
            &[],
        );
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{text}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{text}: {}", run.stdout);
    }
    let run = gpuenv_env(
        &root(),
        &[
            "check",
            "--host-facts",
            &host("2-socket-rdma"),
            "--expect-nic-speed",
            "fast",
        ],
        &[],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("--expect-nic-speed `fast`: "),
        "{}",
        run.stderr
    );
}

/// nvidia-smi names the 8 GB and the 16 GB RTX 4060 Ti alike: the memory it reports decides
/// which was delivered. The hosts are the recorded 4090 host with its name and memory total
/// changed to each board's (16380 and 8188 MiB, as nvidia-smi reports them).
#[test]
fn a_16gb_order_is_judged_by_the_memory_delivered() {
    let recorded = std::fs::read_to_string(fixture("hosts/1x-4090-gen3-slot/host.json")).unwrap();
    assert_eq!(
        recorded.matches("24564 MiB").count(),
        1,
        "the recorded total moved"
    );
    let delivered = |mib: &str| {
        let dir = tempfile::tempdir().unwrap();
        let text = recorded
            .replace("RTX 4090", "RTX 4060 Ti")
            .replace("24564 MiB", &format!("{mib} MiB"));
        std::fs::write(dir.path().join("host.json"), text).unwrap();
        dir
    };
    let judge = |dir: &tempfile::TempDir, want: &str| {
        let h = dir.path().join("host.json");
        let a = [
            "check",
            "--host-facts",
            h.to_str().unwrap(),
            "--allow-health",
            "unknown",
            "--expect-gpu",
            want,
            "--json",
        ];
        let run = gpuenv_env(&root(), &a, &[]);
        let doc = json(&run);
        (item(&doc, "gpu")["verdict"].as_str().unwrap().to_string(), doc)
    };
    let sixteen = delivered("16380");
    let eight = delivered("8188");
    let (v, doc) = judge(&sixteen, "RTX 4060 Ti 16GB");
    assert_eq!(v, "pass", "{doc:#}");
    // The 8 GB board is not what was ordered, though nvidia-smi names it the same.
    let (v, doc) = judge(&eight, "RTX 4060 Ti 16GB");
    assert_eq!(v, "fail", "{doc:#}");
    let (v, doc) = judge(&eight, "RTX 4060 Ti 8GB");
    assert_eq!(v, "pass", "{doc:#}");
    let (v, doc) = judge(&sixteen, "RTX 4060 Ti 8GB");
    assert_eq!(v, "fail", "{doc:#}");
}
