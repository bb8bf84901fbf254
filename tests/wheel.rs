//! The Python wheel, as users get it: `pip install gpuenv`, `pipx install gpuenv`, `uvx gpuenv`.
//!
//! Each test builds the wheel the way a release does (`scripts/wheel-tools build`: maturin's
//! binary bindings, a release build linked by zig against glibc 2.17), then installs it with
//! no package index, runs it, or reads its binary. The first build takes minutes (a release
//! build with fat LTO and one codegen unit, in `target/wheel/`); after that cargo finds
//! nothing to do unless the sources changed, and a test's build is the wheel's zip alone.
//!
//! The tools (maturin, zig, pipx, uv) come from PyPI into `target/wheel-tools/venv`, the
//! first time; without python3's venv module or PyPI the tests fail and say which is
//! missing: they never skip.
//!
//! Why the ELF is read here, not by `objdump` or `readelf`: those may be missing on a fresh
//! machine, and the question is precise: the highest `GLIBC_x.y` a needed symbol version
//! names (`.gnu.version_r`), and the libraries the loader must find (`DT_NEEDED`).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use object::read::elf::{ElfFile64, FileHeader};
use object::{Endianness, Object, ObjectSymbol, elf};

/// The newest glibc the wheel's binary may need: manylinux2014's, CentOS 7's.
const GLIBC_FLOOR: (u32, u32) = (2, 17);

/// The libraries a manylinux2014 wheel may need from the system (PEP 599), and the loader.
const MANYLINUX2014_LIBS: &[&str] = &[
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "libm.so.6",
    "libdl.so.2",
    "librt.so.1",
    "libc.so.6",
    "libnsl.so.1",
    "libutil.so.1",
    "libpthread.so.0",
    "libresolv.so.2",
    "libX11.so.6",
    "libXext.so.6",
    "libXrender.so.1",
    "libICE.so.6",
    "libSM.so.6",
    "libGL.so.1",
    "libgobject-2.0.so.0",
    "libgthread-2.0.so.0",
    "libglib-2.0.so.0",
    "ld-linux-x86-64.so.2",
];

/// The name NVML is loaded by at run time (nvml-wrapper's default; `src/host/nvml.rs`).
const NVML_LIB: &str = "libnvidia-ml.so.1";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn host_facts() -> String {
    root()
        .join("tests/fixtures/hosts/single-a100/host.json")
        .to_str()
        .expect("the repository path is UTF-8")
        .to_string()
}

/// A scratch folder under the target directory, removed when dropped.
fn scratch(prefix: &str) -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    fs_err::create_dir_all(base).expect("create the target's tmp folder");
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .expect("create a scratch folder")
}

/// Runs `cmd` and returns what it printed; fails with the command, its status and the end of
/// its output when it did not succeed.
fn ok(cmd: &mut Command) -> Output {
    let shown = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    assert!(
        out.status.success(),
        "{shown} failed ({})\n--- stdout (end)\n{}\n--- stderr (end)\n{}",
        out.status,
        tail(&out.stdout),
        tail(&out.stderr)
    );
    out
}

/// The last 80 lines of a program's output: enough to show why a build failed.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(80)..].join("\n")
}

/// A command with no `GPUENV_*` of the caller's environment (an override would change the
/// answers compared below), outside any active venv. pip's own settings stay: a mirror set
/// with `PIP_INDEX_URL` is how the tools reach PyPI on some machines, and each install of
/// the wheel turns the index off itself.
fn clean(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GPUENV_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env_remove("VIRTUAL_ENV")
        .env_remove("PYTHONPATH")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_INPUT", "1");
    cmd
}

/// The tools' venv, made ready by `scripts/wheel-tools`.
fn tools() -> PathBuf {
    root().join("target/wheel-tools/venv/bin")
}

/// A freshly built wheel, in a scratch folder of its own.
struct Wheel {
    _dir: tempfile::TempDir,
    file: PathBuf,
}

/// Builds the wheel as a release does, into a new scratch folder.
fn build() -> Wheel {
    let dir = scratch("wheel-");
    ok(clean(root().join("scripts/wheel-tools"))
        .arg("build")
        .arg(dir.path())
        .current_dir(root()));
    let wheels: Vec<PathBuf> = fs_err::read_dir(dir.path())
        .expect("read the wheel's folder")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension() == Some(OsStr::new("whl")))
        .collect();
    assert_eq!(
        wheels.len(),
        1,
        "one wheel expected in {}: {wheels:?}",
        dir.path().display()
    );
    Wheel {
        file: wheels[0].clone(),
        _dir: dir,
    }
}

/// The wheel's files, unpacked with Python's zipfile (the tools' Python: pip needs one anyway).
fn unpack(wheel: &Wheel) -> tempfile::TempDir {
    let dir = scratch("wheel-unpacked-");
    ok(clean(tools().join("python"))
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel.file)
        .arg(dir.path()));
    dir
}

/// The binary inside the wheel, as bytes.
fn wheel_binary(wheel: &Wheel) -> Vec<u8> {
    let dir = unpack(wheel);
    let version = env!("CARGO_PKG_VERSION");
    let path = dir.path().join(format!("gpuenv-{version}.data/scripts/gpuenv"));
    fs_err::read(&path).expect("the wheel holds the gpuenv binary as a script")
}

/// What a binary asks of the dynamic loader.
#[derive(Debug, Default)]
struct Needs {
    /// `DT_NEEDED`: the shared libraries it links.
    libraries: BTreeSet<String>,
    /// `.gnu.version_r`: (library, version name) for every symbol version it needs.
    versions: BTreeSet<(String, String)>,
    /// Undefined dynamic symbols: what it takes from those libraries.
    imports: BTreeSet<String>,
}

/// Reads the dynamic section, the needed versions and the imported symbols of an x86_64
/// ELF executable.
fn needs(bytes: &[u8]) -> Needs {
    let file = ElfFile64::<Endianness>::parse(bytes).expect("an ELF64 executable");
    assert_eq!(
        file.elf_header().e_machine(file.endian()),
        elf::EM_X86_64,
        "an x86_64 binary"
    );
    let endian = file.endian();
    let sections = file.elf_section_table();
    let mut out = Needs::default();
    let dynamic = sections
        .dynamic_table(endian, bytes)
        .expect("a readable dynamic section");
    for entry in dynamic.iter().filter(|d| d.tag == elf::DT_NEEDED) {
        let name = dynamic.string(entry).expect("a DT_NEEDED name");
        out.libraries.insert(String::from_utf8_lossy(name).into_owned());
    }
    if let Some((verneeds, link)) = sections
        .gnu_verneed(endian, bytes)
        .expect("a readable .gnu.version_r")
    {
        let strings = sections.strings(endian, bytes, link).expect("its string table");
        for need in verneeds {
            let (need, auxes) = need.expect("a verneed entry");
            let library = need.file(endian, strings).expect("the verneed's library");
            for aux in auxes {
                let aux = aux.expect("a vernaux entry");
                let version = aux.name(endian, strings).expect("the vernaux's name");
                out.versions.insert((
                    String::from_utf8_lossy(library).into_owned(),
                    String::from_utf8_lossy(version).into_owned(),
                ));
            }
        }
    }
    for symbol in file.dynamic_symbols().filter(|s| s.is_undefined()) {
        if let Ok(name) = symbol.name() {
            out.imports.insert(name.to_string());
        }
    }
    out
}

/// `GLIBC_2.17` as (2, 17); `None` for any other name (`GLIBC_PRIVATE`, `GCC_3.0`).
fn glibc_version(name: &str) -> Option<(u32, u32)> {
    let (major, minor) = name.strip_prefix("GLIBC_")?.split_once('.')?;
    // `GLIBC_2.2.5` (x86_64's first) reads as 2.2.
    let minor = minor.split('.').next()?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The wheel's tags, from its file name and its `WHEEL` file, and what its `METADATA` says.
#[test]
fn wheel_is_manylinux2014_x86_64_at_the_crates_version() {
    let wheel = build();
    let version = env!("CARGO_PKG_VERSION");
    let name = wheel
        .file
        .file_name()
        .and_then(OsStr::to_str)
        .expect("a UTF-8 file name");
    // name-version-python-abi-platforms.whl, platforms dot-separated (PEP 427, PEP 600).
    let stem = name.strip_suffix(".whl").expect("a .whl file");
    let parts: Vec<&str> = stem.split('-').collect();
    assert_eq!(parts.len(), 5, "{name}");
    assert_eq!(&parts[..4], ["gpuenv", version, "py3", "none"], "{name}");
    let platforms: BTreeSet<&str> = parts[4].split('.').collect();
    assert_eq!(
        platforms,
        BTreeSet::from(["manylinux2014_x86_64", "manylinux_2_17_x86_64"]),
        "{name}"
    );

    let dir = unpack(&wheel);
    let info = dir.path().join(format!("gpuenv-{version}.dist-info"));
    let tags: BTreeSet<String> = fs_err::read_to_string(info.join("WHEEL"))
        .expect("the WHEEL file")
        .lines()
        .filter_map(|l| l.strip_prefix("Tag: "))
        .map(str::to_string)
        .collect();
    assert_eq!(
        tags,
        BTreeSet::from([
            "py3-none-manylinux2014_x86_64".to_string(),
            "py3-none-manylinux_2_17_x86_64".to_string()
        ])
    );
    let metadata = fs_err::read_to_string(info.join("METADATA")).expect("the METADATA file");
    let headers: Vec<&str> = metadata.lines().take_while(|l| !l.is_empty()).collect();
    for expected in [
        "Name: gpuenv".to_string(),
        format!("Version: {version}"),
        "License-Expression: Apache-2.0".to_string(),
        "Requires-Python: >=3.8".to_string(),
    ] {
        assert!(
            headers.contains(&expected.as_str()),
            "no `{expected}` in\n{}",
            headers.join("\n")
        );
    }
    // Binary bindings: the wheel runs no Python and needs no other package.
    assert!(
        !headers.iter().any(|h| h.starts_with("Requires-Dist:")),
        "{}",
        headers.join("\n")
    );
}

/// `pip install` into a fresh venv, from the wheel file alone, and the three commands a
/// new user runs first; each answer must be the one the tested debug binary gives.
#[test]
fn pip_installs_the_wheel_into_a_fresh_venv_and_it_answers() {
    let wheel = build();
    let venv = scratch("wheel-venv-");
    ok(clean("python3").args(["-m", "venv"]).arg(venv.path()));
    ok(clean(venv.path().join("bin/pip"))
        .args(["install", "--no-index"])
        .arg(&wheel.file));
    let bin = venv.path().join("bin/gpuenv");
    // The venv's `gpuenv` is the binary itself, not a Python launcher.
    let head = fs_err::read(&bin).expect("the venv's gpuenv");
    assert!(
        head.starts_with(b"\x7fELF"),
        "{} is not an ELF binary",
        bin.display()
    );
    answers_as_the_tested_binary(&|| clean(&bin));
}

/// `pipx install` and `uvx`, the other two ways the README gives, from the wheel file with
/// no index, each in folders of its own.
#[test]
fn pipx_and_uvx_run_the_wheel() {
    let wheel = build();
    let pipx = scratch("wheel-pipx-");
    ok(clean(tools().join("pipx"))
        .arg("install")
        .arg(&wheel.file)
        .env("PIP_NO_INDEX", "1")
        .env("PIPX_HOME", pipx.path().join("home"))
        .env("PIPX_BIN_DIR", pipx.path().join("bin"))
        .env("PIPX_MAN_DIR", pipx.path().join("man")));
    let bin = pipx.path().join("bin/gpuenv");
    answers_as_the_tested_binary(&|| clean(&bin));

    // `uvx --from WHEEL gpuenv ARGS`: uv makes a throwaway environment in its cache and runs
    // the binary from it, the way `uvx gpuenv doctor` does from PyPI.
    let uv = scratch("wheel-uvx-");
    answers_as_the_tested_binary(&|| {
        let mut cmd = clean(tools().join("uvx"));
        cmd.args(["--offline", "--no-index", "--from"])
            .arg(&wheel.file)
            .arg("gpuenv")
            .env("UV_CACHE_DIR", uv.path().join("cache"))
            .env("UV_TOOL_DIR", uv.path().join("tools"))
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("UV_NO_CONFIG", "1");
        cmd
    });
}

/// The wheel's binary needs nothing newer than glibc 2.17 and only libraries every Linux has.
#[test]
fn wheel_binary_needs_glibc_2_17_at_most() {
    let needs = needs(&wheel_binary(&build()));
    let glibc: BTreeSet<(u32, u32)> = needs
        .versions
        .iter()
        .filter_map(|(_, v)| glibc_version(v))
        .collect();
    // Nothing found would pass the bound below and prove nothing.
    let highest = *glibc
        .last()
        .unwrap_or_else(|| panic!("no GLIBC version needed: {needs:#?}"));
    eprintln!(
        "highest glibc symbol version the wheel's binary needs: {}.{}",
        highest.0, highest.1
    );
    assert!(
        highest <= GLIBC_FLOOR,
        "the binary needs GLIBC_{}.{}, newer than {}.{}:\n{:#?}",
        highest.0,
        highest.1,
        GLIBC_FLOOR.0,
        GLIBC_FLOOR.1,
        needs.versions
    );
    let odd: Vec<&(String, String)> = needs
        .versions
        .iter()
        .filter(|(_, v)| v.starts_with("GLIBC_") && glibc_version(v).is_none())
        .collect();
    assert!(odd.is_empty(), "glibc versions that are not a release: {odd:?}");
    let foreign: Vec<&String> = needs
        .libraries
        .iter()
        .filter(|l| !MANYLINUX2014_LIBS.contains(&l.as_str()))
        .collect();
    assert!(
        foreign.is_empty(),
        "libraries outside manylinux2014's: {foreign:?}"
    );
    assert!(needs.libraries.contains("libc.so.6"), "{:?}", needs.libraries);
}

/// NVML stays loaded at run time: not linked (a host without the driver must still run
/// gpuenv), but asked for by name through `dlopen`.
#[test]
fn wheel_binary_loads_nvml_at_run_time() {
    let bytes = wheel_binary(&build());
    let needs = needs(&bytes);
    assert!(
        !needs.libraries.iter().any(|l| l.contains("nvidia")),
        "the binary links NVIDIA's libraries: {:?}",
        needs.libraries
    );
    assert!(
        needs.imports.contains("dlopen"),
        "no dlopen among {:?}",
        needs.imports
    );
    assert!(
        bytes.windows(NVML_LIB.len()).any(|w| w == NVML_LIB.as_bytes()),
        "the binary does not name {NVML_LIB}"
    );
}

/// The reader itself, on the binary running this test (linked by the system's toolchain):
/// it finds libc and at least x86_64's first glibc version, so an empty answer above is a
/// broken binary, not a blind reader.
#[test]
fn elf_reader_finds_what_a_native_binary_needs() {
    let me = fs_err::read("/proc/self/exe").expect("this test's binary");
    let needs = needs(&me);
    assert!(needs.libraries.contains("libc.so.6"), "{needs:#?}");
    assert!(
        needs
            .versions
            .iter()
            .any(|(lib, v)| lib == "libc.so.6" && glibc_version(v).is_some_and(|g| g >= (2, 2))),
        "{needs:#?}"
    );
    assert_eq!(glibc_version("GLIBC_2.2.5"), Some((2, 2)));
    assert_eq!(glibc_version("GLIBC_2.34"), Some((2, 34)));
    assert_eq!(glibc_version("GLIBC_PRIVATE"), None);
    assert_eq!(glibc_version("GCC_3.0"), None);
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// `--version`, a pre-order `query` and `doctor` on a recorded host, through `gpuenv` (a
/// command that runs the installed binary, given the arguments after it): the same answers
/// as the debug binary the other tests check.
fn answers_as_the_tested_binary(gpuenv: &dyn Fn() -> Command) {
    let tested = || clean(env!("CARGO_BIN_EXE_gpuenv"));
    let version = ok(gpuenv().arg("--version"));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("gpuenv {}", env!("CARGO_PKG_VERSION"))
    );

    let query = ["query", "--gpu", "H100 SXM", "--driver", "550.54.14", "--json"];
    let out = json(&ok(gpuenv().args(query)));
    assert_eq!(out["verdict"], "compatible", "{out:#}");
    assert!(out["stacks"][0]["torch"].is_string(), "{out:#}");
    assert_eq!(
        out,
        json(&ok(tested().args(query))),
        "`query` differs from the tested binary"
    );

    let facts = host_facts();
    let doctor = ["doctor", "--host-facts", facts.as_str(), "--json"];
    let out = json(&ok(gpuenv().args(doctor)));
    assert_eq!(out["host"]["driver"]["value"], "535.104.05", "{out:#}");
    assert_eq!(
        out,
        json(&ok(tested().args(doctor))),
        "`doctor` differs from the tested binary"
    );
}
