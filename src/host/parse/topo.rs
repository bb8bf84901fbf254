//! `nvidia-smi topo -m`: the GPU-to-GPU part of the connection matrix.
//!
//! The output is a header row of device labels (`GPU0 GPU1 ... NIC0 ... CPU Affinity NUMA
//! Affinity GPU NUMA ID`), one row per device, then a legend. Cells are separated by tabs
//! on a terminal but by spaces in many pastes, newer drivers underline the header with
//! ANSI escapes, NIC rows may be trimmed, and the legend may be missing. What is read:
//! the header's device labels (up to the first word that is not one, `CPU`), the rows
//! labelled `GPU<n>`, and of each row the cells under the `GPU<n>` columns. NIC rows and
//! columns, affinities and the legend are ignored.

use crate::host::types::{Link, Topology};

/// Parses the GPU x GPU matrix of `nvidia-smi topo -m`.
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

    let mut links: Vec<Option<Vec<Link>>> = vec![None; gpu_columns.len()];
    for words in &lines[header_at + 1..] {
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
        let row_links = gpu_columns
            .iter()
            .map(|(col, col_label)| {
                let cell = cells[*col];
                parse_link(cell)
                    .ok_or_else(|| format!("row {label}, column {col_label}: unknown link `{cell}`"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if links[row].is_none() {
            links[row] = Some(row_links);
        }
    }

    let mut matrix = Vec::with_capacity(links.len());
    for ((_, label), row) in gpu_columns.iter().zip(links) {
        matrix.push(row.ok_or_else(|| format!("{label} has a column in the matrix but no row"))?);
    }
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
    Ok(Topology {
        gpus: gpu_columns.iter().map(|(_, l)| l.to_string()).collect(),
        links: matrix,
        ..Topology::default()
    })
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
