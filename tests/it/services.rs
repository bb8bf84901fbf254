//! How the container tests report services they cannot have: `support::provision` runs
//! `scripts/test-services` and turns its failure into a message for people, and the script
//! itself says what failed and what to do.

use std::path::Path;

use crate::support::{provision, root};

/// A stand-in provisioning script, run by `/bin/sh` (a file just written and executed
/// directly can fail with "text file busy" while another test forks).
fn fake(dir: &Path, body: &str) -> String {
    let path = dir.join("test-services");
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

#[test]
fn a_failed_provisioning_is_told_in_the_scripts_own_words_and_how_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let script = fake(
        dir.path(),
        "echo 'test-services: error: the Docker daemon is not reachable' >&2\n\
         echo 'test-services:   fix: start it: sudo systemctl start docker' >&2\n\
         exit 3\n",
    );
    let why = provision(Path::new("/bin/sh"), &[&script], &[]).unwrap_err();
    assert!(
        why.contains("test-services: error: the Docker daemon is not reachable"),
        "{why}"
    );
    assert!(
        why.contains("fix: start it: sudo systemctl start docker"),
        "{why}"
    );
    assert!(why.contains("(it exited with status 3)"), "{why}");
    assert!(why.contains("do not skip"), "{why}");
    // Never Rust's debug form of a status (`Ok(ExitStatus(unix_wait_status(256)))`).
    assert!(
        !why.contains("ExitStatus") && !why.contains("unix_wait_status"),
        "{why}"
    );
}

#[test]
fn a_provisioning_killed_or_silent_or_missing_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let killed = fake(dir.path(), "kill -9 $$\n");
    let why = provision(Path::new("/bin/sh"), &[&killed], &[]).unwrap_err();
    assert!(why.contains("(it was killed by signal 9)"), "{why}");
    assert!(why.contains("(it printed nothing)"), "{why}");

    let missing = dir.path().join("no-such-script");
    let why = provision(&missing, &[], &[]).unwrap_err();
    assert!(why.contains("could not be run"), "{why}");
    assert!(why.contains(&missing.display().to_string()), "{why}");

    let fine = fake(dir.path(), "echo 'test-services: ready' >&2\n");
    assert_eq!(provision(Path::new("/bin/sh"), &[&fine], &[]), Ok(()));
}

#[test]
fn test_services_without_a_docker_daemon_fails_with_the_reason_and_the_fix() {
    // A socket nobody listens on: the daemon check comes first, so nothing is installed
    // or started.
    let dir = tempfile::tempdir().unwrap();
    let host = format!("unix://{}", dir.path().join("docker.sock").display());
    let why = provision(
        &root().join("scripts/test-services"),
        &[],
        &[("DOCKER_HOST", &host)],
    )
    .unwrap_err();
    assert!(why.contains("error: the Docker daemon is not reachable"), "{why}");
    assert!(
        why.contains("fix: install Docker Engine (https://docs.docker.com/engine/install/)"),
        "{why}"
    );
    assert!(why.contains("(it exited with status 1)"), "{why}");
    assert!(
        why.contains("`scripts/test-services` alone repeats the check"),
        "{why}"
    );
}
