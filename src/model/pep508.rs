//! PEP 508 requirements through `pep508_rs`, made safe for text from outside.
//!
//! Owns: the one way a requirement line from a project file, a wheel's metadata or an
//! image's `METADATA` becomes a `pep508_rs::Requirement`, and the guard in front of it.
//! Must not: decide what a requirement means for a stack (that is `project`).
//!
//! Traps this module exists for:
//! - pep508_rs 0.9.2 panics, instead of returning an error, on names ending in `-`, `_`
//!   or `.` before more text, on `'linux' ~= sys_platform` (poisoning its global marker
//!   interner for the rest of the process) and on non-ASCII text in a marker. All three
//!   were found by tests or fuzzing; [`guard`] turns each into an error.
//! - Its own `VerbatimUrl` expands `${VAR}` from the process environment: [`DirectUrl`]
//!   keeps a URL as written, so no secret of the environment can reach a report.

use std::str::FromStr;

use pep508_rs::Requirement;

/// The longest requirement handed to the parser (torch's longest `Requires-Dist` is about
/// 150 characters; a direct URL a few hundred).
const MAX_REQUIREMENT: usize = 4096;

/// The URL of a `name @ URL` requirement, as written. pep508_rs's own `VerbatimUrl`
/// expands `${VAR}` from the process environment, which a pure parser must not read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DirectUrl(String);

impl DirectUrl {
    /// The URL as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for DirectUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("expected a URL with a scheme after `@` (`https://...`, `file:///...`), found `{0}`")]
pub struct NotAUrl(String);

impl pep508_rs::Pep508Url for DirectUrl {
    type Err = NotAUrl;

    fn parse_url(url: &str, _working_dir: Option<&std::path::Path>) -> Result<Self, NotAUrl> {
        // As packaging does: a URL has a scheme; a bare path is not one.
        let scheme_end = url.find(':').unwrap_or(0);
        let scheme = &url[..scheme_end];
        let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if valid {
            Ok(DirectUrl(url.to_string()))
        } else {
            Err(NotAUrl(url.to_string()))
        }
    }
}

/// Rejects what pep508_rs 0.9.2 would panic on instead of reporting: a project or extra
/// name that ends in `-`, `_` or `.` and is followed by more text (`torch- ==2`,
/// `torch[cuda-]`).
fn check_names(requirement: &str) -> Result<(), String> {
    fn name_run(text: &str) -> &str {
        let end = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
            .unwrap_or(text.len());
        &text[..end]
    }
    fn bad(run: &str) -> bool {
        run.starts_with(|c: char| c.is_ascii_alphanumeric()) && run.ends_with(['.', '-', '_'])
    }
    let text = requirement.trim_start();
    let name = name_run(text);
    if bad(name) {
        return Err(format!(
            "the project name `{name}` must end with a letter or a digit"
        ));
    }
    let Some(extras) = text[name.len()..].trim_start().strip_prefix('[') else {
        return Ok(());
    };
    let extras = extras.split(']').next().unwrap_or(extras);
    for extra in extras.split(',') {
        let run = name_run(extra.trim_start());
        if bad(run) {
            return Err(format!(
                "the extra name `{run}` must end with a letter or a digit"
            ));
        }
    }
    Ok(())
}

/// The marker variables that hold strings, not versions, as pep508_rs spells them
/// (including the deprecated dotted forms).
const STRING_MARKERS: &[&str] = &[
    "implementation_name",
    "os_name",
    "os.name",
    "platform_machine",
    "platform.machine",
    "platform_python_implementation",
    "platform.python_implementation",
    "python_implementation",
    "platform_release",
    "platform_system",
    "platform_version",
    "platform.version",
    "sys_platform",
    "sys.platform",
];

/// Rejects `'linux' ~= sys_platform`, on which pep508_rs 0.9.2 panics while holding its
/// global marker interner, poisoning it for every later marker in the process. pip cannot
/// evaluate it either (`~=` is a version comparison).
pub fn check_marker(text: &str) -> Result<(), String> {
    check_ascii(text)?;
    let mut rest = text;
    while let Some(open) = rest.find(['\'', '"']) {
        let quote = if rest[open..].starts_with('"') { '"' } else { '\'' };
        let inside = &rest[open + 1..];
        let Some(close) = inside.find(quote) else {
            // Unterminated: pep508 reports it.
            return Ok(());
        };
        let literal = &inside[..close];
        rest = &inside[close + 1..];
        let Some(after_operator) = rest.trim_start().strip_prefix("~=") else {
            continue;
        };
        // The variable as pep508 reads it: up to whitespace or an operator character.
        let key_text = after_operator.trim_start();
        let key_end = key_text
            .find(|c: char| c.is_whitespace() || matches!(c, '>' | '=' | '<' | '!' | '~' | ')'))
            .unwrap_or(key_text.len());
        let key = &key_text[..key_end];
        if STRING_MARKERS.contains(&key) {
            return Err(format!(
                "`{quote}{literal}{quote} ~= {key}` compares versions, but `{key}` is a string \
                 (use `==`, `!=`, `in` or `not in`)"
            ));
        }
    }
    Ok(())
}

/// Rejects the requirement texts pep508_rs 0.9.2 would panic on; every caller of pep508
/// on text from outside (project files, wheel metadata, an image's `METADATA`) goes
/// through [`parse_requirement`], which calls this first.
pub fn guard(requirement: &str) -> Result<(), String> {
    check_ascii(requirement)?;
    if requirement.len() > MAX_REQUIREMENT {
        return Err(format!(
            "a requirement of {} characters; at most {MAX_REQUIREMENT} are read",
            requirement.len()
        ));
    }
    check_names(requirement)?;
    if let Some((_, marker)) = requirement.split_once(';') {
        check_marker(marker)?;
    }
    Ok(())
}

/// pep508_rs slices its input at byte offsets that can fall inside a multi-byte
/// character (a marker holding `é`; found by fuzzing). Names, versions and markers of real
/// requirements are ASCII.
fn check_ascii(text: &str) -> Result<(), String> {
    match text.char_indices().find(|(_, c)| !c.is_ascii()) {
        Some((at, c)) => Err(format!(
            "`{c}` (at character {}) is not ASCII; requirements are written in ASCII",
            text[..at].chars().count() + 1
        )),
        None => Ok(()),
    }
}

/// Parses one PEP 508 requirement; the error is pep508's reason on one line, or the guard's.
pub fn parse_requirement(text: &str) -> Result<Requirement<DirectUrl>, String> {
    guard(text)?;
    Requirement::<DirectUrl>::from_str(text).map_err(|e| reason(&e))
}

/// The CPython minors a marker is tried against when the interpreter is not known.
const ANY_PYTHON: &[&str] = &["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"];

/// Whether a requirement's marker (the text after `;`) may hold for CPython on Linux on
/// `machine` (`x86_64`, `aarch64`, as PEP 508 names machines): for `python` (`3.11`) when
/// it is known, else for any CPython from 3.8 to 3.15. No marker holds; `extra == ...`
/// never does, since no extra is asked for. A marker that does not parse is taken to hold:
/// a requirement is not dropped on a guess.
pub fn linux_marker_may_hold(marker: Option<&str>, machine: &str, python: Option<&str>) -> bool {
    let Some(marker) = marker.map(str::trim).filter(|m| !m.is_empty()) else {
        return true;
    };
    let Ok(requirement) = parse_requirement(&format!("x ; {marker}")) else {
        return true;
    };
    let pythons: Vec<&str> = match python {
        Some(p) => vec![p],
        None => ANY_PYTHON.to_vec(),
    };
    pythons.iter().any(|python| {
        let Some(environment) = linux_cpython(python, machine) else {
            return true;
        };
        requirement.marker.evaluate(&environment, &[])
    })
}

/// The marker environment of CPython `python` (`3.11`, `3.11.4`) on Linux `machine`
/// (`x86_64`, `aarch64`): the one platform gpuenv answers for. A `major.minor` Python is
/// taken to be `major.minor.0`.
pub fn linux_cpython(python: &str, machine: &str) -> Option<pep508_rs::MarkerEnvironment> {
    let python = python.trim();
    let version = python.parse::<pep508_rs::pep440_rs::Version>().ok()?;
    let release = version.release();
    let major = *release.first()?;
    let minor = release.get(1).copied().unwrap_or(0);
    let short = format!("{major}.{minor}");
    let full = if release.len() >= 3 {
        python.to_string()
    } else {
        format!("{short}.0")
    };
    pep508_rs::MarkerEnvironment::try_from(pep508_rs::MarkerEnvironmentBuilder {
        implementation_name: "cpython",
        implementation_version: &full,
        os_name: "posix",
        platform_machine: machine,
        platform_python_implementation: "CPython",
        platform_release: "",
        platform_system: "Linux",
        platform_version: "",
        python_full_version: &full,
        python_version: &short,
        sys_platform: "linux",
    })
    .ok()
}

/// pep508's reason without its drawn underline (whose rendering can also assert on odd
/// spans), on one line, with the character it points at.
pub fn reason<T: pep508_rs::Pep508Url>(error: &pep508_rs::Pep508Error<T>) -> String {
    let message = first_line(&error.message.to_string());
    match error.input.get(..error.start) {
        Some(before) => format!("{message} (at character {})", before.chars().count() + 1),
        None => message,
    }
}

/// PEP 503 name normalization: lowercase, each run of `-`, `_`, `.` becomes one `-`
/// (`Flash_Attn` and `flash.attn` are the project `flash-attn`).
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_separator = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_separator {
                out.push('-');
            }
            in_separator = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_separator = false;
        }
    }
    out
}

/// The first non-empty line of a multi-line message, without a trailing colon.
pub fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .trim_end_matches(':')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_that_crash_pep508_rs_are_errors() {
        // pep508_rs 0.9.2 panics on each of these (the first two found by fuzzing).
        for (line, says) in [
            (
                "nvidia-cudnn-)cu13==9.19.0.56",
                "`nvidia-cudnn-` must end with a letter or a digit",
            ),
            ("nvidia-cudnn-cu12[cublas_]==1", "`cublas_` must end"),
            ("nvidia-x[a, b.]", "`b.` must end"),
            ("nvidia-x._ ==1", "`nvidia-x._` must end"),
            (
                "nvidia-nccl-cu12 ==2.20.5 ; platform_system == \"Linux\"\u{fffd} and platform_machine == \"x86_64\"",
                "is not ASCII",
            ),
            ("torch ; 'linux' ~= sys_platform", "compares versions"),
        ] {
            let e = parse_requirement(line).expect_err(line);
            assert!(e.contains(says), "{line}: {e}");
        }
        assert!(parse_requirement(&format!("torch=={}", "1".repeat(5000))).is_err());
        assert!(check_marker("sys_platform == 'lin\u{e9}'").is_err());
    }

    #[test]
    fn markers_of_torch_pins_on_linux_machines() {
        let x86 = "platform_system == \"Linux\" and platform_machine == \"x86_64\"";
        assert!(linux_marker_may_hold(Some(x86), "x86_64", Some("3.11")));
        assert!(!linux_marker_may_hold(Some(x86), "aarch64", Some("3.11")));
        assert!(linux_marker_may_hold(
            Some("platform_machine != 'aarch64'"),
            "x86_64",
            None
        ));
        assert!(!linux_marker_may_hold(
            Some("platform_machine != 'aarch64'"),
            "aarch64",
            None
        ));
        assert!(!linux_marker_may_hold(
            Some("platform_system == 'Windows'"),
            "x86_64",
            None
        ));
        assert!(!linux_marker_may_hold(
            Some("extra == 'opt-einsum'"),
            "x86_64",
            None
        ));
        // Python: the one given, else any.
        let old = "python_version < '3.13'";
        assert!(linux_marker_may_hold(Some(old), "x86_64", Some("3.12")));
        assert!(!linux_marker_may_hold(Some(old), "x86_64", Some("3.13.1")));
        assert!(linux_marker_may_hold(Some(old), "x86_64", None));
        // Nothing to evaluate, or nothing that parses: it holds.
        assert!(linux_marker_may_hold(None, "aarch64", None));
        assert!(linux_marker_may_hold(Some(" "), "aarch64", None));
        assert!(linux_marker_may_hold(
            Some("platform_machine =="),
            "aarch64",
            None
        ));
        assert!(linux_marker_may_hold(Some(x86), "aarch64", Some("three")));
    }

    #[test]
    fn real_requirements_parse() {
        let r = parse_requirement(
            "nvidia-cudnn-cu12==9.1.0.70 ; platform_system == \"Linux\" and platform_machine == \"x86_64\"",
        )
        .unwrap();
        assert_eq!(r.name.as_ref(), "nvidia-cudnn-cu12");
        // At the very end, pep508 reports a bad name itself, as an error.
        assert!(parse_requirement("torch-").is_err());
    }

    #[test]
    fn urls_are_kept_as_written() {
        // The variable is not set: an expanding parser would have dropped it.
        let r = parse_requirement("torch @ https://example.org/${GPUENV_NOT_SET}/torch.whl").unwrap();
        match r.version_or_url {
            Some(pep508_rs::VersionOrUrl::Url(url)) => {
                assert_eq!(url.to_string(), "https://example.org/${GPUENV_NOT_SET}/torch.whl")
            }
            other => panic!("{other:?}"),
        }
        assert!(
            parse_requirement("torch @ ./local/torch.whl")
                .unwrap_err()
                .contains("with a scheme")
        );
    }
}
