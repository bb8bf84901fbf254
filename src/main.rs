//! The `gpuenv` binary: parse arguments, run, map the outcome to an exit code.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;
use gpuenv::cli::{self, Cli, Exit};
use gpuenv::report;

fn main() -> ExitCode {
    let args = match Cli::try_parse() {
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
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = cli::run(args, &mut out);
    let flushed = out.flush();
    match result {
        Ok(exit) => {
            if let Err(e) = flushed {
                if e.kind() != io::ErrorKind::BrokenPipe {
                    let _ = report::error(&mut io::stderr().lock(), &[format!("cannot write output: {e}")]);
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
            let _ = report::error(&mut io::stderr().lock(), &lines);
            ExitCode::from(code)
        }
    }
}
