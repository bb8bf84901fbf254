//! Property tests: no parser panics, whatever it is given: arbitrary text, text made of
//! the words the real outputs use, and every fixture cut short at any character.

use proptest::prelude::*;

use super::*;

/// Runs every parser over `text`; the results are dropped, only panics matter.
fn parse_everything(text: &str) {
    let _ = smi_xml(text);
    let _ = smi_csv(text);
    let _ = smi_table_cuda(text);
    let _ = smi_topo(text);
    let _ = smi_nvlink_status(text);
    let _ = lspci_nvswitches(text);
    let _ = smi_failure(Some(1), text, text);
    let _ = smi_failure(None, "", text);
    let _ = proc_driver_version(text);
    let _ = nvcc_version(text);
    let _ = cuda_version_json(text);
    let _ = cuda_version_txt(text);
    let _ = cudnn_header(text);
    let _ = nccl_header(text);
    let _ = ldconfig(text);
    let _ = lib_version(text, "libcudnn.so.");
    let _ = lib_version("libcudnn.so.9.1.0", text);
    let _ = os_release(text);
    let _ = ldd_version(text);
    let _ = getconf_glibc(text);
    let _ = cpuinfo(text);
    let _ = meminfo_total_kib(text);
    let _ = df(text);
    let _ = nvidia_ctk_version(text);
    let _ = cdi_spec_kind(text);
    let _ = block_disk(text);
    let _ = rotational(text);
    let _ = net_speed_mbps(text);
    let _ = sysfs_word(text);
    let _ = uevent_driver(text);
    let _ = rdma_state(text);
    let _ = rdma_rate_gbps(text);
    let _ = peermem_loaded(text);
    let _ = numa_nodes(&text.lines().map(str::to_string).collect::<Vec<_>>());
}

const FIXTURES: &[&str] = &[
    fixture!("nvidia-smi-q-x/8x-h100-sxm5-80gb-driver-550.90.07-dtd-v12.xml"),
    fixture!("nvidia-smi-q-x/h100-pcie-mig-enabled-driver-560.35.03-dtd-v13.xml"),
    fixture!("nvidia-smi-q-x/tesla-v100-sxm2-driver-418.87.01-dtd-v10.xml"),
    fixture!("nvidia-smi-query-gpu/2x-mixed-na-units.csv"),
    fixture!("nvidia-smi/rtx-4090-driver-610.43.02-umd.txt"),
    fixture!("nvidia-smi-topo-m/8x-h100-sxm-nv18-4nic.txt"),
    fixture!("nvidia-smi-topo-m/1x-l4-ansi-header.txt"),
    fixture!("nvidia-smi-topo-m/8x-geforce-rtx-4090-pcie-sys-phb-pix-2nic-no-legend.txt"),
    fixture!("nvidia-smi-q-x/rtx-pro-6000-blackwell-maxq-driver-590.44.01-dtd-v13.xml"),
    fixture!("nvidia-smi-q-x/a10g-driver-515.105.01-dtd-v11.xml"),
    fixture!("nvidia-smi-nvlink-s/nvidia-h100-80gb-hbm3-linux-x86_64-driver-590.48.01.txt"),
    fixture!("lspci/hgx-h100-8gpu-4nvswitch-synthetic.txt"),
    fixture!("nvidia-smi-errors/nvml-mismatch-nvml-550.127.txt"),
    fixture!("proc-driver-nvidia-version/open-x86_64-565.57.01.txt"),
    fixture!("nvcc-version/cuda-12.4.131.txt"),
    fixture!("cuda-version/version-12.4.1.json"),
    fixture!("cudnn/cudnn-7.6.5.h"),
    fixture!("nccl/nccl-2.21.5.h"),
    fixture!("ldconfig/ldconfig-p.txt"),
    fixture!("os-release/ubuntu-22.04.txt"),
    fixture!("cpuinfo/aarch64-neoverse-v2-4c.txt"),
    fixture!("df/df-PkT.txt"),
    fixture!("sysfs/infiniband-hdr/rate.txt"),
    fixture!("sysfs/proc-modules/peermem.txt"),
    fixture!("sysfs/vm-virtio/class-net-eth0-device-uevent.txt"),
];

/// Words and separators of the real outputs, so that generated text reaches deep into the
/// parsers rather than failing at the first character.
fn vocabulary() -> impl Strategy<Value = String> {
    let word = prop::sample::select(vec![
        "GPU0",
        "GPU1",
        "GPU2",
        "NIC0",
        "X",
        "NV18",
        "NV",
        "SYS",
        "PIX",
        "PHB",
        "CPU",
        "Affinity",
        "NUMA",
        "NIC Legend:",
        "  NIC0: mlx5_0",
        "mlx5_0",
        "GPU 0: ",
        "\t Link 0: ",
        "26.562 GB/s",
        "<inactive>",
        "0680: 10de:22a3",
        "<processes>",
        "<process_info>",
        "<pid>",
        "</pid>",
        "<clocks_event_reasons>",
        "<clocks_event_reason_sw_power_cap>",
        "Active",
        "Not Active",
        "<power_draw>",
        "26.84 W",
        "P8",
        "\t",
        " ",
        "\n",
        ",",
        ", ",
        ":",
        "[N/A]",
        "N/A",
        "0",
        "16x",
        "81559 MiB",
        "9.0",
        "535.104.05",
        "12.4",
        "Enabled",
        "Disabled",
        "\u{1b}[4m",
        "\u{1b}",
        "=>",
        "(libc6,x86-64)",
        "#define",
        "CUDNN_MAJOR",
        "NCCL_PATCH",
        "NVRM version:",
        "Kernel Module",
        "for",
        "release",
        "V12.4.131",
        "CUDA Version",
        "CUDA UMD Version",
        "ldd",
        "glibc",
        "processor",
        "physical id",
        "core id",
        "MemTotal:",
        "kB",
        "\"",
        "'",
        "\\",
        "é",
        "/",
        "<nvidia_smi_log>",
        "<gpu id=\"1\">",
        "<product_name>",
        "</product_name>",
        "<ecc_errors>",
        "<volatile>",
        "<double_bit>",
        "<total>",
        "</total>",
        "sram_uncorrectable",
        "Driver/library version mismatch",
        "NVML library version:",
    ]);
    prop::collection::vec(word, 0..80).prop_map(|words| words.concat())
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        parse_everything(&text);
    }

    #[test]
    fn tool_like_text_never_panics(text in vocabulary()) {
        parse_everything(&text);
    }

    #[test]
    fn cut_fixtures_never_panic(which in 0..FIXTURES.len(), cut in 0.0f64..1.0) {
        let text = FIXTURES[which];
        let mut at = (text.len() as f64 * cut) as usize;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        parse_everything(&text[..at]);
        parse_everything(&text[at..]);
    }
}
