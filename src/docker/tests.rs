//! [`build`] and [`pull`] on the fake Engine: what is tagged when, what a failure says,
//! and that digests are checked and credentials never shown.

use super::fake::Fake;
use super::*;
use crate::credentials::CredentialSource;
use crate::deadline::Deadline;

fn r(s: &str) -> Reference {
    Reference::parse(s).unwrap()
}

fn dl() -> Deadline {
    Deadline::new(std::time::Duration::from_secs(60), false)
}

fn line(s: &str) -> Progress {
    Progress::Build(format!("{s}\n"))
}

#[test]
fn a_successful_build_is_tagged_after_its_last_step() {
    let fake = Fake {
        build_events: vec![line("Step 1/2 : FROM base"), line("Step 2/2 : RUN true")],
        ..Fake::default()
    };
    let mut seen = 0;
    let built = build(&fake, Vec::new(), &r("gpuenv-test/app:1"), &mut |_| seen += 1).unwrap();
    assert_eq!(built.image_id, "sha256:built");
    assert_eq!(built.tag, "gpuenv-test/app:1");
    assert_eq!(built.size, Some(1234));
    assert_eq!(built.steps, Some(2));
    assert_eq!(seen, 2);
    let calls = fake.calls.borrow();
    assert_eq!(calls[0], "build");
    assert_eq!(calls[1], "tag sha256:built gpuenv-test/app:1");
}

#[test]
fn a_failed_step_reports_its_output_and_tags_nothing() {
    let fake = Fake {
        build_events: vec![
            line("Step 1/3 : FROM base"),
            line(" ---> abc"),
            line("Step 2/3 : RUN pip install nothing-such"),
            Progress::Build("ERROR: No matching distribution\nfound for nothing-such\n".into()),
            line("The command '/bin/sh -c pip install nothing-such' returned a non-zero code: 1"),
        ],
        build_result: Some(Err(DockerError::BuildFailed {
            step: None,
            message: "The command '/bin/sh -c pip install nothing-such' returned a non-zero code: 1".into(),
            output: Vec::new(),
        })),
        ..Fake::default()
    };
    let e = build(&fake, Vec::new(), &r("gpuenv-test/app:1"), &mut |_| {}).unwrap_err();
    let DockerError::BuildFailed { step, output, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(step.as_deref(), Some("step 2/3 `RUN pip install nothing-such`"));
    assert_eq!(
        output,
        &["ERROR: No matching distribution", "found for nothing-such"]
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("the build failed at step 2/3 `RUN pip install nothing-such`: The command"),
        "{msg}"
    );
    assert!(msg.contains("\n  | ERROR: No matching distribution"), "{msg}");
    assert!(
        fake.calls.borrow().iter().all(|c| !c.starts_with("tag")),
        "{:?}",
        fake.calls.borrow()
    );
}

/// A fake daemon holding images, each built on the second of its pair.
fn with_images(of: &[(&str, &str)], fake: Fake) -> Fake {
    Fake {
        images: std::cell::RefCell::new(
            of.iter()
                .map(|(id, _)| {
                    let details = ImageDetails {
                        id: format!("sha256:{id}"),
                        ..ImageDetails::default()
                    };
                    (id.to_string(), details)
                })
                .collect(),
        ),
        parents: of
            .iter()
            .map(|(id, parent)| (id.to_string(), format!("sha256:{parent}")))
            .collect(),
        ..fake
    }
}

#[test]
fn an_interrupted_build_removes_its_step_container_and_what_it_committed() {
    let fake = with_images(
        &[
            ("1111aaaa", "0123abcd"),
            ("2222bbbb", "1111aaaa"),
            ("3333cccc", "2222bbbb"),
            ("9999eeee", "0123abcd"),
        ],
        Fake {
            build_events: vec![
                line("Step 1/5 : FROM base"),
                line(" ---> 0123abcd"),
                line("Step 2/5 : RUN cached"),
                line(" ---> Using cache"),
                line(" ---> 1111aaaa"),
                line("Step 3/5 : RUN made"),
                line(" ---> Running in c0ffee01"),
                // A step's output naming an image it did not make is not taken for its own.
                line(" ---> 9999eeee"),
                line("Removing intermediate container c0ffee01"),
                line(" ---> 2222bbbb"),
                line("Step 4/5 : ENV A=1"),
                line(" ---> Running in c0ffee02"),
                line("Removing intermediate container c0ffee02"),
                line(" ---> 3333cccc"),
                line("Step 5/5 : RUN sleep 600"),
                line(" ---> Running in c0ffee03"),
                line(" ---> 1111aaaa"),
            ],
            build_result: Some(Err(DockerError::Interrupted(crate::interrupt::Signal::Terminate))),
            ..Fake::default()
        },
    );
    let e = build(&fake, Vec::new(), &r("gpuenv-test/app:1"), &mut |_| {}).unwrap_err();
    assert_eq!(e, DockerError::Interrupted(crate::interrupt::Signal::Terminate));
    let calls = fake.calls.borrow();
    // The running step's container, then the images this build made, newest first, each
    // one alone; not the cached one, the base, or what the output named; nothing tagged.
    // The last step's output named the cached image: it was not built on step 4's.
    assert_eq!(
        calls[1..],
        [
            "remove_container c0ffee03",
            "inspect 1111aaaa",
            "parent 1111aaaa",
            "inspect 3333cccc",
            "parent 3333cccc",
            "remove_one 3333cccc",
            "inspect 2222bbbb",
            "parent 2222bbbb",
            "remove_one 2222bbbb",
        ],
        "{calls:?}"
    );
    let left = fake.images.borrow();
    assert!(left.contains_key("1111aaaa") && left.contains_key("9999eeee"));
}

#[test]
fn an_interrupted_build_says_what_it_could_not_remove() {
    let fake = Fake {
        build_events: vec![
            line("Step 1/2 : FROM base"),
            line(" ---> 0123abcd"),
            line("Step 2/2 : RUN sleep 600"),
            line(" ---> Running in c0ffee02"),
        ],
        build_result: Some(Err(DockerError::Interrupted(crate::interrupt::Signal::Interrupt))),
        remove_error: Some(DockerError::Api("busy".into())),
        ..Fake::default()
    };
    let e = build(&fake, Vec::new(), &r("gpuenv-test/app:1"), &mut |_| {}).unwrap_err();
    assert_eq!(
        e.to_string(),
        "stopped by SIGINT; could not remove what gpuenv had made in the Docker daemon: \
         the step's container c0ffee02 (the Docker daemon refused: busy)"
    );
}

#[test]
fn an_interrupted_build_made_only_of_cached_steps_removes_nothing_it_did_not_make() {
    let fake = Fake {
        build_events: vec![
            line("Step 1/2 : FROM base"),
            line(" ---> 0123abcd"),
            line("Step 2/2 : RUN cached"),
            line(" ---> Using cache"),
            line(" ---> 1111aaaa"),
        ],
        build_result: Some(Err(DockerError::Interrupted(crate::interrupt::Signal::Interrupt))),
        ..Fake::default()
    };
    build(&fake, Vec::new(), &r("gpuenv-test/app:1"), &mut |_| {}).unwrap_err();
    assert_eq!(fake.calls.borrow()[1..], [] as [&str; 0]);
}

#[test]
fn an_empty_reason_says_the_daemon_gave_none() {
    let e = classify(bollard::errors::Error::DockerResponseServerError {
        status_code: 500,
        message: " ".into(),
    });
    assert_eq!(
        e.to_string(),
        "the Docker daemon refused: the daemon gave no reason (HTTP 500)"
    );
    let e = classify(bollard::errors::Error::DockerStreamError { error: String::new() });
    assert_eq!(
        e.to_string(),
        "the Docker daemon refused: the daemon gave no reason"
    );
    let e = DockerError::BuildFailed {
        step: Some("step 2/3 `RUN x`".into()),
        message: String::new(),
        output: Vec::new(),
    };
    assert_eq!(
        e.to_string(),
        "the build failed at step 2/3 `RUN x`: the daemon gave no reason"
    );
    let e = DockerError::Registry {
        image: "a:1".into(),
        fault: registry_fault(""),
        detail: String::new(),
    };
    assert_eq!(
        e.to_string(),
        "cannot pull `a:1`: the pull failed (the daemon gave no reason)"
    );
}

const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

#[test]
fn a_pull_is_verified_against_the_digest_the_registry_announced() {
    let fake = Fake {
        announced: Some(Ok(D1.into())),
        pulled_digest: Some(D1.into()),
        ..Fake::default()
    };
    let mut layers = Vec::new();
    let p = pull(
        &fake,
        &r("127.0.0.1:5555/gpuenv-test/x:1"),
        None,
        &dl(),
        &None,
        &mut |e| layers.push(e),
    )
    .unwrap();
    assert_eq!(p.digest, D1);
    assert_eq!(p.image_id, "sha256:pulled");
    assert_eq!(p.downloaded_layers, 1);
    assert_eq!(layers.len(), 3);
    assert_eq!(
        fake.calls.borrow()[0],
        "registry_digest 127.0.0.1:5555/gpuenv-test/x:1"
    );
}

#[test]
fn a_digest_mismatch_untags_what_was_pulled() {
    let fake = Fake {
        announced: Some(Ok(D1.into())),
        pulled_digest: Some(D2.into()),
        ..Fake::default()
    };
    let e = pull(&fake, &r("gpuenv-test/x:1"), None, &dl(), &None, &mut |_| {}).unwrap_err();
    assert!(
        matches!(&e, DockerError::DigestMismatch { announced, pulled, .. } if announced == D1 && pulled == D2),
        "{e:?}"
    );
    assert!(
        fake.calls
            .borrow()
            .contains(&"remove gpuenv-test/x:1".to_string())
    );
    assert!(fake.images.borrow().get("gpuenv-test/x:1").is_none());
    // The stream agreeing but the daemon holding another manifest is a mismatch too.
    let fake = Fake {
        announced: Some(Ok(D1.into())),
        pulled_digest: None,
        held_digest: Some(D2.into()),
        ..Fake::default()
    };
    assert!(matches!(
        pull(&fake, &r("gpuenv-test/x:1"), None, &dl(), &None, &mut |_| {}),
        Err(DockerError::DigestMismatch { .. })
    ));
}

#[test]
fn a_pull_by_digest_checks_that_digest_without_asking_the_registry() {
    let fake = Fake {
        pulled_digest: Some(D1.into()),
        ..Fake::default()
    };
    let p = pull(
        &fake,
        &r(&format!("gpuenv-test/x@{D1}")),
        None,
        &dl(),
        &None,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(p.digest, D1);
    assert!(
        fake.calls
            .borrow()
            .iter()
            .all(|c| !c.starts_with("registry_digest"))
    );
}

fn downloading(id: &str, current: u64, total: Option<u64>) -> Progress {
    Progress::Layer {
        id: id.into(),
        status: "Downloading".into(),
        current: Some(current),
        total,
    }
}

#[test]
fn a_pull_is_stopped_when_a_layer_grows_past_its_declared_size() {
    let layer = format!("sha256:{}", "ab".repeat(32));
    let declared: DeclaredSizes = Some([(layer.clone(), 1000)].into_iter().collect());
    let events = |current: u64, total: Option<u64>| Fake {
        announced: Some(Ok(D1.into())),
        pulled_digest: Some(D1.into()),
        pull_events: Some(vec![
            downloading("abababababab", 500, Some(1000)),
            downloading("abababababab", current, total),
            Progress::Layer {
                id: "abababababab".into(),
                status: "Pull complete".into(),
                current: None,
                total: None,
            },
        ]),
        ..Fake::default()
    };
    // Exactly the declared size: a pull like any other.
    let fake = events(1000, Some(1000));
    let p = pull(&fake, &r("r.io/a:1"), None, &dl(), &declared, &mut |_| {}).unwrap();
    assert_eq!(p.downloaded_layers, 1);

    // One byte more, with or without a total (a chunked answer): stopped there.
    for total in [Some(1000), None] {
        let fake = events(1001, total);
        let mut seen = 0;
        let e = pull(&fake, &r("r.io/a:1"), None, &dl(), &declared, &mut |_| seen += 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stopped pulling `r.io/a:1`: the registry sent 1001 bytes of layer abababababab, more than the 1000 bytes the manifest declares; the daemon's pull was cancelled"
        );
        assert_eq!(seen, 2, "no event after the one that broke the bound");
        assert!(fake.images.borrow().is_empty(), "nothing pulled, nothing tagged");
    }
    // A `Content-Length` above the declared size is stopped before the bytes come.
    let fake = events(600, Some(5_000_000));
    let e = pull(&fake, &r("r.io/a:1"), None, &dl(), &declared, &mut |_| {}).unwrap_err();
    assert!(
        e.to_string()
            .contains("the registry announced 5000000 bytes of layer abababababab, more than the 1000 bytes"),
        "{e}"
    );
    // A layer the manifest does not list.
    let fake = Fake {
        announced: Some(Ok(D1.into())),
        pull_events: Some(vec![downloading("cdcdcdcdcdcd", 1, Some(10))]),
        ..Fake::default()
    };
    let e = pull(&fake, &r("r.io/a:1"), None, &dl(), &declared, &mut |_| {}).unwrap_err();
    assert!(
        matches!(&e, DockerError::PullUnbounded { layer, .. } if layer == "cdcdcdcdcdcd"),
        "{e:?}"
    );
    // Without the manifest, the size the registry announces to the daemon bounds it, and a
    // download with no size at all is not let run.
    let fake = events(1001, Some(1000));
    assert!(matches!(
        pull(&fake, &r("r.io/a:1"), None, &dl(), &None, &mut |_| {}),
        Err(DockerError::PullOversized { declared: 1000, .. })
    ));
    let fake = events(1001, None);
    let e = pull(&fake, &r("r.io/a:1"), None, &dl(), &None, &mut |_| {}).unwrap_err();
    assert!(
        e.to_string()
            .contains("whose size the registry does not announce"),
        "{e}"
    );
    assert_eq!(short_id(&layer), "abababababab");
}

#[test]
fn registry_failures_never_show_the_password() {
    let creds = Credentials::new("ci", "pa55-w0rd-long", "r.io", CredentialSource::Environment);
    let fake = Fake {
        announced: Some(Ok(D1.into())),
        pull_error: Some(DockerError::Registry {
            image: "r.io/a:1".into(),
            fault: RegistryFault::Unauthorized,
            detail: "refused ci:pa55-w0rd-long".into(),
        }),
        ..Fake::default()
    };
    let e = pull(&fake, &r("r.io/a:1"), Some(&creds), &dl(), &None, &mut |_| {}).unwrap_err();
    let msg = e.to_string();
    assert!(!msg.contains("pa55"), "{msg}");
    assert!(msg.contains("authentication required"), "{msg}");
}

#[test]
fn registry_faults_are_told_from_the_daemons_words() {
    for (msg, fault) in [
        (
            "Head \"http://127.0.0.1:5601/v2/a/manifests/1\": no basic auth credentials",
            RegistryFault::Unauthorized,
        ),
        (
            "unauthorized: authentication required",
            RegistryFault::Unauthorized,
        ),
        (
            "pull access denied for x, repository does not exist",
            RegistryFault::Unauthorized,
        ),
        (
            "error parsing HTTP 404 response body: unexpected end of JSON input: \"\"",
            RegistryFault::NotFound,
        ),
        ("manifest unknown: manifest unknown", RegistryFault::NotFound),
        ("unknown blob", RegistryFault::NotFound),
        (
            "received unexpected HTTP status: 500 Internal Server Error",
            RegistryFault::ServerError,
        ),
        (
            "dial tcp 127.0.0.1:1: connect: connection refused",
            RegistryFault::Unreachable,
        ),
        (&format!("manifest for a@{D1} is odd"), RegistryFault::Other),
        ("blob sha256:ab401cd50 bad", RegistryFault::Other),
    ] {
        assert_eq!(registry_fault(msg), fault, "{msg}");
    }
}
