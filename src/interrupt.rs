//! Ctrl-C and SIGTERM while gpuenv holds something in the Docker daemon.
//!
//! Owns: catching SIGINT and SIGTERM from the moment the first [`Hold`] is taken (a
//! container created to read an image, a build under way), telling the work that holds
//! something to stop ([`cancelled`], [`requested`]), and ending the process with the
//! signal's exit code ([`Signal::exit_code`]) once nothing is held any more. Must not:
//! talk to the daemon (whoever took a hold removes what it made, then lets go), or print.
//!
//! Why a thread of its own: a signal must be acted on wherever the main thread is (in a
//! request to the daemon, or between two), and the work that holds a container is the one
//! that knows how to remove it. So the listener only flags the signal and wakes the
//! requests in flight ([`cancelled`] resolves, the request is dropped, its error
//! unwinds, and the container is removed on the way out); then it waits until every hold
//! is let go, at most [`GRACE`], and ends the process itself if the main thread has not.
//! A second signal ends the process at once.
//!
//! Before the first hold, the signals act as the system's defaults. After it, a signal
//! while nothing is held ends the process at once with the same exit code.

use std::sync::{Condvar, Mutex, MutexGuard, Once, PoisonError};
use std::time::Duration;

use futures_util::future::{Either, select};
use tokio::sync::Notify;

/// How long a signal waits for the holders to remove what they made before the process
/// ends anyway (a daemon that hangs must not keep an interrupted run alive).
pub const GRACE: Duration = Duration::from_secs(30);

/// How long the listener leaves the main thread, once every hold was let go, to end the
/// run itself (with its message) before ending it from here.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// A signal that asks gpuenv to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Signal {
    /// The exit code of a run it ended: 128 + the signal's number, as a shell reports a
    /// process the signal killed (130 for SIGINT, 143 for SIGTERM).
    pub fn exit_code(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }

    /// `SIGINT` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

struct State {
    holds: usize,
    signal: Option<Signal>,
}

static STATE: Mutex<State> = Mutex::new(State {
    holds: 0,
    signal: None,
});
/// Signalled whenever a hold is let go.
static RELEASED: Condvar = Condvar::new();
/// Wakes the requests waiting in [`cancelled`].
static WAKE: Notify = Notify::const_new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Something gpuenv made in the daemon and must remove before it ends: while one is held,
/// a signal waits for it to be let go (at most [`GRACE`]). Let go on drop.
#[derive(Debug)]
pub struct Hold(());

impl Drop for Hold {
    fn drop(&mut self) {
        let mut s = state();
        s.holds = s.holds.saturating_sub(1);
        RELEASED.notify_all();
    }
}

/// Takes a hold before making something in the daemon; the signal instead when one has
/// already asked gpuenv to stop (then nothing must be made).
pub fn hold() -> Result<Hold, Signal> {
    install();
    let mut s = state();
    if let Some(sig) = s.signal {
        return Err(sig);
    }
    s.holds += 1;
    Ok(Hold(()))
}

/// The signal that asked gpuenv to stop, if one did.
pub fn requested() -> Option<Signal> {
    state().signal
}

/// Resolves when a signal asks gpuenv to stop (at once when one already did). Raced
/// against a request to the daemon, it ends the request; it never resolves before the
/// first [`hold`], since no signal is caught until then.
pub async fn cancelled() -> Signal {
    loop {
        let mut notified = std::pin::pin!(WAKE.notified());
        // Registered before the check, so a signal between the two is not missed.
        notified.as_mut().enable();
        if let Some(sig) = requested() {
            return sig;
        }
        notified.await;
    }
}

/// Starts the listener once: registers for SIGINT and SIGTERM (replacing their default
/// actions) and handles them on a thread of its own. Where registering fails, the
/// signals keep their defaults: a run they end leaves its container, which its labels let
/// anyone find (see `docker`).
fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use tokio::signal::unix::{SignalKind, signal};
        // The listener registers the handlers itself and says when it has: `hold` returns
        // only then, so a signal right after it is caught.
        let (registered, ready) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("gpuenv-signals".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_io().build() else {
                    return;
                };
                let handlers = {
                    let _entered = rt.enter();
                    signal(SignalKind::interrupt()).and_then(|i| Ok((i, signal(SignalKind::terminate())?)))
                };
                let Ok((mut int, mut term)) = handlers else {
                    return;
                };
                let _ = registered.send(());
                rt.block_on(async {
                    loop {
                        let sig = match select(std::pin::pin!(int.recv()), std::pin::pin!(term.recv())).await
                        {
                            Either::Left((Some(()), _)) => Signal::Interrupt,
                            Either::Right((Some(()), _)) => Signal::Terminate,
                            // The runtime is shutting down: nothing more will come.
                            _ => return,
                        };
                        on_signal(sig);
                    }
                });
            });
        if spawned.is_ok() {
            // An error means the listener gave up before registering: defaults stay.
            let _ = ready.recv();
        }
    });
}

/// What a signal does: the first flags itself and wakes the requests in flight, then the
/// run ends once nothing is held (at most [`GRACE`] later); a second ends it at once.
fn on_signal(sig: Signal) {
    let mut s = state();
    if s.signal.is_some() {
        std::process::exit(i32::from(sig.exit_code()));
    }
    s.signal = Some(sig);
    WAKE.notify_waiters();
    if s.holds == 0 {
        std::process::exit(i32::from(sig.exit_code()));
    }
    drop(s);
    // Waiting here would keep a second signal from being heard: another thread waits.
    let waiter = std::thread::Builder::new().spawn(move || {
        let s = state();
        let (s, _) = RELEASED
            .wait_timeout_while(s, GRACE, |s| s.holds > 0)
            .unwrap_or_else(PoisonError::into_inner);
        drop(s);
        std::thread::sleep(EXIT_WAIT);
        std::process::exit(i32::from(sig.exit_code()));
    });
    if waiter.is_err() {
        std::process::exit(i32::from(sig.exit_code()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_those_a_shell_reports_for_the_signal() {
        assert_eq!(Signal::Interrupt.exit_code(), 130);
        assert_eq!(Signal::Terminate.exit_code(), 143);
        assert_eq!(Signal::Terminate.to_string(), "SIGTERM");
    }
}
