//! The `gpuenv` binary: parse arguments, run, map the outcome to an exit code.

use std::io::{self, Write};
use std::process::ExitCode;

use gpuenv::cli::{self, Exit};
use gpuenv::report::{self, Styles};

/// A stream as reports write to it, and whether they colour it: `anstream` decides from
/// `--color`, `NO_COLOR`, `CLICOLOR_FORCE` and whether the stream is a terminal. When it
/// says no, the stream is used as it is (nothing is styled, so there is nothing to strip,
/// and every byte, a JSON document's included, goes out unchanged); when yes, through
/// `anstream`'s writer, which passes the styles on (or, on an old Windows console, turns
/// them into console calls).
fn stream<S>(raw: S, choice: anstream::ColorChoice) -> (Box<dyn Write + 'static>, Styles)
where
    S: anstream::stream::RawStream + anstream::stream::AsLockedWrite + 'static,
{
    let auto = anstream::AutoStream::new(raw, choice);
    if auto.current_choice() == anstream::ColorChoice::Never {
        (Box::new(auto.into_inner()), Styles::PLAIN)
    } else {
        (Box::new(auto), Styles::new(true))
    }
}

fn main() -> ExitCode {
    let args = match cli::parse() {
        Ok(a) => a,
        Err(e) => {
            // --help and --version go to stdout and succeed; usage errors are bad input.
            let code = if e.use_stderr() {
                Exit::BadInput.code()
            } else {
                Exit::Ok.code()
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let choice = args.color();
    let (stdout, styles) = stream(io::stdout().lock(), choice);
    let mut out = io::BufWriter::new(stdout);
    let result = cli::run(args, &mut out, styles);
    let flushed = out.flush();
    let (mut stderr, err_styles) = stream(io::stderr().lock(), choice);
    match result {
        Ok(exit) => {
            if let Err(e) = flushed {
                if e.kind() != io::ErrorKind::BrokenPipe {
                    let _ = report::error(&mut stderr, err_styles, &[format!("cannot write output: {e}")]);
                    return ExitCode::from(Exit::Environment.code());
                }
            }
            ExitCode::from(exit.code())
        }
        Err(e) => {
            let code = e.exit().code();
            let lines = match e.lines() {
                Some(lines) => lines,
                None => vec![format!("{:#}", anyhow::Error::new(e))],
            };
            let _ = report::error(&mut stderr, err_styles, &lines);
            ExitCode::from(code)
        }
    }
}
