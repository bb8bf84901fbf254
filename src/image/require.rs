//! `NVIDIA_REQUIRE_*`: will the NVIDIA runtime agree to start this image on that host?
//!
//! Owns: collecting an image's requirements from its environment the way NVIDIA Container
//! Toolkit's hook does, and evaluating them the way libnvidia-container does, quirks
//! included, so that the answer matches what `docker run --gpus` would do. Must not:
//! decide whether the stack then works (a satisfied requirement only means the container
//! starts; whether torch runs is the resolver's question).
//!
//! Sources, read in NVIDIA's code (NVIDIA/libnvidia-container `src/cli/dsl.c` and
//! `src/cli/configure.c`; NVIDIA/nvidia-container-toolkit `internal/config/image/
//! cuda_image.go` and `builder.go`):
//! - Every variable named `NVIDIA_REQUIRE_*` except `NVIDIA_REQUIRE_JETPACK*` is one
//!   requirement; all must hold (AND). The environment is a map: a later definition of a
//!   variable replaces an earlier one.
//! - `NVIDIA_DISABLE_REQUIRE` set to a value Go's `strconv.ParseBool` reads as true (`1`,
//!   `t`, `T`, `true`, `TRUE`, `True`) turns the check off.
//! - A "legacy" image (`CUDA_VERSION` set, `NVIDIA_REQUIRE_CUDA` unset or empty) gets
//!   `cuda>=MAJOR.MINOR` from `CUDA_VERSION` (read as a semver, `v` optional); an
//!   unreadable `CUDA_VERSION` makes the hook fail.
//! - In an expression, a space separates alternatives (OR) and a comma separates
//!   conditions (AND); empty pieces are skipped. Evaluation is lazy: alternatives are
//!   tried left to right and the first one whose conditions all hold wins; within one,
//!   the first false condition ends it. A malformed condition is only an error when it is
//!   reached ("invalid expression"), exactly as in C.
//! - A condition is `NAME OP VALUE`: NAME (case-insensitive) is `cuda` (the driver's CUDA
//!   version, as `cuDriverGetVersion` gives it: `12.2`), `driver` (the kernel module's
//!   version: `535.104.05`), `arch` (the GPU's compute capability: `8.6`) or `brand` (the
//!   GPU's brand: `tesla`, `geforce`...). OP is the longest run of `<>=!` characters,
//!   taken as the first of `=`, `!=`, `<`, `<=`, `>`, `>=` it is a prefix of: so `==` is
//!   invalid, and a lone `!` means `!=`. Versions hold only digits and dots and compare
//!   number by number, trailing zeros ignored (`12.0` = `12`); brands compare as
//!   case-insensitive strings with `=` and `!=` only.
//! - Unknown host facts pass: no driver CUDA version, no driver version, no visible GPU
//!   (then `arch` and `brand` are not checked), no brand.
//! - With GPUs visible, every requirement is evaluated once per GPU; any failure refuses
//!   the container. A condition whose echo (`name op value`) reaches 128 characters is an
//!   invalid expression when it is false (a buffer limit in C).
//! - The error names only the first alternative of the failing requirement:
//!   `unsatisfied condition: cuda>=12.4, please update your driver to a newer version, or
//!   use an earlier cuda container` (that suffix only when the alternative starts with
//!   `cuda>=`). [`RequireCheck::failing`] lists what the message hides: the false
//!   condition of every alternative tried.
//!
//! The CDI and CSV modes of nvidia-container-runtime evaluate requirements in Go instead
//! (`internal/requirements`): unknown properties are skipped there rather than invalid,
//! and versions compare as semver. This module follows libnvidia-container, which the
//! default (legacy) mode of every toolkit release uses.

use serde::{Deserialize, Serialize};

use crate::model::{ComputeCapability, CudaVersion, DriverVersion};

/// One GPU as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GpuTarget {
    /// Its compute capability (`arch`); `None` if unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<ComputeCapability>,
    /// Its brand as libnvidia-container names it (`tesla`, `geforcertx`; see
    /// [`normalize_brand`]); `None` if unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand: Option<String>,
}

/// The host a container would start on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostTarget {
    /// The driver's CUDA version (`nvidia-smi`'s "CUDA Version": `12.2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaVersion>,
    /// The driver version (`535.104.05`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverVersion>,
    /// The visible GPUs.
    pub gpus: Vec<GpuTarget>,
}

/// The brand name libnvidia-container compares, from what nvidia-smi or NVML print:
/// `Tesla` → `tesla`, `NVIDIA RTX` → `nvidiartx`, `Quadro RTX` → `quadrortx`, `vApps` →
/// `nvidiavapps`, `Unknown` → `unknown`.
pub fn normalize_brand(name: &str) -> String {
    let squashed: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    match squashed.as_str() {
        "" => "unknown".into(),
        "vapps" | "vpc" | "vcs" | "vws" | "cloudgaming" => format!("nvidia{squashed}"),
        _ => squashed,
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `=`.
    #[serde(rename = "=")]
    Eq,
    /// `!=`.
    #[serde(rename = "!=")]
    Ne,
    /// `<`.
    #[serde(rename = "<")]
    Lt,
    /// `<=`.
    #[serde(rename = "<=")]
    Le,
    /// `>`.
    #[serde(rename = ">")]
    Gt,
    /// `>=`.
    #[serde(rename = ">=")]
    Ge,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// libnvidia-container's operator table, in its order.
const OPERATORS: [(&str, Op); 6] = [
    ("=", Op::Eq),
    ("!=", Op::Ne),
    ("<", Op::Lt),
    ("<=", Op::Le),
    (">", Op::Gt),
    (">=", Op::Ge),
];

/// What a condition compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Property {
    /// The driver's CUDA version.
    Cuda,
    /// The driver version.
    Driver,
    /// The GPU's compute capability.
    Arch,
    /// The GPU's brand.
    Brand,
}

/// One `NAME OP VALUE` condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// What it compares.
    pub property: Property,
    /// How.
    pub op: Op,
    /// With what, as written.
    pub value: String,
}

/// Why a condition is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid requirement `{condition}`: {reason}")]
pub struct RequireParseError {
    /// The condition as written.
    pub condition: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses one condition the way `evaluate_rule` does, without evaluating it.
fn parse_condition(text: &str) -> Result<Condition, RequireParseError> {
    let bad = |reason: &str| RequireParseError {
        condition: text.to_string(),
        reason: reason.to_string(),
    };
    let is_op = |c: char| matches!(c, '<' | '>' | '=' | '!');
    let name_end = text.find(is_op).ok_or_else(|| bad("no comparison operator"))?;
    if name_end == 0 {
        return Err(bad("no property name before the operator"));
    }
    let rest = &text[name_end..];
    let span_end = rest.find(|c: char| !is_op(c)).unwrap_or(rest.len());
    let span = &rest[..span_end];
    let value = &rest[span_end..];
    // strncmp(ptr, op, strlen(span)): the first operator the span is a prefix of.
    let op = OPERATORS
        .iter()
        .find(|(s, _)| s.len() >= span.len() && s.as_bytes()[..span.len()] == *span.as_bytes())
        .map(|(_, op)| *op)
        .ok_or_else(|| bad(&format!("`{span}` is not an operator (use =, !=, <, <=, >, >=)")))?;
    if value.is_empty() {
        return Err(bad("no value after the operator"));
    }
    let name = &text[..name_end];
    let property = match name.to_ascii_lowercase().as_str() {
        "cuda" => Property::Cuda,
        "driver" => Property::Driver,
        "arch" => Property::Arch,
        "brand" => Property::Brand,
        _ => {
            return Err(bad(&format!(
                "unknown property `{name}` (cuda, driver, arch, brand)"
            )));
        }
    };
    Ok(Condition {
        property,
        op,
        value: value.to_string(),
    })
}

/// A requirement expression: alternatives (OR), each a list of conditions (AND).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expression {
    /// The alternatives, in order.
    pub alternatives: Vec<Vec<Condition>>,
}

/// An expression as the runtime splits it: the alternatives (a space between them), each
/// its conditions (a comma between them), empty pieces skipped; each condition as written
/// and parsed on its own, so a malformed one is an error in its place only (the runtime
/// notices it when it reaches it). Readers that want what an expression allows without
/// evaluating it (a requirement's CUDA floor) take the conditions they understand.
pub fn read_alternatives(
    text: &str,
) -> impl Iterator<Item = Vec<(&str, Result<Condition, RequireParseError>)>> + '_ {
    text.split(' ').filter(|a| !a.is_empty()).map(|alt| {
        alt.split(',')
            .filter(|c| !c.is_empty())
            .map(|c| (c, parse_condition(c)))
            .collect()
    })
}

/// Parses a whole expression strictly: every condition must be well formed, although the
/// runtime only notices a bad one when it reaches it. Versions must be digits and dots,
/// and `brand` takes only `=` and `!=`.
pub fn parse_expression(text: &str) -> Result<Expression, RequireParseError> {
    let mut alternatives = Vec::new();
    for alt in read_alternatives(text) {
        let mut conds = Vec::new();
        for (cond, parsed) in alt {
            let c = parsed?;
            let version_ok = |v: &str| {
                v.bytes().all(|b| b.is_ascii_digit() || b == b'.') && strtoumax(v.as_bytes()).is_some()
            };
            match c.property {
                Property::Brand if !matches!(c.op, Op::Eq | Op::Ne) => {
                    return Err(RequireParseError {
                        condition: cond.to_string(),
                        reason: "`brand` compares only with = and !=".into(),
                    });
                }
                Property::Brand => {}
                _ if !version_ok(&c.value) => {
                    return Err(RequireParseError {
                        condition: cond.to_string(),
                        reason: format!("`{}` is not a version (digits and dots)", c.value),
                    });
                }
                _ => {}
            }
            conds.push(c);
        }
        if !conds.is_empty() {
            alternatives.push(conds);
        }
    }
    Ok(Expression { alternatives })
}

/// `strtoumax` on a byte string: the leading number and the rest; `None` without digits or
/// on overflow (C returns `UINTMAX_MAX` then, which dsl.c treats as an error either way).
fn strtoumax(s: &[u8]) -> Option<(u64, &[u8])> {
    let end = s.iter().position(|b| !b.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in &s[..end] {
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    (n != u64::MAX).then_some((n, &s[end..]))
}

fn skip(s: &[u8], set: &[u8]) -> usize {
    s.iter().position(|b| !set.contains(b)).unwrap_or(s.len())
}

/// `dsl_compare_version`: `None` where C returns -1 (an invalid version).
fn compare_version(v1: &str, op: Op, v2: &str) -> Option<bool> {
    let valid = |v: &str| v.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if !valid(v1) || !valid(v2) {
        return None;
    }
    let (mut a, mut b) = (v1.as_bytes(), v2.as_bytes());
    while !a.is_empty() && !b.is_empty() {
        let (n1, r1) = strtoumax(a)?;
        let (n2, r2) = strtoumax(b)?;
        if n1 != n2 {
            return Some(match op {
                Op::Eq => false,
                Op::Ne => true,
                Op::Lt | Op::Le => n1 < n2,
                Op::Gt | Op::Ge => n1 > n2,
            });
        }
        a = &r1[skip(r1, b".")..];
        b = &r2[skip(r2, b".")..];
    }
    // What is left of the longer one counts only if it is not all dots and zeros.
    a = &a[skip(a, b".0")..];
    b = &b[skip(b, b".0")..];
    match op {
        Op::Ne => return Some(!a.is_empty() || !b.is_empty()),
        Op::Eq | Op::Le | Op::Ge => {
            if a.is_empty() && b.is_empty() {
                return Some(true);
            }
            if op == Op::Eq {
                return Some(false);
            }
        }
        _ => {}
    }
    Some(match op {
        Op::Lt | Op::Le => a.is_empty() && !b.is_empty(),
        _ => !a.is_empty() && b.is_empty(),
    })
}

/// The host facts one evaluation sees: the driver, and one GPU or none.
struct Data<'a> {
    cuda: Option<String>,
    driver: Option<String>,
    gpu: Option<&'a GpuTarget>,
}

/// `evaluate_rule`: `None` for an invalid condition (C's -1).
fn evaluate_condition(text: &str, data: &Data) -> Option<bool> {
    let c = parse_condition(text).ok()?;
    let result = match c.property {
        Property::Cuda => match &data.cuda {
            None => true,
            Some(v) => compare_version(v, c.op, &c.value)?,
        },
        Property::Driver => match &data.driver {
            None => true,
            Some(v) => compare_version(v, c.op, &c.value)?,
        },
        Property::Arch => match data.gpu {
            None => true,
            // libnvidia-container formats the architecture as "%u.%u"; an unknown one
            // compares as an empty string, which matches nothing but `!=`-style checks.
            Some(g) => {
                let arch = g
                    .arch
                    .map(|a| format!("{}.{}", a.major, a.minor))
                    .unwrap_or_default();
                compare_version(&arch, c.op, &c.value)?
            }
        },
        Property::Brand => match data.gpu.and_then(|g| g.brand.as_deref()) {
            None => true,
            Some(b) => match c.op {
                Op::Eq => b.eq_ignore_ascii_case(&c.value),
                Op::Ne => !b.eq_ignore_ascii_case(&c.value),
                _ => return None,
            },
        },
    };
    // The echo of a false condition goes through a 128-byte buffer; too long is an error.
    let name_len = text.find(['<', '>', '=', '!']).unwrap_or(0);
    if !result && name_len + 1 + c.op.as_str().len() + 1 + c.value.len() >= 128 {
        return None;
    }
    Some(result)
}

/// How one requirement fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "verdict")]
pub enum Verdict {
    /// It holds.
    Satisfied,
    /// It does not: the container is refused.
    Unsatisfied,
    /// The runtime cannot read it: the container is refused too.
    Invalid {
        /// Why.
        reason: String,
    },
}

/// One requirement and how it fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequireCheck {
    /// Where it came from: `NVIDIA_REQUIRE_CUDA`, or `CUDA_VERSION` for a legacy image.
    pub variable: String,
    /// The expression.
    pub expression: String,
    /// The outcome (over all GPUs).
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The first GPU (index into [`HostTarget::gpus`]) it failed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<usize>,
    /// For each alternative tried, the condition that was false: what the runtime's
    /// message does not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
    /// The runtime's message for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Whether the runtime would start the image, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequireOutcome {
    /// `NVIDIA_DISABLE_REQUIRE` turned the check off.
    pub disabled: bool,
    /// The container would start.
    pub satisfied: bool,
    /// Each requirement, sorted by variable name.
    pub checks: Vec<RequireCheck>,
}

impl RequireOutcome {
    /// The checks that refuse the container.
    pub fn failing(&self) -> impl Iterator<Item = &RequireCheck> {
        self.checks.iter().filter(|c| c.verdict != Verdict::Satisfied)
    }
}

/// The outcome of one expression against one GPU (or none).
struct Evaluated {
    verdict: Verdict,
    failing: Vec<String>,
    message: Option<String>,
}

/// `dsl_evaluate`, to the letter.
fn dsl_evaluate(predicate: &str, data: &Data) -> Evaluated {
    let mut ret = true;
    let mut failing = Vec::new();
    for alt in predicate.split(' ') {
        if alt.is_empty() {
            continue;
        }
        let mut completed = true;
        for cond in alt.split(',') {
            if cond.is_empty() {
                continue;
            }
            match evaluate_condition(cond, data) {
                None => {
                    return Evaluated {
                        verdict: Verdict::Invalid {
                            reason: parse_condition(cond)
                                .err()
                                .map_or_else(|| format!("`{cond}` cannot be evaluated"), |e| e.to_string()),
                        },
                        failing,
                        message: Some("requirement error: invalid expression".into()),
                    };
                }
                Some(r) => {
                    ret = r;
                    if !r {
                        failing.push(cond.to_string());
                        completed = false;
                        break;
                    }
                }
            }
        }
        if completed {
            break;
        }
    }
    if ret {
        return Evaluated {
            verdict: Verdict::Satisfied,
            failing: Vec::new(),
            message: None,
        };
    }
    let first = predicate.split(' ').next().unwrap_or("");
    let message = if first.starts_with("cuda>=") {
        format!(
            "requirement error: unsatisfied condition: {first}, please update your driver to a newer version, or use an earlier cuda container"
        )
    } else {
        format!("requirement error: unsatisfied condition: {first}")
    };
    Evaluated {
        verdict: Verdict::Unsatisfied,
        failing,
        message: Some(message),
    }
}

/// Evaluates one expression against the host: once per GPU, or once with none.
pub fn evaluate_expression(
    expression: &str,
    host: &HostTarget,
) -> (Verdict, Option<usize>, Vec<String>, Option<String>) {
    let base = |gpu| Data {
        cuda: host.cuda.as_ref().map(|c| c.as_str().to_string()),
        driver: host.driver.as_ref().map(|d| d.as_str().to_string()),
        gpu,
    };
    if host.gpus.is_empty() {
        let e = dsl_evaluate(expression, &base(None));
        return (e.verdict, None, e.failing, e.message);
    }
    for (i, gpu) in host.gpus.iter().enumerate() {
        let e = dsl_evaluate(expression, &base(Some(gpu)));
        if e.verdict != Verdict::Satisfied {
            return (e.verdict, Some(i), e.failing, e.message);
        }
    }
    (Verdict::Satisfied, None, Vec::new(), None)
}

/// Go's `strconv.ParseBool`, true side.
fn go_true(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// `MAJOR.MINOR` of a version as golang.org/x/mod/semver reads it (`12`, `12.4`,
/// `12.4.1`, `12.4.1-rc.1+build`; no leading zeros), each part fitting 32 bits.
fn semver_major_minor(version: &str) -> Option<String> {
    let v = version.strip_prefix('v').unwrap_or(version);
    fn int(s: &str) -> Option<(&str, &str)> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (n, rest) = s.split_at(end);
        (!n.is_empty() && (n == "0" || !n.starts_with('0'))).then_some((n, rest))
    }
    fn idents(s: &str, numeric_rule: bool) -> bool {
        !s.is_empty()
            && s.split('.').all(|id| {
                !id.is_empty()
                    && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !(numeric_rule
                        && id.len() > 1
                        && id.bytes().all(|b| b.is_ascii_digit())
                        && id.starts_with('0'))
            })
    }
    let (major, rest) = int(v)?;
    let mut minor = "0";
    if !rest.is_empty() {
        let (m, rest) = int(rest.strip_prefix('.')?)?;
        minor = m;
        if !rest.is_empty() {
            let (_patch, mut rest) = int(rest.strip_prefix('.')?)?;
            if let Some(pre) = rest.strip_prefix('-') {
                let end = pre.find('+').unwrap_or(pre.len());
                if !idents(&pre[..end], true) {
                    return None;
                }
                rest = &pre[end..];
            }
            if let Some(build) = rest.strip_prefix('+') {
                if !idents(build, false) {
                    return None;
                }
                rest = "";
            }
            if !rest.is_empty() {
                return None;
            }
        }
    }
    major.parse::<u32>().ok()?;
    minor.parse::<u32>().ok()?;
    Some(format!("{major}.{minor}"))
}

/// Evaluates an image's requirements (from its `Env`, as `(name, value)` pairs in order)
/// against a host, as `docker run --gpus` would.
pub fn evaluate(env: &[(String, String)], host: &HostTarget) -> RequireOutcome {
    // The hook builds a map: the last definition of a name wins.
    let mut map: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    for (k, v) in env {
        map.insert(k, v);
    }
    if map.get("NVIDIA_DISABLE_REQUIRE").is_some_and(|v| go_true(v)) {
        return RequireOutcome {
            disabled: true,
            satisfied: true,
            checks: Vec::new(),
        };
    }
    let mut requirements: Vec<(String, String)> = map
        .iter()
        .filter(|(k, _)| k.starts_with("NVIDIA_REQUIRE_") && !k.starts_with("NVIDIA_REQUIRE_JETPACK"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut checks = Vec::new();
    let legacy = map.get("CUDA_VERSION").is_some_and(|v| !v.is_empty())
        && map.get("NVIDIA_REQUIRE_CUDA").is_none_or(|v| v.is_empty());
    if legacy {
        let cuda = map.get("CUDA_VERSION").copied().unwrap_or("");
        match semver_major_minor(cuda) {
            Some(mm) => requirements.push(("CUDA_VERSION".into(), format!("cuda>={mm}"))),
            None => checks.push(RequireCheck {
                variable: "CUDA_VERSION".into(),
                expression: cuda.to_string(),
                verdict: Verdict::Invalid {
                    reason: format!("CUDA_VERSION `{cuda}` is not a version the hook can read"),
                },
                gpu: None,
                failing: Vec::new(),
                message: Some("failed to get version: invalid CUDA version: invalid version string".into()),
            }),
        }
    }
    for (variable, expression) in requirements {
        let (verdict, gpu, failing, message) = evaluate_expression(&expression, host);
        checks.push(RequireCheck {
            variable,
            expression,
            verdict,
            gpu,
            failing,
            message,
        });
    }
    checks.sort_by(|a, b| a.variable.cmp(&b.variable));
    RequireOutcome {
        disabled: false,
        satisfied: checks.iter().all(|c| c.verdict == Verdict::Satisfied),
        checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real `NVIDIA_REQUIRE_CUDA` of nvidia/cuda:12.4.1-base-ubuntu22.04 (amd64).
    const CUDA_12_4_1: &str = "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=geforce,driver>=470,driver<471 brand=geforcertx,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 brand=titan,driver>=470,driver<471 brand=titanrtx,driver>=470,driver<471 brand=tesla,driver>=525,driver<526 brand=unknown,driver>=525,driver<526 brand=nvidia,driver>=525,driver<526 brand=nvidiartx,driver>=525,driver<526 brand=geforce,driver>=525,driver<526 brand=geforcertx,driver>=525,driver<526 brand=quadro,driver>=525,driver<526 brand=quadrortx,driver>=525,driver<526 brand=titan,driver>=525,driver<526 brand=titanrtx,driver>=525,driver<526 brand=tesla,driver>=535,driver<536 brand=unknown,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536 brand=geforce,driver>=535,driver<536 brand=geforcertx,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 brand=titan,driver>=535,driver<536 brand=titanrtx,driver>=535,driver<536";

    /// The real `NVIDIA_REQUIRE_CUDA` of nvidia/cuda:12.1.1-base-ubuntu22.04 (amd64).
    const CUDA_12_1_1: &str = "cuda>=12.1 brand=tesla,driver>=450,driver<451 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=geforce,driver>=470,driver<471 brand=geforcertx,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 brand=titan,driver>=470,driver<471 brand=titanrtx,driver>=470,driver<471 brand=tesla,driver>=525,driver<526 brand=unknown,driver>=525,driver<526 brand=nvidia,driver>=525,driver<526 brand=nvidiartx,driver>=525,driver<526 brand=geforce,driver>=525,driver<526 brand=geforcertx,driver>=525,driver<526 brand=quadro,driver>=525,driver<526 brand=quadrortx,driver>=525,driver<526 brand=titan,driver>=525,driver<526 brand=titanrtx,driver>=525,driver<526";

    fn host(cuda: &str, driver: &str, gpus: &[(&str, &str)]) -> HostTarget {
        HostTarget {
            cuda: Some(cuda.parse().unwrap()),
            driver: Some(driver.parse().unwrap()),
            gpus: gpus
                .iter()
                .map(|(arch, brand)| GpuTarget {
                    arch: Some(arch.parse().unwrap()),
                    brand: Some(brand.to_string()),
                })
                .collect(),
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn nvidia_cuda_12_4_1_on_real_hosts() {
        let e = env(&[("NVIDIA_REQUIRE_CUDA", CUDA_12_4_1), ("CUDA_VERSION", "12.4.1")]);
        // A 550 driver gives CUDA 12.4: native.
        let ok = evaluate(&e, &host("12.4", "550.54.14", &[("9.0", "nvidia")]));
        assert!(ok.satisfied, "{ok:?}");
        // An H100 on R535 (CUDA 12.2): the forward-compat alternative for 535 holds.
        let fwd = evaluate(&e, &host("12.2", "535.104.05", &[("9.0", "nvidia")]));
        assert!(fwd.satisfied, "{fwd:?}");
        // A GeForce on R545 (CUDA 12.3): no alternative; the message names only cuda>=12.4.
        let no = evaluate(&e, &host("12.3", "545.29.06", &[("8.6", "geforce")]));
        assert!(!no.satisfied);
        let check = &no.checks[0];
        assert_eq!(check.verdict, Verdict::Unsatisfied);
        assert_eq!(
            check.message.as_deref(),
            Some(
                "requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a newer version, or use an earlier cuda container"
            )
        );
        assert_eq!(check.failing[0], "cuda>=12.4");
        assert_eq!(check.failing.len(), 31);
        assert_eq!(check.gpu, Some(0));
        // Two GPUs: the second fails, the container is refused.
        let mixed = evaluate(
            &e,
            &host("12.2", "535.104.05", &[("9.0", "tesla"), ("8.6", "quadrox")]),
        );
        assert!(!mixed.satisfied);
        assert_eq!(mixed.checks[0].gpu, Some(1));
        // No GPU visible: brand and arch pass, so the 535 alternative holds.
        assert!(evaluate(&e, &host("12.2", "535.104.05", &[])).satisfied);
    }

    #[test]
    fn nvidia_cuda_12_1_1_branches() {
        let e = env(&[("NVIDIA_REQUIRE_CUDA", CUDA_12_1_1)]);
        assert!(evaluate(&e, &host("12.0", "525.105.17", &[("8.0", "Tesla")])).satisfied);
        assert!(evaluate(&e, &host("11.4", "470.223.02", &[("7.0", "tesla")])).satisfied);
        assert!(evaluate(&e, &host("11.0", "450.248.02", &[("7.0", "tesla")])).satisfied);
        assert!(!evaluate(&e, &host("11.0", "450.248.02", &[("7.5", "geforce")])).satisfied);
        assert!(!evaluate(&e, &host("11.6", "510.108.03", &[("8.0", "tesla")])).satisfied);
    }

    #[test]
    fn disable_legacy_and_several() {
        let h = host("11.8", "520.61.05", &[("8.6", "geforce")]);
        let base = [("NVIDIA_REQUIRE_CUDA", "cuda>=12.0")];
        assert!(!evaluate(&env(&base), &h).satisfied);
        for v in ["1", "true", "TRUE", "t"] {
            let mut e = env(&base);
            e.push(("NVIDIA_DISABLE_REQUIRE".into(), v.into()));
            let o = evaluate(&e, &h);
            assert!(o.disabled && o.satisfied, "{v}");
        }
        let mut e = env(&base);
        e.push(("NVIDIA_DISABLE_REQUIRE".into(), "yes".into()));
        assert!(!evaluate(&e, &h).satisfied, "Go's ParseBool does not read `yes`");
        // Legacy: CUDA_VERSION alone means cuda>=MAJOR.MINOR.
        let o = evaluate(&env(&[("CUDA_VERSION", "12.1.1")]), &h);
        assert_eq!(o.checks[0].expression, "cuda>=12.1");
        assert!(!o.satisfied);
        assert!(evaluate(&env(&[("CUDA_VERSION", "11.8")]), &h).satisfied);
        let o = evaluate(&env(&[("CUDA_VERSION", "12.01")]), &h);
        assert!(matches!(o.checks[0].verdict, Verdict::Invalid { .. }));
        // Several variables are ANDed; JETPACK is not the runtime's; the last definition wins.
        let e = env(&[
            ("NVIDIA_REQUIRE_CUDA", "cuda>=11.0"),
            ("NVIDIA_REQUIRE_ARCH", "arch>=9.0"),
            ("NVIDIA_REQUIRE_JETPACK", "garbage"),
        ]);
        let o = evaluate(&e, &h);
        assert!(!o.satisfied);
        assert_eq!(
            o.failing().map(|c| c.variable.as_str()).collect::<Vec<_>>(),
            ["NVIDIA_REQUIRE_ARCH"]
        );
        let e = env(&[
            ("NVIDIA_REQUIRE_CUDA", "cuda>=13.0"),
            ("NVIDIA_REQUIRE_CUDA", "cuda>=11.0"),
        ]);
        assert!(evaluate(&e, &h).satisfied);
    }

    #[test]
    fn quirks_of_the_c_parser() {
        let h = host("12.2", "535.104.05", &[("8.6", "geforce")]);
        let verdict = |expr: &str| evaluate_expression(expr, &h).0;
        assert!(matches!(verdict("cuda==12.2"), Verdict::Invalid { .. }));
        assert_eq!(verdict("cuda=12.2"), Verdict::Satisfied);
        assert_eq!(verdict("cuda!12.2"), Verdict::Unsatisfied, "a lone `!` is `!=`");
        assert_eq!(verdict("CUDA>=12"), Verdict::Satisfied);
        assert_eq!(verdict("cuda=12.2.0.0"), Verdict::Satisfied);
        assert_eq!(verdict("driver>535.104"), Verdict::Satisfied);
        assert_eq!(verdict("driver>=535.104.5"), Verdict::Satisfied);
        assert_eq!(verdict("brand=GeForce"), Verdict::Satisfied);
        assert!(matches!(verdict("brand>=geforce"), Verdict::Invalid { .. }));
        assert!(matches!(verdict("foo>=1"), Verdict::Invalid { .. }));
        assert!(matches!(verdict("cuda>=12.x"), Verdict::Invalid { .. }));
        // Lazy: a bad condition after a satisfied alternative, or after a false condition
        // in its own alternative, is never reached.
        assert_eq!(verdict("cuda>=12 garbage"), Verdict::Satisfied);
        assert_eq!(verdict("cuda>=13,garbage cuda>=12"), Verdict::Satisfied);
        assert!(matches!(verdict("cuda>=13 garbage"), Verdict::Invalid { .. }));
        // Empty pieces are skipped; an empty expression holds.
        assert_eq!(verdict(""), Verdict::Satisfied);
        assert_eq!(verdict("  cuda>=12,, "), Verdict::Satisfied);
        // An alternative made only of commas ends the search with the previous result.
        assert_eq!(verdict("cuda>=13 ,"), Verdict::Unsatisfied);
        // The 128-byte echo buffer.
        let long = format!("driver<536{}", ".0".repeat(70));
        assert_eq!(verdict(&long), Verdict::Satisfied);
        let long_false = format!("driver>536{}", ".0".repeat(70));
        assert!(matches!(verdict(&long_false), Verdict::Invalid { .. }));
        // The message echoes the first alternative as written, whatever failed.
        let (_, _, failing, msg) = evaluate_expression("arch>=9.0 brand=tesla", &h);
        assert_eq!(
            msg.as_deref(),
            Some("requirement error: unsatisfied condition: arch>=9.0")
        );
        assert_eq!(failing, ["arch>=9.0", "brand=tesla"]);
    }

    #[test]
    fn version_comparison() {
        assert_eq!(compare_version("535.104.05", Op::Lt, "536"), Some(true));
        assert_eq!(compare_version("535.104.05", Op::Ge, "535"), Some(true));
        assert_eq!(compare_version("12", Op::Eq, "12.0.0"), Some(true));
        assert_eq!(compare_version("12.0.1", Op::Gt, "12"), Some(true));
        assert_eq!(compare_version("12.05", Op::Gt, "12"), Some(true));
        assert_eq!(compare_version("12.1", Op::Lt, "12.10"), Some(true));
        assert_eq!(compare_version("12.2", Op::Ne, "12.2"), Some(false));
        assert_eq!(compare_version("", Op::Le, "1"), Some(true));
        assert_eq!(compare_version(".5", Op::Eq, "5"), None);
        assert_eq!(compare_version("99999999999999999999", Op::Eq, "1"), None);
        let h = host("12.2", "535.104.05", &[]);
        assert!(matches!(
            evaluate_expression("driver<1111111111111111111111", &h).0,
            Verdict::Invalid { .. }
        ));
    }

    #[test]
    fn strict_parse_and_semver() {
        let e = parse_expression(CUDA_12_4_1).unwrap();
        assert_eq!(e.alternatives.len(), 31);
        assert_eq!(
            e.alternatives[1],
            vec![
                Condition {
                    property: Property::Brand,
                    op: Op::Eq,
                    value: "tesla".into()
                },
                Condition {
                    property: Property::Driver,
                    op: Op::Ge,
                    value: "470".into()
                },
                Condition {
                    property: Property::Driver,
                    op: Op::Lt,
                    value: "471".into()
                },
            ]
        );
        for bad in [
            "cuda==1",
            "cuda>=",
            ">=1",
            "gpu>=1",
            "brand<x",
            "cuda>=1.x",
            "cuda",
        ] {
            assert!(parse_expression(bad).is_err(), "{bad}");
        }
        assert_eq!(semver_major_minor("12.4.1"), Some("12.4".into()));
        assert_eq!(semver_major_minor("v12"), Some("12.0".into()));
        assert_eq!(semver_major_minor("12.4.1-rc.1+b7"), Some("12.4".into()));
        assert_eq!(semver_major_minor("12.4.1.2"), None);
        assert_eq!(semver_major_minor("12.4-rc"), None);
        assert_eq!(semver_major_minor("99999999999.1"), None);
        assert_eq!(normalize_brand("NVIDIA RTX"), "nvidiartx");
        assert_eq!(normalize_brand("vApps"), "nvidiavapps");
        assert_eq!(normalize_brand("Tesla"), "tesla");
    }
}
