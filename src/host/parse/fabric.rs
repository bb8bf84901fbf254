//! The NVLink fabric: each GPU's links as `nvidia-smi nvlink -s` reports them, and the
//! NVSwitch chips `lspci -n -d 10de:` lists.
//!
//! Must not: decide whether a link count or speed is right for the board (the checks know
//! which products have how many links), or read anything but the text given.

use crate::host::types::{NvLinkGpu, NvLinkLane};

/// Parses `nvidia-smi nvlink -s`:
///
/// ```text
/// GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
///      Link 0: 26.562 GB/s
///      Link 3: <inactive>
/// ```
///
/// A GPU without NVLink prints only its `GPU` line, or adds a line saying so (`Device does
/// not have or support Nvlink`, `NVML: Unable to retrieve Nvlink information as all links
/// are inActive`): it is listed with no links. A GPU in MIG mode (`Nvlink queries are not
/// supported for Devices in MIG mode`) is left out: its links exist but were not read, and
/// "no links" would be a wrong answer. A link line whose value is neither a speed nor
/// `<inactive>` is skipped rather than guessed at.
///
/// Errors when no `GPU <n>:` line is found (the command printed an error instead).
pub fn smi_nvlink_status(text: &str) -> Result<Vec<NvLinkGpu>, String> {
    let mut gpus: Vec<NvLinkGpu> = Vec::new();
    let mut unread: Vec<u32> = Vec::new();
    let mut saw_gpu = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(index) = gpu_line(line) {
            saw_gpu = true;
            gpus.push(NvLinkGpu {
                gpu: index,
                links: Vec::new(),
            });
            continue;
        }
        let Some(current) = gpus.last_mut() else {
            continue;
        };
        if line
            .to_ascii_lowercase()
            .contains("not supported for devices in mig mode")
        {
            unread.push(current.gpu);
            continue;
        }
        if let Some(lane) = link_line(line) {
            current.links.push(lane);
        }
    }
    if !saw_gpu {
        return Err("no `GPU <n>:` line in `nvidia-smi nvlink -s` output".to_string());
    }
    gpus.retain(|g| !unread.contains(&g.gpu));
    Ok(gpus)
}

/// `0` for `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`.
fn gpu_line(line: &str) -> Option<u32> {
    let rest = line.strip_prefix("GPU ")?;
    let (index, _) = rest.split_once(':')?;
    let index = index.trim();
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    index.parse().ok()
}

/// `Link 0: 26.562 GB/s` or `Link 3: <inactive>`.
fn link_line(line: &str) -> Option<NvLinkLane> {
    let rest = line.strip_prefix("Link ")?;
    let (number, value) = rest.split_once(':')?;
    let link = number.trim().parse().ok()?;
    let value = value.trim();
    if value.eq_ignore_ascii_case("<inactive>") {
        return Some(NvLinkLane {
            link,
            active: false,
            speed_gb_s: None,
        });
    }
    let speed = value
        .strip_suffix("GB/s")?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(NvLinkLane {
        link,
        active: true,
        speed_gb_s: Some(speed),
    })
}

/// How many NVSwitch chips `lspci -n -d 10de:` lists: NVIDIA devices (vendor `10de`) of
/// PCI class `0680` ("bridge, other"), which on HGX/DGX boards are the NVSwitches.
///
/// Each line reads `07:00.0 0680: 10de:22a3 (rev a1)` (a domain may lead the address).
/// Lines of other classes (`0302` for a 3D controller GPU) or other vendors do not count;
/// lines that are not of this form are skipped.
///
/// The class alone decides, so that NVSwitch generations not yet released count too. The
/// one other NVIDIA device of this class is the Ethernet controller of nForce chipsets
/// (2004 to 2010, `10de:0057`, `10de:0269`...), on boards that hold no data-centre GPU; the
/// probe asks only where there is more than one GPU.
pub fn lspci_nvswitches(text: &str) -> u32 {
    let count = text
        .lines()
        .filter(|line| {
            let mut words = line.split_whitespace();
            let (Some(_address), Some(class), Some(id)) = (words.next(), words.next(), words.next()) else {
                return false;
            };
            // `0680:`; lspci writes `0680` without `-nn`'s names, and a programming
            // interface, when there is one, after a space (`0680 (prog-if ...)`) is not
            // printed with `-n`.
            class.trim_end_matches(':') == "0680" && id.to_ascii_lowercase().starts_with("10de:")
        })
        .count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn h100_eighteen_links() {
        let g = smi_nvlink_status(fixture!(
            "nvidia-smi-nvlink-s/nvidia-h100-80gb-hbm3-linux-x86_64-driver-590.48.01.txt"
        ))
        .unwrap();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].gpu, 0);
        assert_eq!(g[0].links.len(), 18);
        for (i, l) in g[0].links.iter().enumerate() {
            assert_eq!(l.link as usize, i);
            assert!(l.active);
            assert_eq!(l.speed_gb_s, Some(26.562));
        }
    }

    #[test]
    fn no_nvlink_and_all_inactive_read_as_no_links() {
        for text in [
            fixture!("nvidia-smi-nvlink-s/nvidia-l40s-linux-x86_64-driver-595.80.txt"),
            fixture!("nvidia-smi-nvlink-s/nvidia-geforce-rtx-2080-super-linux-x86_64-driver-595.71.05.txt"),
            "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1)\n",
        ] {
            let g = smi_nvlink_status(text).unwrap();
            assert_eq!(g.len(), 1, "{text}");
            assert!(g[0].links.is_empty(), "{text}");
        }
    }

    #[test]
    fn mig_mode_is_left_out() {
        let g = smi_nvlink_status(fixture!(
            "nvidia-smi-nvlink-s/nvidia-h100-mig-linux-x86_64-driver-590.48.01.txt"
        ))
        .unwrap();
        assert!(g.is_empty(), "{g:?}");
    }

    #[test]
    fn inactive_links_several_gpus_and_odd_lines() {
        let text = "GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-a)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n\t Link 2: fast\n\
                    GPU 1: NVIDIA A100 80GB PCIe (UUID: GPU-b)\n\t Link 0: 25 GB/s\n";
        let g = smi_nvlink_status(text).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(
            g[0].links,
            vec![
                NvLinkLane {
                    link: 0,
                    active: true,
                    speed_gb_s: Some(25.0)
                },
                NvLinkLane {
                    link: 1,
                    active: false,
                    speed_gb_s: None
                }
            ]
        );
        assert_eq!((g[1].gpu, g[1].links.len()), (1, 1));
        for bad in [
            "",
            "Failed to initialize NVML: Driver/library version mismatch\n",
            "\t Link 0: 25 GB/s\n",
            "GPU x: y\n",
        ] {
            assert!(smi_nvlink_status(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn nvswitches() {
        assert_eq!(
            lspci_nvswitches(fixture!("lspci/hgx-h100-8gpu-4nvswitch-synthetic.txt")),
            4
        );
        assert_eq!(
            lspci_nvswitches("01:00.0 0300: 10de:2684 (rev a1)\n01:00.1 0403: 10de:22ba (rev a1)\n"),
            0
        );
        assert_eq!(lspci_nvswitches("0000:07:00.0 0680: 10de:1af1 (rev a1)\n"), 1);
        assert_eq!(lspci_nvswitches("07:00.0 0680: 8086:1af1\n"), 0, "not NVIDIA");
        assert_eq!(lspci_nvswitches(""), 0);
        assert_eq!(lspci_nvswitches("garbage\n0680\n"), 0);
    }
}
