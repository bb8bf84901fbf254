//! What gpuenv does for a person at a terminal: shell completions and the manual page
//! (generated from the clap definitions), colour (`--color`, `NO_COLOR`, `CLICOLOR_FORCE`,
//! a terminal or not), and progress on stderr (bars on a terminal, nothing that a pipe
//! sees). Terminals are real: a pseudo-terminal opened for the run. None of these tests
//! needs the Docker daemon.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;

use clap::CommandFactory;

use super::image_build::*;
use crate::support::{Replay, fixture, gpuenv, gpuenv_command, gpuenv_env, root, run};

/// Every command name a user can type after `gpuenv`.
fn top_names() -> Vec<String> {
    let cli = gpuenv::cli::Cli::command();
    let names: Vec<String> = cli.get_subcommands().map(|c| c.get_name().to_string()).collect();
    assert!(names.len() > 10, "{names:?}");
    names
}

/// Every command name a user can type after `gpuenv`, and after a command that has
/// commands of its own (`gpuenv db`, `gpuenv fleet`).
fn command_names() -> Vec<String> {
    let cli = gpuenv::cli::Cli::command();
    let mut names = top_names();
    assert!(cli.find_subcommand("db").is_some(), "a db command");
    for c in cli.get_subcommands() {
        names.extend(c.get_subcommands().map(|s| s.get_name().to_string()));
    }
    names
}

/// Whether a program is on PATH.
fn have(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn completions_are_generated_for_every_shell_and_name_every_command() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = gpuenv(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stderr.is_empty(), "{shell}: {}", run.stderr);
        for name in command_names() {
            assert!(run.stdout.contains(&name), "{shell}'s script lacks `{name}`");
        }
        // The global flags.
        for flag in ["color", "db"] {
            assert!(run.stdout.contains(flag), "{shell}'s script lacks `{flag}`");
        }
        std::fs::write(dir.path().join(shell), &run.stdout).unwrap();
    }
    let script = |shell: &str| dir.path().join(shell);

    // bash is always here: the script parses, and it completes.
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(script("bash"))
        .output()
        .unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    let complete = |words: &str| {
        let line = format!(
            "source '{}'; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             _gpuenv gpuenv \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script("bash").display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &line])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(complete("gpuenv que").trim(), "query");
    let db = complete("gpuenv db ''");
    for sub in ["lint", "list", "stats", "refresh"] {
        assert!(
            db.lines().any(|l| l == sub),
            "`gpuenv db ` offers no `{sub}`: {db}"
        );
    }
    let colors = complete("gpuenv --color ''");
    assert_eq!(
        colors.split_whitespace().collect::<Vec<_>>(),
        ["auto", "always", "never"]
    );

    // zsh and fish parse their scripts where they are installed (`apt-get install zsh
    // fish`); elsewhere what each must start with is checked.
    if have("zsh") {
        let out = std::process::Command::new("zsh")
            .arg("-n")
            .arg(script("zsh"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let zsh = std::fs::read_to_string(script("zsh")).unwrap();
    assert!(zsh.starts_with("#compdef gpuenv\n"), "{zsh}");
    if have("fish") {
        let out = std::process::Command::new("fish")
            .arg("--no-execute")
            .arg(script("fish"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let fish = std::fs::read_to_string(script("fish")).unwrap();
    assert!(fish.contains("\ncomplete -c gpuenv -n "), "{fish}");
    assert!(fish.contains("-l color -d"), "{fish}");
}

/// The sections of a page and the names it must mention.
fn assert_page(roff: &str, title: &str, mentions: &[String]) {
    for line in [format!(".TH {title} 1"), ".SH NAME".into(), ".SH SYNOPSIS".into()] {
        assert!(
            roff.lines().any(|l| l.starts_with(&line)),
            "no `{line}` in:\n{roff}"
        );
    }
    for name in mentions {
        assert!(roff.contains(name.as_str()), "`{name}` is not in:\n{roff}");
    }
}

#[test]
fn the_man_page_lists_every_command_and_renders() {
    let run = gpuenv(&["man"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut mentions = top_names();
    mentions.push("\\-\\-color".into());
    assert_page(&run.stdout, "gpuenv", &mentions);
    assert!(run.stdout.contains(".SH SUBCOMMANDS"), "{}", run.stdout);

    // groff renders it without a warning where it is installed (Debian's `groff-base`,
    // which `man-db` brings); elsewhere the roff structure above is what is checked.
    if have("groff") {
        let mut child = std::process::Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(run.stdout.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "groff warns");
        let text = std::process::Command::new("sh")
            .args(["-c", "groff -man -Tutf8 -P-c | sed 's/.\\x08//g'"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(run.stdout.as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        let text = String::from_utf8(text.stdout).unwrap();
        assert!(text.contains("NAME"), "{text}");
        assert!(text.contains("--color <WHEN>"), "{text}");
        for name in top_names() {
            assert!(
                text.contains(&name),
                "`{name}` is not on the rendered page:\n{text}"
            );
        }
    }

    // --out: a page per command, written again over the same pages; never through a link.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    for _ in 0..2 {
        let run = gpuenv(&["man", "--out", out.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stdout.lines().all(|l| l.starts_with("wrote ")),
            "{}",
            run.stdout
        );
    }
    let page = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
    assert_page(&page("gpuenv.1"), "gpuenv", &top_names());
    assert_page(
        &page("gpuenv-db.1"),
        "gpuenv-db",
        &["refresh".into(), "lint".into()],
    );
    assert_page(&page("gpuenv-query.1"), "gpuenv-query", &["\\-\\-gpu".into()]);
    assert_page(
        &page("gpuenv-db-refresh.1"),
        "gpuenv-db-refresh",
        &["\\-\\-pypi".into()],
    );
    let pages = std::fs::read_dir(&out).unwrap().count();
    assert_eq!(pages, command_names().len() + 1, "gpuenv.1 and one per command");
    std::fs::remove_file(out.join("gpuenv.1")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), out.join("gpuenv.1")).unwrap();
    let run = gpuenv(&["man", "--out", out.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(!dir.path().join("elsewhere").exists());
}

/// gpuenv's own styles, as `--color always` writes them around its marks.
const RED_BOLD: &str = "\u{1b}[1m\u{1b}[31m";
const GREEN: &str = "\u{1b}[32m";
const RESET: &str = "\u{1b}[0m";
const STYLES: [&str; 7] = [
    "\u{1b}[1m\u{1b}[31m",
    "\u{1b}[32m",
    "\u{1b}[33m",
    "\u{1b}[36m",
    "\u{1b}[1m\u{1b}[35m",
    "\u{1b}[2m",
    "\u{1b}[0m",
];

fn order_check(color: &[&str], env: &[(&str, &str)]) -> crate::support::Run {
    let host = fixture("hosts/single-a100/host.json");
    let mut args: Vec<&str> = color.to_vec();
    args.extend([
        "check",
        "--host-facts",
        host.to_str().unwrap(),
        "--expect-gpus",
        "8",
        "--expect-cpus",
        "2",
    ]);
    let run = gpuenv_env(&root(), &args, env);
    assert_eq!(run.code, 1, "{}", run.stderr);
    run
}

#[test]
fn color_always_styles_the_marks_and_nothing_else_changes() {
    let plain = order_check(&[], &[]);
    assert!(!plain.stdout.contains('\u{1b}'), "piped output has no colour");
    assert!(
        plain.stdout.contains("  FAIL  gpus: expected 8, found 1\n"),
        "{}",
        plain.stdout
    );

    let coloured = order_check(&["--color", "always"], &[]);
    let out = &coloured.stdout;
    assert!(
        out.contains(&format!("  {RED_BOLD}FAIL{RESET}  gpus: expected 8, found 1\n")),
        "{out:?}"
    );
    assert!(
        out.contains(&format!("  {GREEN}pass{RESET}  cpus: expected 2, found 32\n")),
        "{out:?}"
    );
    assert!(
        out.contains(&format!("verdict: {GREEN}compatible{RESET} (")),
        "{out:?}"
    );
    assert!(
        out.contains(&format!("    {GREEN}ok{RESET}   gpu-sass:")),
        "{out:?}"
    );
    // Take the styles away and it is the plain report, byte for byte.
    let mut stripped = out.clone();
    for s in STYLES {
        stripped = stripped.replace(s, "");
    }
    assert_eq!(stripped, plain.stdout);

    // No colour: under --color never, and in auto mode with NO_COLOR, even where
    // CLICOLOR_FORCE would force it; CLICOLOR_FORCE alone colours a pipe.
    for (flags, env) in [
        (&["--color", "never"][..], &[("CLICOLOR_FORCE", "1")][..]),
        (
            &["--color", "auto"],
            &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")],
        ),
        (&[], &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")]),
    ] {
        let run = order_check(flags, env);
        assert_eq!(run.stdout, plain.stdout, "{flags:?} {env:?}");
    }
    let forced = order_check(&[], &[("CLICOLOR_FORCE", "1")]);
    assert_eq!(forced.stdout, *out);

    // JSON is never styled.
    let doc = |flags: &[&str]| {
        let mut args = flags.to_vec();
        args.extend(["query", "--gpu", "H100", "--driver", "535", "--json"]);
        gpuenv(&args).stdout
    };
    assert_eq!(doc(&["--color", "always"]), doc(&[]));
}

#[test]
fn stderr_is_coloured_on_its_own_terms_and_usage_errors_follow_the_flag() {
    let show = |flags: &[&str], env: &[(&str, &str)]| {
        let mut args = flags.to_vec();
        args.extend(["show", "gpu", "no-such-gpu"]);
        gpuenv_env(&root(), &args, env)
    };
    let plain = show(&[], &[]);
    assert_eq!(plain.code, 2);
    assert!(plain.stderr.starts_with("error: "), "{}", plain.stderr);
    let coloured = show(&["--color", "always"], &[]);
    assert_eq!(
        coloured.stderr,
        plain
            .stderr
            .replacen("error:", &format!("{RED_BOLD}error:{RESET}"), 1)
    );
    assert!(
        !show(&["--color", "never"], &[("CLICOLOR_FORCE", "1")])
            .stderr
            .contains('\u{1b}')
    );

    // clap's own errors and help follow --color too.
    for args in [
        &["--color", "never", "no-such-command"][..],
        &["--color=never", "query", "--no-such-flag"],
        &["--color", "never", "--help"],
    ] {
        let run = gpuenv_env(&root(), args, &[("CLICOLOR_FORCE", "1")]);
        assert!(
            !run.stderr.contains('\u{1b}') && !run.stdout.contains('\u{1b}'),
            "{args:?}"
        );
    }
    let run = gpuenv_env(&root(), &["--color", "always", "no-such-command"], &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains('\u{1b}'), "{}", run.stderr);
    let run = gpuenv(&["--color", "sometimes", "query"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("sometimes"), "{}", run.stderr);
}

/// Text from a hostile archive, with colour forced: gpuenv's styles are the only escapes,
/// the words of the archive are never styled, and nothing else changes.
#[test]
fn hostile_text_cannot_inject_escapes_or_borrow_a_colour() {
    const HOSTILE: &str = "x\u{1b}[2J\r\nFAKE pass \u{1b}[32mpass\u{1b}[0m \u{1b}]8;;http://evil.example/\u{1b}\\link\u{1b}]8;;\u{1b}\\";
    let os_release = format!(
        "ID=ubuntu\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu {}\"\n",
        HOSTILE.replace("\r\n", " ")
    );
    let files = layer(&[E::File("etc/os-release", os_release.as_bytes())]);
    let env = format!("NVIDIA_REQUIRE_CUDA=cuda>=12.0 {HOSTILE}");
    let c = Config {
        env: vec![&env],
        labels: vec![("com.nvidia.cudnn.version", HOSTILE)],
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("hostile.tar");
    std::fs::write(
        &saved,
        docker_save_legacy("gpuenv-term/hostile:1", &c, &[files], true),
    )
    .unwrap();
    let source = format!("docker-archive:{}", saved.display());
    let verify = |flags: &[&str]| {
        let mut args = flags.to_vec();
        args.extend(["verify", &source, "--expect", "cuda=12.4"]);
        run(&mut gpuenv_command(&root(), &args, &[]))
    };
    let plain = verify(&[]);
    assert_eq!(plain.code, 1, "{}", plain.stderr);
    let coloured = verify(&["--color", "always"]);
    assert_eq!(coloured.code, 1, "{}", coloured.stderr);
    let out = &coloured.stdout;
    assert!(
        out.contains(&format!("verdict: {RED_BOLD}FAIL{RESET}\n")),
        "{out:?}"
    );
    let mut rest = out.clone();
    for s in STYLES {
        rest = rest.replace(s, "");
    }
    assert_eq!(rest, plain.stdout, "the styles are all that differs");
    assert!(
        !rest.chars().any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{rest:?}"
    );
    // The archive's `pass` stays a plain word.
    assert!(out.contains("FAKE pass pass link"), "{out:?}");
    assert!(!out.contains(&format!("{GREEN}pass{RESET} link")), "{out:?}");
}

/// A pseudo-terminal: the master to read what the child writes, the slave to hand it.
fn pty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 160,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two new descriptors into the integers given; the name buffer
    // and terminal settings are not asked for, and the size is read from a valid struct.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by no one else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// What a run with one stream on a terminal gave: the exit code, what the terminal
/// showed (line ends as `\n`), and the other stream, piped.
struct OnTerminal {
    code: i32,
    screen: String,
    piped: String,
}

/// Runs `gpuenv ARGS` with stderr (or stdout) on a terminal and the other stream piped.
fn on_terminal(args: &[&str], stderr_on_terminal: bool, env: &[(&str, &str)]) -> OnTerminal {
    let (master, slave) = pty();
    let mut cmd = gpuenv_command(&root(), args, env);
    cmd.env("TERM", "xterm");
    cmd.stdin(Stdio::null());
    if stderr_on_terminal {
        cmd.stderr(Stdio::from(slave)).stdout(Stdio::piped());
    } else {
        cmd.stdout(Stdio::from(slave)).stderr(Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    // The command keeps its copy of the slave until dropped: then the child holds the only
    // one, and the master reads until it exits (EIO).
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut file = std::fs::File::from(master);
        let mut seen = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match file.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        seen
    });
    let mut piped = String::new();
    if stderr_on_terminal {
        child.stdout.take().unwrap().read_to_string(&mut piped).unwrap();
    } else {
        child.stderr.take().unwrap().read_to_string(&mut piped).unwrap();
    }
    let code = child.wait().unwrap().code().unwrap();
    let screen = String::from_utf8_lossy(&reader.join().unwrap()).replace("\r\n", "\n");
    OnTerminal { code, screen, piped }
}

#[test]
fn marks_are_coloured_on_a_terminal_unless_no_color() {
    let host = fixture("hosts/single-a100/host.json");
    let args = [
        "check",
        "--host-facts",
        host.to_str().unwrap(),
        "--expect-gpus",
        "8",
    ];
    let shown = on_terminal(&args, false, &[]);
    assert_eq!(shown.code, 1, "{}", shown.piped);
    assert!(
        shown.screen.contains(&format!("  {RED_BOLD}FAIL{RESET}  gpus:")),
        "{:?}",
        shown.screen
    );
    let shown = on_terminal(&args, false, &[("NO_COLOR", "1")]);
    assert!(!shown.screen.contains('\u{1b}'), "{:?}", shown.screen);
    assert!(shown.screen.contains("  FAIL  gpus:"), "{}", shown.screen);
    let shown = on_terminal(
        &["--color", "never", args[0], args[1], args[2], args[3], args[4]],
        false,
        &[],
    );
    assert!(!shown.screen.contains('\u{1b}'), "{:?}", shown.screen);
}

fn refresh_args<'a>(url: &'a str, out: &'a Path, json: bool) -> Vec<&'a str> {
    let mut args = vec![
        "db",
        "refresh",
        "--pypi",
        url,
        "--no-pytorch-index",
        "--no-ngc",
        "--no-driver-index",
        "--out",
        out.to_str().unwrap(),
    ];
    if json {
        args.push("--json");
    }
    args
}

#[test]
fn refresh_shows_its_stages_on_a_terminal_and_nothing_in_a_pipe() {
    let server = Replay::start(fixture("upstream"), None);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("proposals");

    let piped = gpuenv(&refresh_args(&server.url, &out, false));
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert_eq!(piped.stderr, "", "a pipe gets no progress");

    let shown = on_terminal(&refresh_args(&server.url, &out, false), true, &[]);
    assert_eq!(shown.code, 0, "{}", shown.screen);
    assert_eq!(shown.piped, piped.stdout, "stdout is the same");
    for stage in [
        "the PyPI page of torch: 1/1 read",
        "the PyPI page of torchvision: 1/1 read",
        "torchaudio's wheel metadata: ",
        "torch's wheel metadata: ",
    ] {
        assert!(shown.screen.contains(stage), "no `{stage}` on:\n{}", shown.screen);
    }
    let total = shown
        .screen
        .split("torch's wheel metadata: ")
        .last()
        .and_then(|s| s.split(" read").next())
        .unwrap_or_default()
        .to_string();
    let (done, of) = total.split_once('/').unwrap_or(("", "?"));
    assert_eq!(done, of, "every release's metadata was read: {total}");

    // --json on a terminal: the document, and no progress.
    let quiet = on_terminal(&refresh_args(&server.url, &out, true), true, &[]);
    assert_eq!(quiet.code, 0, "{}", quiet.screen);
    assert_eq!(quiet.screen, "", "{}", quiet.screen);
    assert!(quiet.piped.starts_with('{'), "{}", quiet.piped);
}

#[test]
fn verify_of_an_archive_counts_its_layers_on_a_terminal_only() {
    let layers: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let name = format!("opt/{i}/data");
            let data = vec![b'x'; 1 << 20];
            layer(&[E::File(&name, &data)])
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("three.tar");
    std::fs::write(
        &saved,
        docker_save_legacy("gpuenv-term/three:1", &Config::default(), &layers, true),
    )
    .unwrap();
    let source = format!("docker-archive:{}", saved.display());
    let piped = gpuenv(&["verify", &source]);
    assert!(piped.code == 0 || piped.code == 1, "{}", piped.stderr);
    assert_eq!(piped.stderr, "");
    let shown = on_terminal(&["verify", &source], true, &[]);
    assert_eq!(shown.code, piped.code, "{}", shown.screen);
    assert_eq!(shown.piped, piped.stdout);
    // The bar is drawn while the layers are read, then cleared before the report.
    assert!(
        shown.screen.contains("reading docker-archive:"),
        "{:?}",
        shown.screen
    );
    let quiet = on_terminal(&["verify", &source, "--json"], true, &[]);
    assert_eq!(quiet.screen, "");
}
