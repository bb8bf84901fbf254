//! Running the real `gpuenv` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path below `tests/fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}

/// What a run of `gpuenv` gave.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `gpuenv ARGS` in `dir` with a clean `GPUENV_*` environment.
pub fn gpuenv_in(dir: &Path, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuenv"));
    cmd.args(args).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("GPUENV_") {
            cmd.env_remove(k);
        }
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run gpuenv");
    Run {
        code: status.code().expect("gpuenv exits with a code"),
        stdout: String::from_utf8(stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(stderr).expect("stderr is UTF-8"),
    }
}

/// Runs `gpuenv ARGS` from the repository root.
pub fn gpuenv(args: &[&str]) -> Run {
    gpuenv_in(&root(), args)
}

/// Parses stdout as JSON.
pub fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", run.stdout))
}
