//! Which of a project's requirements compile CUDA code when installed, from compat-db's
//! `package` records, and whether that makes the project one that builds CUDA extensions.
//!
//! Owns: matching requirements to package records by their PEP 503 name, and the decision
//! and its sentence for each match: assumed to compile (then, as with `--extensions`, nvcc
//! of torch's CUDA major is needed and a Dockerfile starts from a devel image), or not, and
//! why. Must not: read files or the environment (the requirements arrive parsed), or judge
//! a stack; the rules of `rules` do that once `Query::extensions` is set.
//!
//! The direction of doubt: a requirement that may compile is assumed to, and the sentence
//! says under which condition it would not. A devel image that was not needed costs a few
//! gigabytes; a runtime image without nvcc costs a failed build or a failed first run.
//! Only a record that says the install compiles nothing without an explicit request
//! (`on-request` without JIT, or `from-source` installed from an index) leaves it unassumed,
//! and the sentence names what would ask for it.

use serde::{Deserialize, Serialize};

use crate::db::{BuildEnv, Compiles, EnvRole, NvccMatch, Package, PythonRelease};
use crate::model::{Operator, Version};
use crate::project::{Install, Requirement, marker_applies};

/// A requirement that names a package whose installation compiles CUDA code.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExtensionReq {
    /// The package (`flash-attn`), as its record names it.
    pub package: String,
    /// Where the requirement was written (`requirements.txt:4`).
    pub origin: String,
    /// When installing it compiles, as its record says (`unless-prebuilt`).
    #[serde(deserialize_with = "compiles_word")]
    pub compiles: crate::model::known::Word,
    /// Whether it makes the project build CUDA extensions.
    pub assumed: bool,
    /// The decision in a sentence.
    pub why: String,
    /// How nvcc must match torch's CUDA.
    pub nvcc_match: NvccMatch,
    /// Its build imports torch: it installs after torch, without build isolation.
    pub needs_torch_at_build: bool,
    /// What its build imports besides torch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_requires: Vec<String>,
    /// Environment variables its build reads, with what each does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<BuildEnv>,
    /// Written in pyproject.toml rather than a requirements file.
    #[serde(skip)]
    pub pyproject: bool,
}

/// A [`Compiles`] word read back, as the record's own `&'static str`.
fn compiles_word<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    Ok(Compiles::deserialize(d)?.as_str())
}

/// The exact version an `==` (or `===`) specifier pins, without wildcards.
fn pinned(r: &Requirement) -> Option<&Version> {
    r.specifiers.iter().find_map(|s| {
        let exact = matches!(s.operator(), Operator::Equal | Operator::ExactEqual);
        exact.then(|| s.version())
    })
}

/// Whether a requirement's marker holds on a Linux x86_64 CPython of some release line of
/// the database: `None` when it holds on none, `Some(false)` when on only some.
fn marker_reach(r: &Requirement, pythons: &[PythonRelease]) -> Option<bool> {
    let Some(marker) = r.marker.as_ref() else {
        return Some(true);
    };
    let holds: Vec<bool> = pythons
        .iter()
        .map(|p| marker_applies(Some(marker), &p.version.to_string()))
        .collect();
    if holds.iter().all(|h| *h) {
        Some(true)
    } else if holds.iter().any(|h| *h) {
        Some(false)
    } else {
        None
    }
}

/// The first `build_options` of the record that the requirement's line gives, as
/// `--config-settings "--build-option=--cuda_ext"` or `--global-option=--cuda_ext`.
fn asked_option<'a>(r: &Requirement, p: &'a Package) -> Option<&'a str> {
    p.build_options
        .iter()
        .find(|want| {
            r.build_options
                .iter()
                .any(|given| given.split(['=', ' ']).any(|part| part == want.as_str()))
        })
        .map(String::as_str)
}

fn env_list(p: &Package, role: EnvRole) -> Vec<String> {
    p.env
        .iter()
        .filter(|e| e.role == role)
        .map(|e| match &e.value {
            Some(v) => format!("{}={v}", e.name),
            None => e.name.clone(),
        })
        .collect()
}

fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

fn nvcc_needed(p: &Package) -> &'static str {
    match p.nvcc_match {
        NvccMatch::Major => "nvcc of torch's CUDA major needed",
        NvccMatch::MajorMinor => "nvcc of exactly torch's CUDA version needed",
    }
}

/// Decides one requirement against its record.
// The decision in its order of precedence (markers, the pinned version, prebuilt wheels,
// build options and variables): kept in one place so the order reads top to bottom.
fn decide(r: &Requirement, p: &Package, pythons: &[PythonRelease]) -> ExtensionReq {
    let who = format!("{} ({})", p.name, r.origin);
    let assumed_tail = format!("extensions assumed, {}", nvcc_needed(p));
    let reach = marker_reach(r, pythons);
    let outside = match (pinned(r), &p.versions) {
        (Some(v), Some(range)) if !range.contains(v) => Some((v, range)),
        _ => None,
    };
    let build_env = env_list(p, EnvRole::Build);
    let (assumed, mut why) = if reach.is_none() {
        (
            false,
            format!("{who} is not installed: its marker holds on no Linux x86_64 CPython"),
        )
    } else if let Install::Wheel(file) = &r.install {
        (
            false,
            format!("{who} installs the wheel `{file}`: nothing is compiled at install"),
        )
    } else if let Some((v, range)) = outside {
        (
            true,
            format!(
                "{who} pins {v}, outside the releases whose build the record describes ({range}): compiling CUDA code at install is assumed; {assumed_tail}"
            ),
        )
    } else {
        match p.compiles {
            Compiles::Always => (
                true,
                format!("{who} compiles CUDA code at install: {assumed_tail}"),
            ),
            Compiles::UnlessPrebuilt => {
                let force = if build_env.is_empty() {
                    String::new()
                } else {
                    format!(", and always with {}", or_list(&build_env))
                };
                (
                    true,
                    format!(
                        "{who} compiles CUDA code at install unless its build finds a prebuilt wheel for this torch, CUDA and Python on the project's releases{force}: {assumed_tail}"
                    ),
                )
            }
            Compiles::FromSource => match &r.install {
                Install::Source(location) => (
                    true,
                    format!(
                        "{who} builds from source (`{location}`) and compiles CUDA code at install: {assumed_tail}"
                    ),
                ),
                _ => (
                    false,
                    format!(
                        "{who} installs a prebuilt wheel when the index has one for this torch and Python, and compiles CUDA code only when built from source: extensions not assumed (give --extensions if it builds from source)"
                    ),
                ),
            },
            Compiles::OnRequest => {
                let mut asks = build_env.clone();
                asks.extend(p.build_options.iter().cloned());
                if let Some(option) = asked_option(r, p) {
                    (
                        true,
                        format!(
                            "{who} asks for compiling CUDA code at install with `{option}`: {assumed_tail}"
                        ),
                    )
                } else if p.jit {
                    (
                        true,
                        format!(
                            "{who} compiles its CUDA code at first use (JIT) unless {} pre-builds it at install: {assumed_tail} where it runs either way",
                            or_list(&build_env)
                        ),
                    )
                } else {
                    (
                        false,
                        format!(
                            "{who} compiles CUDA code only when {} asks for it: extensions not assumed (give --extensions when you build them)",
                            or_list(&asks)
                        ),
                    )
                }
            }
        }
    };
    if assumed && reach == Some(false) {
        why.push_str(" (where its marker holds)");
    }
    if assumed && p.needs_torch_at_build {
        why.push_str("; its build imports torch: install it after torch with --no-build-isolation");
    }
    ExtensionReq {
        package: p.name.clone(),
        origin: r.origin.clone(),
        compiles: p.compiles.as_str(),
        assumed,
        why,
        nvcc_match: p.nvcc_match,
        needs_torch_at_build: p.needs_torch_at_build,
        build_requires: p.build_requires.clone(),
        env: p.env.clone(),
        pyproject: r.pyproject,
    }
}

/// Every requirement that names a package record, decided, in the order written.
pub fn implied(
    packages: &[Package],
    pythons: &[PythonRelease],
    requirements: &[Requirement],
) -> Vec<ExtensionReq> {
    requirements
        .iter()
        .filter_map(|r| {
            let p = packages.iter().find(|p| p.name == r.name)?;
            Some(decide(r, p, pythons))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;
    use crate::project::{parse_pyproject, parse_requirements};

    fn decided(text: &str) -> Vec<ExtensionReq> {
        let db = Db::embedded().expect("the embedded database loads");
        let needs = parse_requirements("requirements.txt", text).expect("valid requirements");
        implied(&db.packages, &db.python, &needs.requirements)
    }

    fn one(text: &str) -> ExtensionReq {
        let mut all = decided(text);
        assert_eq!(all.len(), 1, "{all:#?}");
        all.remove(0)
    }

    #[test]
    fn every_spelling_of_flash_attn_is_assumed_to_compile() {
        for line in [
            "flash-attn==2.6.3",
            "flash_attn",
            "Flash-Attn>=2.5",
            "flash.attn ; python_version >= '3.8'",
        ] {
            let e = one(line);
            assert_eq!(e.package, "flash-attn", "{line}");
            assert!(e.assumed, "{line}: {}", e.why);
            assert_eq!(e.origin, "requirements.txt:1");
            assert!(
                e.why
                    .starts_with("flash-attn (requirements.txt:1) compiles CUDA code at install unless"),
                "{}",
                e.why
            );
            assert!(e.why.contains("FLASH_ATTENTION_FORCE_BUILD=TRUE"), "{}", e.why);
            assert!(
                e.why
                    .contains("extensions assumed, nvcc of torch's CUDA major needed"),
                "{}",
                e.why
            );
            assert!(e.why.contains("--no-build-isolation"), "{}", e.why);
        }
        assert!(
            decided("flash-attention==1.0\nnumpy\n").is_empty(),
            "another project"
        );
    }

    #[test]
    fn markers_that_hold_nowhere_or_somewhere_are_said() {
        let e = one("flash-attn ; sys_platform == 'darwin'");
        assert!(!e.assumed);
        assert!(
            e.why.contains("its marker holds on no Linux x86_64 CPython"),
            "{}",
            e.why
        );
        let e = one("flash-attn ; python_version >= '3.11'");
        assert!(e.assumed);
        assert!(e.why.contains("(where its marker holds)"), "{}", e.why);
    }

    #[test]
    fn a_wheel_file_compiles_nothing() {
        let e = one(
            "flash-attn @ https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/flash_attn-2.6.3%2Bcu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
        );
        assert!(!e.assumed);
        assert!(
            e.why.contains("installs the wheel `flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl`"),
            "{}",
            e.why
        );
    }

    #[test]
    fn a_pin_outside_the_records_releases_is_assumed_to_compile() {
        let e = one("flash-attn==2.0.4");
        assert!(e.assumed);
        assert!(e.why.contains("pins 2.0.4, outside the releases"), "{}", e.why);
        let e = one("mamba-ssm==2.4.0");
        assert!(e.assumed);
        assert!(e.why.contains("(<=2.3.2.post1)"), "{}", e.why);
    }

    #[test]
    fn xformers_compiles_only_from_source() {
        let e = one("xformers==0.0.28.post3");
        assert!(!e.assumed, "{}", e.why);
        assert!(e.why.contains("extensions not assumed"), "{}", e.why);
        let e = one("git+https://github.com/facebookresearch/xformers.git@main#egg=xformers");
        assert!(e.assumed, "{}", e.why);
        assert!(e.why.contains("builds from source (`git+https://github.com/facebookresearch/xformers.git@main#egg=xformers`)"), "{}", e.why);
        let e = one("-e git+https://github.com/facebookresearch/xformers.git#egg=xformers");
        assert!(e.assumed, "{}", e.why);
    }

    #[test]
    fn deepspeed_compiles_at_first_use_when_not_at_install() {
        let e = one("deepspeed==0.16.5");
        assert!(e.assumed);
        assert!(
            e.why
                .contains("at first use (JIT) unless DS_BUILD_OPS=1 or DS_BUILD_FUSED_ADAM=1 pre-builds it"),
            "{}",
            e.why
        );
    }

    #[test]
    fn apex_compiles_only_when_its_options_ask() {
        let e = one("apex @ git+https://github.com/NVIDIA/apex");
        assert!(!e.assumed, "{}", e.why);
        assert!(e.why.contains("only when APEX_CUDA_EXT=1"), "{}", e.why);
        assert!(e.why.contains("give --extensions"), "{}", e.why);
        let e =
            one("apex @ git+https://github.com/NVIDIA/apex --config-settings \"--build-option=--cuda_ext\"");
        assert!(e.assumed, "{}", e.why);
        assert!(e.why.contains("with `--cuda_ext`"), "{}", e.why);
        assert!(
            e.why.contains("nvcc of exactly torch's CUDA version needed"),
            "{}",
            e.why
        );
        assert_eq!(e.nvcc_match, NvccMatch::MajorMinor);
        let e = one("-e git+https://github.com/NVIDIA/apex#egg=apex --global-option=--xentropy");
        assert!(e.assumed, "{}", e.why);
    }

    #[test]
    fn pyproject_dependencies_and_groups_are_matched() {
        let db = Db::embedded().expect("the embedded database loads");
        let needs = parse_pyproject(
            "pyproject.toml",
            "[project]\nname = \"x\"\ndependencies = [\"torch\", \"causal_conv1d>=1.4\"]\n\n[dependency-groups]\ngpu = [\"Mamba_SSM\"]\n",
        )
        .expect("valid pyproject");
        let all = implied(&db.packages, &db.python, &needs.requirements);
        let got: Vec<(&str, &str, bool)> = all
            .iter()
            .map(|e| (e.package.as_str(), e.origin.as_str(), e.assumed))
            .collect();
        assert_eq!(
            got,
            [
                ("causal-conv1d", "pyproject.toml: project.dependencies[1]", true),
                ("mamba-ssm", "pyproject.toml: dependency-groups.gpu[0]", true),
            ]
        );
    }
}
