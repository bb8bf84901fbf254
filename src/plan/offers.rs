//! Offers as vendors list them, read from a TOML or CSV file, and their ranking: the ones
//! that fit first, then the ones a stack runs on, then by the estimated cost.
//!
//! Owns: the offers file's two formats and every message about a bad row (the row, the
//! field, what was expected), and the order of the ranking. Must not: read files (the
//! caller hands over the text), look GPU names up, or judge fit and stacks (the caller
//! does, with the estimate and the resolver).

use serde::{Deserialize, Serialize};

use crate::text::excerpt;

/// A currency a price is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Currency {
    /// Chinese yuan (`¥`, `元`, `CNY`, `RMB`).
    #[serde(rename = "CNY")]
    Cny,
    /// US dollar (`$`, `USD`).
    #[serde(rename = "USD")]
    Usd,
    /// Euro (`€`, `EUR`).
    #[serde(rename = "EUR")]
    Eur,
}

impl Currency {
    /// The ISO 4217 code, as costs print it (`CNY 1234.50`).
    pub fn code(self) -> &'static str {
        match self {
            Currency::Cny => "CNY",
            Currency::Usd => "USD",
            Currency::Eur => "EUR",
        }
    }

    /// The currency a word or sign names, in any case (`¥`, `元`, `rmb`, `US$`).
    pub fn from_word(word: &str) -> Option<Currency> {
        match word.trim().to_lowercase().as_str() {
            "¥" | "￥" | "元" | "cny" | "rmb" | "人民币" => Some(Currency::Cny),
            "$" | "usd" | "us$" => Some(Currency::Usd),
            "€" | "eur" => Some(Currency::Eur),
            _ => None,
        }
    }
}

impl std::fmt::Display for Currency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// What a price per hour buys: one GPU of the offer, or the whole machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PriceUnit {
    /// One GPU for an hour (`/GPU/hr`, `/卡时`).
    GpuHour,
    /// The whole offer, every GPU of it, for an hour (`/台/时`, `/node/hr`).
    MachineHour,
}

impl PriceUnit {
    /// As the offers file and the report write it.
    pub fn word(self) -> &'static str {
        match self {
            PriceUnit::GpuHour => "gpu-hour",
            PriceUnit::MachineHour => "machine-hour",
        }
    }

    /// As a cost line writes it (`/GPU-hour`).
    pub fn per(self) -> &'static str {
        match self {
            PriceUnit::GpuHour => "/GPU-hour",
            PriceUnit::MachineHour => "/machine-hour",
        }
    }
}

/// One offer as listed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// How the vendor names it, or the row (`row 3`).
    pub name: String,
    /// The GPU as the vendor writes it (`8x H100 SXM`, `A100 80G SXM4`, `8卡 A800`).
    pub gpu: String,
    /// How many GPUs, when a column gives it (else the count in `gpu`, else 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// The driver as the vendor quotes it (`535`, `550.54.15`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The price's number, as listed: per [`Offer::price_unit`] when the listing says, else
    /// per hour of the whole offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// The price's currency: the `currency` field, or the sign or word in the price
    /// (`¥`, `元`, `CNY`, `$`); `None` when neither says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<Currency>,
    /// What the price buys: the `price_unit` field, or the price's own unit (`/卡时`,
    /// `/台/时`, `/GPU/hr`); `None` when it says only "per hour".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_unit: Option<PriceUnit>,
    /// The interconnect as listed (`NVLink`, `PCIe`, `8x400G InfiniBand`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect: Option<String>,
    /// RAM as listed (`1TB`, `512 GB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<String>,
    /// Disk as listed (`8TB NVMe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// CPUs as listed, a count (`128`, `128 vCPU`, `96核`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
}

/// The columns of a CSV offers file, and the keys of a TOML `[[offer]]`.
pub const FIELDS: [&str; 11] = [
    "name",
    "gpu",
    "count",
    "driver",
    "price_per_hour",
    "currency",
    "price_unit",
    "interconnect",
    "ram",
    "disk",
    "cpus",
];

/// What a price reads as: the number, and the currency and unit its text names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriceText {
    /// The number.
    pub amount: f64,
    /// The currency its sign or word names.
    pub currency: Option<Currency>,
    /// The unit after the slash (`/卡时`, `/台/时`, `/GPU/hr`); `None` for a bare hour.
    pub unit: Option<PriceUnit>,
}

/// What one word of a price's unit names.
#[derive(Clone, Copy, PartialEq)]
enum UnitWord {
    Gpu,
    Machine,
    Hour,
}

fn unit_words(token: &str) -> Option<&'static [UnitWord]> {
    use UnitWord::*;
    Some(match token {
        "卡时" | "卡小时" => &[Gpu, Hour],
        "台时" | "台小时" | "机时" => &[Machine, Hour],
        "卡" | "gpu" | "gpus" | "card" => &[Gpu],
        "台" | "机" | "整机" | "machine" | "node" | "server" | "instance" | "box" => &[Machine],
        "时" | "小时" | "h" | "hr" | "hrs" | "hour" | "hours" => &[Hour],
        "gpuhr" | "gpuh" | "gpuhour" => &[Gpu, Hour],
        _ => return None,
    })
}

/// Reads a price as listings write it: a number with a currency sign or word before or
/// after it, and a unit after a slash or `per`: `¥1.98/卡时`, `12.5元/小时`, `98 元/台/时`,
/// `$2.49/GPU/hr`, `$19.92/hr`, `CNY 98`, `2.40`.
pub fn read_price(text: &str) -> Result<PriceText, String> {
    const EXPECTED: &str = "expected a number with an optional currency (¥, 元, CNY, RMB, $, USD, €) and unit \
                            (/GPU/hr, /卡时, /台/时, /hr)";
    let t = text.trim();
    let start = t
        .find(|c: char| c.is_ascii_digit())
        .ok_or_else(|| EXPECTED.to_string())?;
    let digits_len = t[start..]
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .unwrap_or(t.len() - start);
    let number = &t[start..start + digits_len];
    let amount = number
        .replace(',', "")
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| EXPECTED.to_string())?;
    let mut currency = None;
    let mut name = |word: &str| -> Result<(), String> {
        match Currency::from_word(word) {
            Some(c) if currency.is_none_or(|d| d == c) => {
                currency = Some(c);
                Ok(())
            }
            Some(c) => Err(format!("it names two currencies ({} and {c})", currency.unwrap())),
            None => Err(EXPECTED.to_string()),
        }
    };
    let before = t[..start].trim();
    if !before.is_empty() {
        name(before)?;
    }
    let mut after = t[start + digits_len..].trim().to_lowercase();
    // A currency word right after the number (`12.5元/小时`, `98 CNY/hr`).
    if let Some(i) = after.find(['/']) {
        let word = after[..i].trim().to_string();
        if !word.is_empty() {
            name(&word)?;
        }
        after = after[i..].to_string();
    } else if let Some(rest) = after.strip_prefix("per ") {
        after = format!("/{rest}");
    } else {
        let word = after.trim().to_string();
        let (cur, unit) = match word.split_once(" per ") {
            Some((c, u)) => (c.trim().to_string(), format!("/{u}")),
            None => (word, String::new()),
        };
        if !cur.is_empty() {
            name(&cur)?;
        }
        after = unit;
    }
    let mut words: Vec<UnitWord> = Vec::new();
    for token in after
        .split(['/', ' ', '-', '·', '_'])
        .map(str::trim)
        .filter(|w| !w.is_empty() && *w != "per")
    {
        words.extend_from_slice(unit_words(token).ok_or_else(|| EXPECTED.to_string())?);
    }
    let hours = words.iter().filter(|w| **w == UnitWord::Hour).count();
    let gpu = words.contains(&UnitWord::Gpu);
    let machine = words.contains(&UnitWord::Machine);
    if !words.is_empty() && hours != 1 || gpu && machine {
        return Err(format!(
            "its unit is not per hour of one GPU or of the machine; {EXPECTED}"
        ));
    }
    Ok(PriceText {
        amount,
        currency,
        unit: if gpu {
            Some(PriceUnit::GpuHour)
        } else if machine {
            Some(PriceUnit::MachineHour)
        } else {
            None
        },
    })
}

/// A CPU count as listings write it: `128`, `128 vCPU`, `96 cores`, `96核`.
fn read_cpus(text: &str) -> Option<u32> {
    let t = text.trim();
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    let rest = t[digits..].trim().to_lowercase();
    let known = [
        "", "vcpu", "vcpus", "cpu", "cpus", "core", "cores", "thread", "threads", "核", "线程", "vcpu核",
    ];
    if digits == 0 || !known.contains(&rest.as_str()) {
        return None;
    }
    t[..digits].parse::<u32>().ok().filter(|n| *n > 0)
}

/// Reads an offers file: TOML (`[[offer]]` tables) when `name` ends in `.toml`, CSV with a
/// header row otherwise. Every bad row is reported, naming the row and the field.
pub fn parse(name: &str, text: &str) -> Result<Vec<Offer>, Vec<String>> {
    // Excel's "CSV UTF-8" starts with a byte-order mark, which would make the first
    // column `\u{feff}name`, unknown and invisible in the message.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
    let (mut price_text, mut currency, mut unit) = (None, None, None);
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
            "price_per_hour" => match read_price(v) {
                Ok(p) => {
                    o.price_per_hour = Some(p.amount);
                    price_text = Some(p);
                }
                Err(e) => problems.push(format!(
                    "{at}, field `price_per_hour`: `{}` is not a price: {e}",
                    excerpt(v)
                )),
            },
            "currency" => match Currency::from_word(v) {
                Some(c) => currency = Some(c),
                None => problems.push(format!(
                    "{at}, field `currency`: `{}` is not a currency gpuenv reads (CNY, RMB, 元, ¥, USD, $, EUR, €)",
                    excerpt(v)
                )),
            },
            "price_unit" => match v.to_ascii_lowercase().as_str() {
                "gpu-hour" => unit = Some(PriceUnit::GpuHour),
                "machine-hour" => unit = Some(PriceUnit::MachineHour),
                _ => problems.push(format!(
                    "{at}, field `price_unit`: `{}` is not `gpu-hour` or `machine-hour`",
                    excerpt(v)
                )),
            },
            "interconnect" => o.interconnect = Some(v.to_string()),
            "ram" => o.ram = Some(v.to_string()),
            "disk" => o.disk = Some(v.to_string()),
            "cpus" => match read_cpus(v) {
                Some(n) => o.cpus = Some(n),
                None => problems.push(format!(
                    "{at}, field `cpus`: `{}` is not a count of CPUs (`128`, `128 vCPU`, `96核`)",
                    excerpt(v)
                )),
            },
            _ => {}
        }
    }
    // The price's own text and the fields must agree; either may give the currency and
    // the unit.
    let listed = price_text.and_then(|p| p.currency);
    match (listed, currency) {
        (Some(a), Some(b)) if a != b => problems.push(format!(
            "{at}: the price is in {a}, the field `currency` says {b}"
        )),
        _ => o.currency = currency.or(listed),
    }
    let listed = price_text.and_then(|p| p.unit);
    match (listed, unit) {
        (Some(a), Some(b)) if a != b => problems.push(format!(
            "{at}: the price is per {}, the field `price_unit` says {}",
            a.word(),
            b.word()
        )),
        _ => o.price_unit = unit.or(listed),
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
    /// Memory per GPU it was judged at, GiB: the record's, unless the listing names another
    /// size NVIDIA sells for that GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<f64>,
    /// The estimate fits on its GPUs.
    pub fits: bool,
    /// How the model states split over its GPUs at its count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::types::Shard>,
    /// Memory left per GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<i64>,
    /// A stack runs on it (its GPUs and driver).
    pub stack_runs: bool,
    /// The stack the resolver found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<super::types::FitStack>,
    /// Every GPU pair is joined by NVLink, as judged from the GPU record and the listing
    /// (a listing cannot give NVLink to a GPU that has none); `None` for one GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<bool>,
    /// When the model is split over GPUs that PCIe joins: the parallelism that suits those
    /// links and the slowdown, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<String>,
    /// Hours of the run, when tokens were given and the GPU's compute is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<f64>,
    /// Tokens were given but compat-db has no TFLOPS figure for its GPU: the run's hours
    /// and cost are unknown, and it ranks after the offers whose cost is known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unranked_on_time: bool,
    /// RAM as listed, GiB (`1TB` is 1024 GiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_gib: Option<f64>,
    /// Disk as listed, GB (decimal, as disks are sold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_gb: Option<f64>,
    /// The price's currency, when the listing says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<Currency>,
    /// The whole offer for an hour, in [`RankedOffer::currency`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_machine_hour: Option<f64>,
    /// One of its GPUs for an hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_gpu_hour: Option<f64>,
    /// The unit the listed price was read in: the listing's, else assumed (a note says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_unit: Option<PriceUnit>,
    /// The run's cost, hours x the price per machine-hour, in [`RankedOffer::currency`],
    /// when its hours and the price are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// What the listing claims that compat-db contradicts, what was assumed in reading it,
    /// and what its links mean for the run, each a sentence. None of them disqualifies it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Why it falls short, each reason a sentence; empty when it does not.
    pub reasons: Vec<String>,
}

impl RankedOffer {
    /// An offer not judged yet: nothing known of it but the listing.
    pub fn listed(offer: &Offer) -> RankedOffer {
        RankedOffer {
            offer: offer.clone(),
            gpu: None,
            count: offer.count.unwrap_or(1),
            memory_gib: None,
            fits: false,
            shard: None,
            headroom_bytes: None,
            stack_runs: false,
            stack: None,
            nvlink: None,
            parallelism: None,
            hours: None,
            unranked_on_time: false,
            ram_gib: None,
            disk_gb: None,
            currency: offer.currency,
            price_per_machine_hour: None,
            price_per_gpu_hour: None,
            price_unit: None,
            cost: None,
            notes: Vec::new(),
            reasons: Vec::new(),
        }
    }

    /// Prices it at `count` GPUs and `hours`: the price per machine-hour and per GPU-hour
    /// from the listed one, and the run's cost. A price that says only "per hour" is read
    /// as the whole offer's (the `price_per_hour` column's meaning), and for several GPUs a
    /// note says so.
    pub fn price(&mut self, count: u32, hours: Option<f64>) {
        let Some(p) = self.offer.price_per_hour else {
            return;
        };
        let n = f64::from(count.max(1));
        let unit = match self.offer.price_unit {
            Some(u) => u,
            None => {
                if count > 1 {
                    self.notes.push(format!(
                        "its price {} says only \"per hour\": read as the whole offer's ({count} GPUs) per hour, \
                         {} per GPU-hour; say `/卡时` or `/GPU/hr` in the price, or `price_unit = gpu-hour`, if \
                         it is per GPU",
                        money(self.currency, p),
                        money(self.currency, super::fit::cents(p / n))
                    ));
                }
                PriceUnit::MachineHour
            }
        };
        let machine = match unit {
            PriceUnit::GpuHour => p * n,
            PriceUnit::MachineHour => p,
        };
        self.price_unit = Some(unit);
        self.price_per_machine_hour = Some(super::fit::cents(machine));
        self.price_per_gpu_hour = Some(super::fit::cents(machine / n));
        self.cost = hours.map(|h| super::fit::cents(h * machine));
    }
}

/// An amount with its currency (`CNY 1234.50`), or bare when the currency is unknown.
pub fn money(currency: Option<Currency>, amount: f64) -> String {
    match currency {
        Some(c) => format!("{c} {amount:.2}"),
        None => format!("{amount:.2}"),
    }
}

/// The currencies the offers' prices are in, in the order of the ranking, `None` standing
/// for a price whose currency the listing does not say. More than one: their costs are
/// ranked within each, not across.
pub fn currencies(offers: &[RankedOffer]) -> Vec<Option<Currency>> {
    let mut out: Vec<Option<Currency>> = Vec::new();
    for o in offers.iter().filter(|o| o.offer.price_per_hour.is_some()) {
        if !out.contains(&o.currency) {
            out.push(o.currency);
        }
    }
    out
}

/// The sentence that says the offers' costs are in several currencies, when they are.
pub fn currencies_note(offers: &[RankedOffer]) -> Option<String> {
    let all = currencies(offers);
    (all.len() > 1).then(|| {
        let names: Vec<&str> = all
            .iter()
            .map(|c| c.map_or("an unnamed currency", Currency::code))
            .collect();
        format!(
            "the offers are priced in {}: costs are ranked within each currency, never across (gpuenv knows no \
             exchange rate)",
            names.join(", ")
        )
    })
}

/// Ranks judged offers: those that fit before those that do not, then those a stack runs
/// on (natively before conditionally), then those that fall short in nothing else (RDMA,
/// RAM, disk, CPUs), then by currency (in the order the file first names each: costs in
/// two currencies are never compared), then those whose run's cost is known before those
/// unranked on time or unpriced, then those whose GPUs are linked as the run wants before
/// those that split the model over PCIe (whose time leaves that traffic out), then the
/// cheapest run, then the cheapest machine-hour.
pub fn rank(offers: &mut [RankedOffer]) {
    let mut order: Vec<Option<Currency>> = Vec::new();
    for o in offers.iter().filter(|o| o.offer.price_per_hour.is_some()) {
        if !order.contains(&o.currency) {
            order.push(o.currency);
        }
    }
    let group = |o: &RankedOffer| {
        if o.offer.price_per_hour.is_none() {
            order.len()
        } else {
            order.iter().position(|c| *c == o.currency).unwrap_or(order.len())
        }
    };
    let key = |o: &RankedOffer| {
        (
            !o.fits,
            !o.stack_runs,
            // A stack that runs only under a condition (minor-version compatibility, PTX
            // JIT) after one that runs natively.
            o.stack.as_ref().is_some_and(|s| s.status == "conditional"),
            !o.reasons.is_empty(),
            group(o),
            o.cost.is_none(),
            o.parallelism.is_some(),
            o.cost.unwrap_or(f64::MAX),
            o.price_per_machine_hour.unwrap_or(f64::MAX),
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
                "offers `o.csv` line 4, field `price_per_hour`: `cheap` is not a price: expected a number with an \
                 optional currency (¥, 元, CNY, RMB, $, USD, €) and unit (/GPU/hr, /卡时, /台/时, /hr)",
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
        let o = |name: &str, fits: bool, runs: bool, cost: Option<f64>| {
            let mut r = RankedOffer::listed(&Offer {
                name: name.into(),
                ..Offer::default()
            });
            r.fits = fits;
            r.stack_runs = runs;
            r.cost = cost;
            r
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

    /// A CSV saved by Excel as "CSV UTF-8": a byte-order mark and CRLF line ends.
    #[test]
    fn an_excel_csv_reads_as_written() {
        let offers = parse(
            "offers.csv",
            "\u{feff}name,gpu,count,price_per_hour\r\nA,4090,8,¥14.4/卡时\r\nB,A800 80G,8,40元/时\r\n",
        )
        .unwrap();
        assert_eq!(offers.len(), 2);
        assert_eq!(offers[0].name, "A");
        assert_eq!(offers[0].currency, Some(Currency::Cny));
        assert_eq!(offers[0].price_unit, Some(PriceUnit::GpuHour));
        assert_eq!(offers[1].gpu, "A800 80G");
    }

    /// Prices as Chinese and western listings write them.
    #[test]
    fn prices_read_their_currency_and_unit() {
        use Currency::*;
        use PriceUnit::*;
        for (text, amount, currency, unit) in [
            ("¥1.98/卡时", 1.98, Some(Cny), Some(GpuHour)),
            ("12.5元/小时", 12.5, Some(Cny), None),
            ("98 元/台/时", 98.0, Some(Cny), Some(MachineHour)),
            ("￥1,280/台/小时", 1280.0, Some(Cny), Some(MachineHour)),
            ("CNY 98", 98.0, Some(Cny), None),
            ("98 RMB/机时", 98.0, Some(Cny), Some(MachineHour)),
            ("$2.49/GPU/hr", 2.49, Some(Usd), Some(GpuHour)),
            ("$19.92/hr", 19.92, Some(Usd), None),
            ("2.49 USD per GPU-hour", 2.49, Some(Usd), Some(GpuHour)),
            ("US$ 20 / node / hour", 20.0, Some(Usd), Some(MachineHour)),
            ("€3/GPU·h", 3.0, Some(Eur), Some(GpuHour)),
            ("2.40", 2.4, None, None),
        ] {
            assert_eq!(
                read_price(text),
                Ok(PriceText {
                    amount,
                    currency,
                    unit
                }),
                "{text}"
            );
        }
        for bad in [
            "cheap",
            "¥-1/卡时",
            "$2/GPU",
            "¥2/卡/台/时",
            "$2/hr/hr",
            "2 dollars",
            "¥2 USD/hr",
            "2.4.1",
        ] {
            assert!(read_price(bad).is_err(), "{bad}");
        }
        assert!(
            read_price("¥2 USD/hr")
                .unwrap_err()
                .contains("two currencies (CNY and USD)")
        );
    }

    /// The currency and unit fields, and the price's own, agree or the row is refused.
    #[test]
    fn currency_and_unit_fields_agree_with_the_price() {
        let o = parse(
            "o.csv",
            "gpu,price_per_hour,currency,price_unit,cpus\n8x H800,120,CNY,machine-hour,192 vCPU\n8x H800,¥15/卡时,,,96核\n",
        )
        .unwrap();
        assert_eq!(
            (o[0].currency, o[0].price_unit, o[0].cpus),
            (Some(Currency::Cny), Some(PriceUnit::MachineHour), Some(192))
        );
        assert_eq!(
            (o[1].currency, o[1].price_unit, o[1].cpus),
            (Some(Currency::Cny), Some(PriceUnit::GpuHour), Some(96))
        );
        let e = parse(
            "o.csv",
            "gpu,price_per_hour,currency,price_unit,cpus\nH800,¥15/卡时,USD,,\nH800,¥15/卡时,,machine-hour,\nH800,1,yen,hourly,many\n",
        )
        .unwrap_err();
        assert_eq!(
            e,
            [
                "offers `o.csv` line 2: the price is in CNY, the field `currency` says USD",
                "offers `o.csv` line 3: the price is per gpu-hour, the field `price_unit` says machine-hour",
                "offers `o.csv` line 4, field `currency`: `yen` is not a currency gpuenv reads (CNY, RMB, 元, ¥, USD, $, EUR, €)",
                "offers `o.csv` line 4, field `price_unit`: `hourly` is not `gpu-hour` or `machine-hour`",
                "offers `o.csv` line 4, field `cpus`: `many` is not a count of CPUs (`128`, `128 vCPU`, `96核`)",
            ]
        );
    }

    /// Per GPU-hour is multiplied by the GPUs; a bare hour is the machine's, and said so
    /// when the offer has several GPUs.
    #[test]
    fn prices_per_machine_and_per_gpu() {
        let offer = |price: &str| {
            parse("o.csv", &format!("gpu,price_per_hour\n8x H100,{price}\n")).unwrap()[0].clone()
        };
        let mut r = RankedOffer::listed(&offer("¥1.98/卡时"));
        r.price(8, Some(10.0));
        assert_eq!(
            (r.price_per_machine_hour, r.price_per_gpu_hour, r.cost),
            (Some(15.84), Some(1.98), Some(158.4))
        );
        assert_eq!(r.price_unit, Some(PriceUnit::GpuHour));
        assert!(r.notes.is_empty());
        let mut r = RankedOffer::listed(&offer("$19.92/hr"));
        r.price(8, None);
        assert_eq!(
            (r.price_per_machine_hour, r.price_per_gpu_hour, r.cost),
            (Some(19.92), Some(2.49), None)
        );
        assert_eq!(r.price_unit, Some(PriceUnit::MachineHour));
        assert!(r.notes[0].contains("says only \"per hour\""), "{:?}", r.notes);
        assert!(r.notes[0].contains("USD 2.49 per GPU-hour"), "{:?}", r.notes);
        // One GPU: per GPU and per machine are one, nothing to assume.
        let mut r = RankedOffer::listed(&offer("$2/hr"));
        r.price(1, Some(3.0));
        assert_eq!(r.cost, Some(6.0));
        assert!(r.notes.is_empty());
        assert_eq!(money(Some(Currency::Cny), 1234.5), "CNY 1234.50");
        assert_eq!(money(None, 2.0), "2.00");
    }

    /// Within a currency by the run's cost; the unranked on time after the costed, by price
    /// per machine-hour; a split over PCIe after a costed run linked as it wants; currencies
    /// in the order the file names them, never compared.
    #[test]
    fn ranking_by_cost_within_a_currency() {
        let o = |name: &str, currency: Option<Currency>, cost: Option<f64>, hour: f64| {
            let mut r = RankedOffer::listed(&Offer {
                name: name.into(),
                price_per_hour: Some(hour),
                currency,
                ..Offer::default()
            });
            r.fits = true;
            r.stack_runs = true;
            r.cost = cost;
            r.unranked_on_time = cost.is_none();
            r.price_per_machine_hour = Some(hour);
            r
        };
        let cny = Some(Currency::Cny);
        let usd = Some(Currency::Usd);
        let mut pcie = o("pcie", cny, Some(10.0), 1.0);
        pcie.parallelism = Some("PCIe".into());
        let mut v = vec![
            o("usd-cheap", usd, Some(1.0), 1.0),
            o("h20", cny, Some(350.0), 62.0),
            o("a800", cny, None, 98.0),
            pcie,
            o("h800", cny, Some(100.0), 120.0),
            o("h20-no-time", cny, None, 62.0),
        ];
        // The file names USD first here.
        rank(&mut v);
        let names: Vec<&str> = v.iter().map(|o| o.offer.name.as_str()).collect();
        assert_eq!(names, ["usd-cheap", "h800", "h20", "pcie", "h20-no-time", "a800"]);
        assert_eq!(currencies(&v), [usd, cny]);
        let note = currencies_note(&v).unwrap();
        assert!(
            note.contains("USD, CNY") && note.contains("never across"),
            "{note}"
        );
        v.retain(|o| o.currency == cny);
        assert_eq!(currencies_note(&v), None);
    }
}
