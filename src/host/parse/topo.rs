//! `nvidia-smi topo -m`: the connection matrix, GPU to GPU and GPU to NIC, and each GPU's
//! CPU and NUMA affinity.
//!
//! The output is a header row of device labels (`GPU0 GPU1 ... NIC0 ... CPU Affinity NUMA
//! Affinity GPU NUMA ID`), one row per device, then a legend and, on drivers that label
//! NICs `NIC<n>`, a `NIC Legend:` naming each (`NIC0: mlx5_0`). Cells are separated by
//! tabs on a terminal but by spaces in many pastes, newer drivers underline the header with
//! ANSI escapes, NIC rows may be trimmed, and the legend may be missing. What is read: the
//! header's device labels (up to the first word that is not one, `CPU`), the rows labelled
//! `GPU<n>`, and of each row the cells under every device column (GPU columns into the
//! GPU matrix, the others, `NIC0` or `mlx5_0` on old drivers, into the NIC matrix), then
//! the affinity cells the header names after the devices; and the NIC legend. NIC rows
//! (the same links seen from the NIC) and the GPU NUMA ID column are not kept.
//!
//! Must not: judge the links (whether SYS between GPUs is a problem is for the checks).

use crate::host::types::{Link, TopoNic, Topology};

/// Parses the matrix of `nvidia-smi topo -m`: GPU x GPU, GPU x NIC, and each GPU's
/// affinity (`None` for `N/A`, or where a trimmed capture has no such cell).
///
/// Errors when there is no matrix (`nvidia-smi` printed an error instead), when a GPU has
/// a column but no row, when a row is short, when a cell is not a known link, or when the
/// diagonal is not `X` (then the columns were misread, and a wrong matrix is worse than
/// none).
pub fn smi_topo(text: &str) -> Result<Topology, String> {
    // Drivers from the 590 series underline the header on a terminal, and captures keep
    // the escapes.
    let clean = crate::text::strip_ansi(text);
    let lines: Vec<Vec<&str>> = clean.lines().map(|l| l.split_whitespace().collect()).collect();
    let header_at = lines
        .iter()
        .position(|words| is_header(words))
        .ok_or("no GPU matrix in `nvidia-smi topo -m` output (no header line naming GPU0)")?;
    let columns: Vec<&str> = lines[header_at]
        .iter()
        .copied()
        .take_while(|w| is_device_label(w))
        .collect();
    let gpu_columns: Vec<(usize, &str)> = columns
        .iter()
        .enumerate()
        .filter(|(_, label)| gpu_number(label).is_some())
        .map(|(i, label)| (i, *label))
        .collect();
    // Every other device column is a NIC (`NIC0`; `mlx5_0` before NIC labels existed).
    let nic_columns: Vec<(usize, &str)> = columns
        .iter()
        .enumerate()
        .filter(|(_, label)| gpu_number(label).is_none())
        .map(|(i, label)| (i, *label))
        .collect();
    let affinity = affinity_columns(&lines[header_at][columns.len()..]);

    let mut links: Vec<Option<Row>> = vec![None; gpu_columns.len()];
    let raw: Vec<&str> = clean.lines().collect();
    for (words, raw) in lines.iter().zip(&raw).skip(header_at + 1) {
        let Some((label, cells)) = words.split_first() else {
            continue;
        };
        let Some(row) = gpu_columns.iter().position(|(_, l)| l == label) else {
            continue;
        };
        // A legend or a repeated header is not a row: rows start with a link cell.
        if cells.first().is_none_or(|c| parse_link(c).is_none()) {
            continue;
        }
        if cells.len() < columns.len() {
            return Err(format!(
                "row {label} has {} cells, the header names {} devices",
                cells.len(),
                columns.len()
            ));
        }
        let read = |of: &[(usize, &str)]| {
            of.iter()
                .map(|(col, col_label)| {
                    let cell = cells[*col];
                    parse_link(cell)
                        .ok_or_else(|| format!("row {label}, column {col_label}: unknown link `{cell}`"))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let rest = affinity_cells(raw, cells, columns.len());
        let cell = |at: Option<usize>| {
            at.and_then(|i| rest.get(i))
                .filter(|c| !c.is_empty() && **c != "N/A")
                .map(|c| c.to_string())
        };
        if links[row].is_none() {
            links[row] = Some(Row {
                gpus: read(&gpu_columns)?,
                nics: read(&nic_columns)?,
                cpu: cell(affinity.cpu),
                numa: cell(affinity.numa),
            });
        }
    }

    let mut rows = Vec::with_capacity(links.len());
    for ((_, label), row) in gpu_columns.iter().zip(links) {
        rows.push(row.ok_or_else(|| format!("{label} has a column in the matrix but no row"))?);
    }
    let matrix: Vec<Vec<Link>> = rows.iter().map(|r| r.gpus.clone()).collect();
    for (i, row) in matrix.iter().enumerate() {
        for (j, link) in row.iter().enumerate() {
            if (i == j) != (*link == Link::SelfLink) {
                return Err(format!(
                    "row {}, column {}: `X` must be on the diagonal and only there",
                    gpu_columns[i].1, gpu_columns[j].1
                ));
            }
        }
    }
    let legend = nic_legend(&lines);
    let nics = nic_columns
        .iter()
        .map(|(_, label)| TopoNic {
            label: label.to_string(),
            device: legend
                .iter()
                .find(|(l, _)| l == label)
                .map(|(_, d)| d.to_string()),
        })
        .collect();
    let nic_links = if nic_columns.is_empty() {
        Vec::new()
    } else {
        rows.iter().map(|r| r.nics.clone()).collect()
    };
    let any = |f: fn(&Row) -> &Option<String>| rows.iter().any(|r| f(r).is_some());
    // No affinity column at all (or all `N/A`) reads as empty, not a list of unknowns.
    let cpu_affinity = if any(|r| &r.cpu) {
        rows.iter().map(|r| r.cpu.clone()).collect()
    } else {
        Vec::new()
    };
    let numa_affinity = if any(|r| &r.numa) {
        rows.iter().map(|r| r.numa.clone()).collect()
    } else {
        Vec::new()
    };
    Ok(Topology {
        gpus: gpu_columns.iter().map(|(_, l)| l.to_string()).collect(),
        links: matrix,
        nics,
        nic_links,
        cpu_affinity,
        numa_affinity,
    })
}

/// One GPU row as read.
#[derive(Clone)]
struct Row {
    gpus: Vec<Link>,
    nics: Vec<Link>,
    cpu: Option<String>,
    numa: Option<String>,
}

/// Where the affinity cells sit among a row's cells after the device columns.
struct Affinity {
    cpu: Option<usize>,
    numa: Option<usize>,
}

/// The cells of a GPU row after its link cells, in the header's order.
///
/// A tab-separated row keeps its empty cells (Windows leaves both affinities empty:
/// `GPU0\t X \t\t\t\tN/A`), so it is split at tabs; the affinity cells come first, in the
/// header's order, then nvidia-smi's padding and the GPU NUMA ID. A pasted row whose tabs
/// became spaces cannot show an empty cell: its words are taken in order (affinity cells
/// hold no spaces), and a trimmed row simply has fewer.
fn affinity_cells<'a>(raw: &'a str, words: &[&'a str], devices: usize) -> Vec<&'a str> {
    let tabbed: Vec<&str> = raw.split('\t').map(str::trim).collect();
    // The label, then one cell per device.
    if tabbed.len() > devices + 1 {
        return tabbed[devices + 1..].to_vec();
    }
    words.get(devices..).map(<[&str]>::to_vec).unwrap_or_default()
}

/// Reads the header's words after the device labels (`CPU Affinity NUMA Affinity GPU NUMA
/// ID`) as column names, each a cell of the rows: which one is which. A header without
/// them (a trimmed capture) has no affinity cells.
fn affinity_columns(words: &[&str]) -> Affinity {
    let mut names: Vec<String> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for w in words {
        current.push(w);
        // Each column's name ends with `Affinity` or `ID`.
        if *w == "Affinity" || *w == "ID" {
            names.push(current.join(" "));
            current.clear();
        }
    }
    let at = |name: &str| names.iter().position(|n| n == name);
    Affinity {
        cpu: at("CPU Affinity"),
        numa: at("NUMA Affinity"),
    }
}

/// `(NIC0, mlx5_0)` for each line `NIC0: mlx5_0` after a `NIC Legend:` line.
fn nic_legend<'a>(lines: &[Vec<&'a str>]) -> Vec<(&'a str, &'a str)> {
    let Some(start) = lines.iter().position(|w| w.as_slice() == ["NIC", "Legend:"]) else {
        return Vec::new();
    };
    lines[start + 1..]
        .iter()
        .filter_map(|words| match words.as_slice() {
            [label, device] => Some((label.strip_suffix(':')?, *device)),
            _ => None,
        })
        .collect()
}

/// The header names devices and starts with `GPU0`; a row starting `GPU0` is followed by a
/// link cell (`X`) instead.
fn is_header(words: &[&str]) -> bool {
    words.first() == Some(&"GPU0") && words.get(1).is_none_or(|w| parse_link(w).is_none())
}

/// `GPU0`, `NIC1`, `mlx5_0`: a letter first, a digit last. `CPU`, `NUMA`, `Affinity` are
/// where the device labels end.
fn is_device_label(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_alphabetic()) && word.ends_with(|c: char| c.is_ascii_digit())
}

/// `3` for `GPU3`.
fn gpu_number(label: &str) -> Option<u32> {
    let digits = label.strip_prefix("GPU")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A matrix cell: `X`, `NV#`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`, `SOC`.
fn parse_link(cell: &str) -> Option<Link> {
    Some(match cell {
        "X" => Link::SelfLink,
        "PIX" => Link::Pix,
        "PXB" => Link::Pxb,
        "PHB" => Link::Phb,
        "NODE" => Link::Node,
        "SYS" => Link::Sys,
        "SOC" => Link::Soc,
        _ => {
            let n = cell.strip_prefix("NV")?;
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Link::NvLink(n.parse().ok()?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;
    use Link::*;

    fn square(t: &Topology, n: usize) {
        assert_eq!(t.gpus.len(), n);
        assert_eq!(t.links.len(), n);
        for (i, row) in t.links.iter().enumerate() {
            assert_eq!(row.len(), n);
            assert_eq!(row[i], SelfLink);
        }
    }

    #[test]
    fn h100_sxm_nvlink_with_nics() {
        let t = smi_topo(fixture!("nvidia-smi-topo-m/8x-h100-sxm-nv18-4nic.txt")).unwrap();
        square(&t, 8);
        assert_eq!(t.gpus[7], "GPU7");
        for (i, row) in t.links.iter().enumerate() {
            for (j, l) in row.iter().enumerate() {
                if i != j {
                    assert_eq!(*l, NvLink(18), "{i},{j}");
                    assert!(l.is_nvlink());
                }
            }
        }
    }

    #[test]
    fn a100_pcie_bridged_pairs_with_spaces() {
        let t = smi_topo(fixture!("nvidia-smi-topo-m/4x-a100-pcie-nv12-pairs-spaces.txt")).unwrap();
        square(&t, 4);
        assert_eq!(t.links[0], vec![SelfLink, NvLink(12), Pxb, Sys]);
        assert_eq!(t.links[1], vec![NvLink(12), SelfLink, Pxb, Sys]);
        assert_eq!(t.links[2], vec![Pxb, Pxb, SelfLink, Sys]);
        assert_eq!(t.links[3], vec![Sys, Sys, Sys, SelfLink]);
    }

    #[test]
    fn old_driver_soc_and_pix() {
        let t = smi_topo(fixture!("nvidia-smi-topo-m/4x-tesla-k80-soc-pix-old-driver.txt")).unwrap();
        square(&t, 4);
        assert_eq!(t.links[0], vec![SelfLink, Pix, Soc, Soc]);
        assert_eq!(t.links[3][2], Pix);
    }

    #[test]
    fn single_gpu_with_ansi_header() {
        let t = smi_topo(fixture!("nvidia-smi-topo-m/1x-l4-ansi-header.txt")).unwrap();
        square(&t, 1);
        assert_eq!(t.gpus, vec!["GPU0".to_string()]);
    }

    fn some(v: &[&str]) -> Vec<Option<String>> {
        v.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn h100_nics_legend_and_affinity() {
        let t = smi_topo(fixture!("nvidia-smi-topo-m/8x-h100-sxm-nv18-4nic.txt")).unwrap();
        let labels: Vec<_> = t.nics.iter().map(|n| n.label.as_str()).collect();
        assert_eq!(labels, ["NIC0", "NIC1", "NIC2", "NIC3"]);
        assert_eq!(t.nics[2].device.as_deref(), Some("mlx5_2"));
        assert_eq!(t.nic_links.len(), 8);
        assert_eq!(t.nic_links[0], vec![Pxb, Node, Sys, Sys]);
        assert_eq!(t.nic_links[7], vec![Sys, Sys, Node, Pxb]);
        assert_eq!(t.cpu_affinity[0].as_deref(), Some("0-55,112-167"));
        assert_eq!(t.cpu_affinity[4].as_deref(), Some("56-111,168-223"));
        assert_eq!(t.numa_affinity, some(&["0", "0", "0", "0", "1", "1", "1", "1"]));
    }

    /// A real paste: every GPU pair across the CPU interconnect, two NICs behind GPU6's
    /// host bridge, no legend (so no NIC device names), NIC rows trimmed.
    #[test]
    fn rtx_4090_sys_with_nics_no_legend() {
        let t = smi_topo(fixture!(
            "nvidia-smi-topo-m/8x-geforce-rtx-4090-pcie-sys-phb-pix-2nic-no-legend.txt"
        ))
        .unwrap();
        square(&t, 8);
        for (i, row) in t.links.iter().enumerate() {
            for (j, l) in row.iter().enumerate() {
                assert_eq!(*l, if i == j { SelfLink } else { Sys }, "{i},{j}");
            }
        }
        assert_eq!(
            t.nics,
            vec![
                TopoNic {
                    label: "NIC0".into(),
                    device: None
                },
                TopoNic {
                    label: "NIC1".into(),
                    device: None
                }
            ]
        );
        for (i, row) in t.nic_links.iter().enumerate() {
            let expected = if i == 6 { Phb } else { Sys };
            assert_eq!(row, &vec![expected, expected], "GPU{i}");
        }
        assert_eq!(t.numa_affinity, some(&["0", "0", "0", "0", "1", "1", "1", "1"]));
        assert_eq!(t.cpu_affinity[7].as_deref(), Some("56-111,168-223"));
    }

    #[test]
    fn five_gpus_two_numa_nodes_spaces() {
        let t = smi_topo(fixture!(
            "nvidia-smi-topo-m/5x-gpu-mixed-sys-phb-node-dual-numa-spaces.txt"
        ))
        .unwrap();
        square(&t, 5);
        assert_eq!(t.links[1], vec![Sys, SelfLink, Phb, Node, Node]);
        assert!(t.nics.is_empty() && t.nic_links.is_empty());
        assert_eq!(t.numa_affinity, some(&["1", "0", "0", "0", "0"]));
        assert_eq!(t.cpu_affinity[0].as_deref(), Some("8-15,24-31"));
        assert_eq!(t.cpu_affinity[1].as_deref(), Some("0-7,16-23"));
    }

    #[test]
    fn h100_matrix_only() {
        let t = smi_topo(fixture!("nvidia-smi-topo-m/8x-h100-sxm-nv18-matrix-only.txt")).unwrap();
        square(&t, 8);
        assert_eq!(t.links[3][5], NvLink(18));
        assert!(t.nics.is_empty());
        assert_eq!(t.numa_affinity, some(&["0", "0", "0", "0", "1", "1", "1", "1"]));
        assert_eq!(t.cpu_affinity[4].as_deref(), Some("48-95,144-191"));
    }

    #[test]
    fn rtx_5090_pair_threadripper() {
        let t = smi_topo(fixture!(
            "nvidia-smi-topo-m/2x-geforce-rtx-5090-phb-threadripper.txt"
        ))
        .unwrap();
        square(&t, 2);
        assert_eq!(t.links[0][1], Phb);
        assert_eq!(t.cpu_affinity, some(&["0-63", "0-63"]));
        assert_eq!(t.numa_affinity, some(&["0", "0"]));
    }

    /// Old drivers: `mlx5_0` as the NIC label, only a CPU affinity column, `N/A` cells.
    #[test]
    fn old_labels_and_missing_affinity() {
        let t = smi_topo(fixture!("nvidia-smi-topo-m/4x-tesla-k80-soc-pix-old-driver.txt")).unwrap();
        assert_eq!(t.cpu_affinity[2].as_deref(), Some("12-23,36-47"));
        assert!(t.numa_affinity.is_empty(), "no NUMA column");
        let t = smi_topo(
            "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\tNUMA Affinity\n\
             GPU0\t X \tSYS\tPIX\t0-7\tN/A\n\
             GPU1\tSYS\t X \tSYS\tN/A\tN/A\n\
             mlx5_0\tPIX\tSYS\t X \n",
        )
        .unwrap();
        assert_eq!(
            t.nics,
            vec![TopoNic {
                label: "mlx5_0".into(),
                device: None
            }]
        );
        assert_eq!(t.nic_links, vec![vec![Pix], vec![Sys]]);
        assert_eq!(t.cpu_affinity, vec![Some("0-7".to_string()), None]);
        assert!(t.numa_affinity.is_empty(), "all N/A");
        // Trimmed rows: the matrix is whole, the affinity cells are not there.
        let t = smi_topo("GPU0 GPU1 CPU Affinity NUMA Affinity\nGPU0 X NV4\nGPU1 NV4 X\n").unwrap();
        assert_eq!(t.links[0][1], NvLink(4));
        assert!(t.cpu_affinity.is_empty() && t.numa_affinity.is_empty());
        // An unknown NIC cell is as wrong as an unknown GPU cell.
        let e = smi_topo("\tGPU0\tNIC0\nGPU0\t X \tFOO\n").unwrap_err();
        assert!(e.contains("column NIC0"), "{e}");
    }

    /// Windows leaves both affinity cells empty: the GPU NUMA ID's `N/A` after them is not
    /// read as a CPU affinity.
    #[test]
    fn empty_tabbed_affinity_cells() {
        let t = smi_topo("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPHB\t\t1\t\tN/A\nGPU1\tPHB\t X \t\t1\t\tN/A\n")
            .unwrap();
        assert!(t.cpu_affinity.is_empty(), "{:?}", t.cpu_affinity);
        assert_eq!(t.numa_affinity, some(&["1", "1"]));
    }

    #[test]
    fn single_gpu_affinity() {
        let t = smi_topo(fixture!("nvidia-smi-topo-m/1x-l4-ansi-header.txt")).unwrap();
        assert_eq!(t.cpu_affinity, some(&["0-15"]));
        assert_eq!(t.numa_affinity, some(&["0"]));
    }

    #[test]
    fn no_matrix_is_an_error() {
        let e = smi_topo("ERROR: Option -m is missing its value. Please run 'nvidia-smi -h' for help.\n")
            .unwrap_err();
        assert!(e.contains("no GPU matrix"), "{e}");
        assert!(smi_topo("").is_err());
    }

    #[test]
    fn malformed_matrices_are_errors() {
        let e = smi_topo("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\n").unwrap_err();
        assert!(e.contains("GPU1 has a column"), "{e}");
        let e =
            smi_topo("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tFOO\t0-7\nGPU1\tFOO\t X \t0-7\n").unwrap_err();
        assert!(e.contains("unknown link `FOO`"), "{e}");
        let e = smi_topo("\tGPU0\tGPU1\tNIC0\nGPU0\t X \tSYS\nGPU1\tSYS\t X \tPIX\n").unwrap_err();
        assert!(e.contains("row GPU0 has 2 cells"), "{e}");
        let e = smi_topo("\tGPU0\tGPU1\nGPU0\tSYS\t X\nGPU1\t X\tSYS\n").unwrap_err();
        assert!(e.contains("diagonal"), "{e}");
    }

    #[test]
    fn header_without_leading_whitespace() {
        let t = smi_topo("GPU0 GPU1 CPU Affinity\nGPU0 X PHB 0-15\nGPU1 PHB X 0-15\n").unwrap();
        assert_eq!(t.links[0][1], Phb);
    }

    /// Escapes anywhere (an underlined header, a coloured cell) read as the plain matrix.
    #[test]
    fn ansi_stripping() {
        let plain = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-15\nGPU1\tNV18\t X \t0-15\n";
        let escaped = "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \t\x1b[1;32mNV18\x1b[0m\t0-15\nGPU1\t\x1b[1mNV18\x1b[0m\t X \t0-15\n";
        let (a, b) = (smi_topo(plain).unwrap(), smi_topo(escaped).unwrap());
        assert_eq!(
            a.links,
            vec![vec![SelfLink, NvLink(18)], vec![NvLink(18), SelfLink]]
        );
        assert_eq!(a.links, b.links);
        assert_eq!(a.gpus, b.gpus);
    }
}
