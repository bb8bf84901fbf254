//! Offers as vendors list them, read from a TOML or CSV file, and their ranking: the ones
//! that fit first, then the ones a stack runs on, then by the estimated cost.
//!
//! Owns: the offers file's two formats and every message about a bad row (the row, the
//! field, what was expected), and the order of the ranking. Must not: read files (the
//! caller hands over the text), look GPU names up, or judge fit and stacks (the caller
//! does, with the estimate and the resolver).

use serde::{Deserialize, Serialize};

use crate::text::excerpt;

/// One offer as listed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// How the vendor names it, or the row (`row 3`).
    pub name: String,
    /// The GPU as the vendor writes it (`8x H100 SXM`, `A100 80G SXM4`).
    pub gpu: String,
    /// How many GPUs, when a column gives it (else the count in `gpu`, else 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// The driver as the vendor quotes it (`535`, `550.54.15`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The price of the whole offer per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// The interconnect as listed (`NVLink`, `PCIe`, `8x400G InfiniBand`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect: Option<String>,
    /// RAM as listed (`1TB`, `512 GB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<String>,
    /// Disk as listed (`8TB NVMe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
}

/// The columns of a CSV offers file, and the keys of a TOML `[[offer]]`.
pub const FIELDS: [&str; 8] = [
    "name",
    "gpu",
    "count",
    "driver",
    "price_per_hour",
    "interconnect",
    "ram",
    "disk",
];

/// Reads an offers file: TOML (`[[offer]]` tables) when `name` ends in `.toml`, CSV with a
/// header row otherwise. Every bad row is reported, naming the row and the field.
pub fn parse(name: &str, text: &str) -> Result<Vec<Offer>, Vec<String>> {
    let offers = if name.to_ascii_lowercase().ends_with(".toml") {
        parse_toml(name, text)?
    } else {
        parse_csv(name, text)?
    };
    if offers.is_empty() {
        return Err(vec![format!("offers `{name}`: no offer in it")]);
    }
    Ok(offers)
}

fn parse_toml(name: &str, text: &str) -> Result<Vec<Offer>, Vec<String>> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| {
        vec![format!(
            "offers `{name}`: not valid TOML: {}",
            excerpt(e.message())
        )]
    })?;
    let mut problems = Vec::new();
    for key in doc.keys().filter(|k| *k != "offer") {
        problems.push(format!(
            "offers `{name}`: unknown table `{}`; offers are `[[offer]]` tables",
            excerpt(key)
        ));
    }
    let rows = match doc.get("offer") {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a.clone(),
        Some(_) => {
            problems.push(format!("offers `{name}`: `offer` must be `[[offer]]` tables"));
            Vec::new()
        }
    };
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let at = format!("offers `{name}` offer {}", i + 1);
        let Some(t) = row.as_table() else {
            problems.push(format!("{at}: not a table"));
            continue;
        };
        let mut fields: Vec<(String, String)> = Vec::new();
        for (k, v) in t {
            if !FIELDS.contains(&k.as_str()) {
                problems.push(format!(
                    "{at}: unknown key `{}`; an offer has {}",
                    excerpt(k),
                    FIELDS.join(", ")
                ));
                continue;
            }
            let text = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(f) => f.to_string(),
                _ => {
                    problems.push(format!("{at}, key `{k}`: expected a string or a number"));
                    continue;
                }
            };
            fields.push((k.clone(), text));
        }
        match offer(&at, i + 1, &fields) {
            Ok(o) => out.push(o),
            Err(mut p) => problems.append(&mut p),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn parse_csv(name: &str, text: &str) -> Result<Vec<Offer>, Vec<String>> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let Some((_, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    let columns: Vec<String> = split_csv(header)
        .iter()
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let mut problems = Vec::new();
    for c in &columns {
        if !FIELDS.contains(&c.as_str()) {
            problems.push(format!(
                "offers `{name}` line 1: unknown column `{}`; the columns are {}",
                excerpt(c),
                FIELDS.join(", ")
            ));
        }
    }
    if !columns.iter().any(|c| c == "gpu") {
        problems.push(format!("offers `{name}` line 1: no `gpu` column"));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut out = Vec::new();
    for (row, (n, line)) in lines.enumerate() {
        let at = format!("offers `{name}` line {}", n + 1);
        let cells = split_csv(line);
        if cells.len() != columns.len() {
            problems.push(format!(
                "{at}: {} cells, the header names {} columns",
                cells.len(),
                columns.len()
            ));
            continue;
        }
        let fields: Vec<(String, String)> = columns.iter().cloned().zip(cells).collect();
        match offer(&at, row + 1, &fields) {
            Ok(o) => out.push(o),
            Err(mut p) => problems.append(&mut p),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// Splits a CSV line at commas outside double quotes; `""` inside quotes is a quote.
fn split_csv(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    cells.push(cell);
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

/// One offer from its fields; `row` names it when it has no name.
fn offer(at: &str, row: usize, fields: &[(String, String)]) -> Result<Offer, Vec<String>> {
    let mut o = Offer {
        name: format!("offer {row}"),
        ..Offer::default()
    };
    let mut problems = Vec::new();
    for (k, v) in fields {
        let v = v.trim();
        if v.is_empty() {
            continue;
        }
        match k.as_str() {
            "name" => o.name = v.to_string(),
            "gpu" => o.gpu = v.to_string(),
            "count" => match v.parse::<u32>() {
                Ok(n) if (1..=crate::model::MAX_GPU_COUNT).contains(&n) => o.count = Some(n),
                _ => problems.push(format!(
                    "{at}, field `count`: `{}` is not a number of GPUs from 1 to {}",
                    excerpt(v),
                    crate::model::MAX_GPU_COUNT
                )),
            },
            "driver" => o.driver = Some(v.to_string()),
            "price_per_hour" => {
                let p = v.trim_start_matches('$').replace(',', "");
                match p.parse::<f64>() {
                    Ok(x) if x.is_finite() && x >= 0.0 => o.price_per_hour = Some(x),
                    _ => problems.push(format!(
                        "{at}, field `price_per_hour`: `{}` is not a price (a number, the whole offer per hour)",
                        excerpt(v)
                    )),
                }
            }
            "interconnect" => o.interconnect = Some(v.to_string()),
            "ram" => o.ram = Some(v.to_string()),
            "disk" => o.disk = Some(v.to_string()),
            _ => {}
        }
    }
    if o.gpu.is_empty() {
        problems.push(format!("{at}: no GPU (field `gpu`): an offer names its GPU"));
    }
    if problems.is_empty() { Ok(o) } else { Err(problems) }
}

/// What the listing says of the links: NVLink (or an NVSwitch/SXM board), and RDMA.
pub fn listed_links(interconnect: Option<&str>) -> (Option<bool>, Option<bool>) {
    let Some(t) = interconnect.map(str::to_ascii_lowercase) else {
        return (None, None);
    };
    let nvlink = ["nvlink", "nvswitch", "sxm"].iter().any(|w| t.contains(w));
    let pcie_only = t.contains("pcie") && !nvlink;
    let rdma = ["infiniband", "roce", "rdma", " ib", "ib "]
        .iter()
        .any(|w| t.contains(w))
        || t == "ib";
    (
        if nvlink {
            Some(true)
        } else if pcie_only {
            Some(false)
        } else {
            None
        },
        Some(rdma),
    )
}

/// An offer judged: the fit, whether a stack runs, the cost, and why it falls short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedOffer {
    /// The offer as listed.
    pub offer: Offer,
    /// The GPU record it resolved to, when its name did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// GPUs in it.
    pub count: u32,
    /// The estimate fits on its GPUs.
    pub fits: bool,
    /// Memory left per GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<i64>,
    /// A stack runs on it (its GPUs and driver).
    pub stack_runs: bool,
    /// The stack the resolver found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<super::types::FitStack>,
    /// Hours of the run, when tokens were given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<f64>,
    /// The run's cost, when its hours and the price are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Why it falls short, each reason a sentence; empty when it does not.
    pub reasons: Vec<String>,
}

/// Ranks judged offers: those that fit before those that do not, then those a stack runs
/// on (natively before conditionally), then those that fall short in nothing else (links, RAM, disk), then the cheapest
/// run (an unknown cost after a known one), then the cheapest hour.
pub fn rank(offers: &mut [RankedOffer]) {
    let key = |o: &RankedOffer| {
        (
            !o.fits,
            !o.stack_runs,
            // A stack that runs only under a condition (minor-version compatibility, PTX
            // JIT) after one that runs natively.
            o.stack.as_ref().is_some_and(|s| s.status == "conditional"),
            !o.reasons.is_empty(),
            o.cost.is_none(),
            o.cost.unwrap_or(f64::MAX),
            o.offer.price_per_hour.unwrap_or(f64::MAX),
        )
    };
    offers.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap_or(std::cmp::Ordering::Equal));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_csv_read_alike() {
        let t = parse(
            "offers.toml",
            "[[offer]]\nname = \"A\"\ngpu = \"8x H100 SXM\"\ndriver = \"535\"\nprice_per_hour = 19.9\ninterconnect = \"NVLink, 8x400G IB\"\nram = \"2TB\"\n\n[[offer]]\ngpu = \"A100 80G SXM4\"\ncount = 4\n",
        )
        .unwrap();
        let c = parse(
            "offers.csv",
            "name,gpu,count,driver,price_per_hour,interconnect,ram,disk\nA,8x H100 SXM,,535,$19.90,\"NVLink, 8x400G IB\",2TB,\n,A100 80G SXM4,4,,,,,\n",
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].gpu, c[0].gpu);
        assert_eq!(t[0].price_per_hour, c[0].price_per_hour);
        assert_eq!(t[0].interconnect, c[0].interconnect);
        assert_eq!(t[1].count, Some(4));
        assert_eq!(c[1].name, "offer 2");
        assert_eq!(
            listed_links(t[0].interconnect.as_deref()),
            (Some(true), Some(true))
        );
        assert_eq!(listed_links(Some("PCIe 4.0")), (Some(false), Some(false)));
        assert_eq!(listed_links(None), (None, None));
    }

    #[test]
    fn bad_rows_name_the_row_and_the_field() {
        let e = parse(
            "o.csv",
            "gpu,count,price_per_hour\nH100,eight,2\n,1,2\nA100,1,cheap\n",
        )
        .unwrap_err();
        assert_eq!(
            e,
            [
                "offers `o.csv` line 2, field `count`: `eight` is not a number of GPUs from 1 to 1024",
                "offers `o.csv` line 3: no GPU (field `gpu`): an offer names its GPU",
                "offers `o.csv` line 4, field `price_per_hour`: `cheap` is not a price (a number, the whole offer per hour)",
            ]
        );
        let e = parse("o.csv", "count,price\n1,2\n").unwrap_err();
        assert!(e[0].contains("unknown column `price`"), "{e:?}");
        assert!(e[1].contains("no `gpu` column"), "{e:?}");
        let e = parse("o.toml", "[[offer]]\ncount = 8\ncolour = \"red\"\n").unwrap_err();
        assert!(
            e[0].starts_with("offers `o.toml` offer 1: unknown key `colour`"),
            "{e:?}"
        );
        assert!(e[1].contains("no GPU (field `gpu`)"), "{e:?}");
        assert_eq!(
            parse("o.csv", "gpu\n").unwrap_err(),
            ["offers `o.csv`: no offer in it"]
        );
        assert!(parse("o.toml", "offer = [").is_err());
    }

    #[test]
    fn ranking_fits_then_stack_then_cost() {
        let o = |name: &str, fits: bool, runs: bool, cost: Option<f64>| RankedOffer {
            offer: Offer {
                name: name.into(),
                ..Offer::default()
            },
            gpu: None,
            count: 1,
            fits,
            headroom_bytes: None,
            stack_runs: runs,
            stack: None,
            hours: None,
            cost,
            reasons: Vec::new(),
        };
        let mut v = vec![
            o("nofit", false, true, Some(1.0)),
            o("nostack", true, false, Some(1.0)),
            o("dear", true, true, Some(100.0)),
            o("unknown", true, true, None),
            o("cheap", true, true, Some(10.0)),
        ];
        rank(&mut v);
        let names: Vec<&str> = v.iter().map(|o| o.offer.name.as_str()).collect();
        assert_eq!(names, ["cheap", "dear", "unknown", "nostack", "nofit"]);
    }
}
