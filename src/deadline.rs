//! Deadlines: how long a whole operation may take, and how long any one wait inside it.
//!
//! Owns: the clock of one command's work against the outside world (a registry, upstream,
//! the daemon's pull, a credential helper) and the words that say which limit ran out.
//! Must not: do any I/O or print.
//!
//! Two limits, because they catch different faults. The **total** (`--timeout`, or a
//! default per command) bounds everything, so a server that trickles one byte a second,
//! which never looks idle, still cannot hold gpuenv past it. The **idle** limit (at most
//! [`IDLE`]) bounds each single wait (a connection, the headers of an answer, the next
//! bytes of a body, the daemon's next progress event), so a server that accepted and went
//! silent is given up in seconds, not at the end of a long total meant for large images.
//! Every wait lasts at most [`Deadline::wait`]: the idle limit, or what is left of the
//! total when less, so no wait can carry the operation past its total.

use std::fmt;
use std::time::{Duration, Instant};

/// The longest any single wait may last: no connection, headers, bytes or progress event
/// for this long means the other side has stalled.
pub const IDLE: Duration = Duration::from_secs(30);

/// The default total of `verify docker://` and `pull`: images of tens of GiB over a
/// rented server's link take minutes, and a stalled transfer is caught by [`IDLE`] long
/// before this.
pub const IMAGE_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// The default total of `db refresh` (three PyPI projects, their wheel metadata, the
/// PyTorch index: about a minute on a good link).
pub const REFRESH_DEADLINE: Duration = Duration::from_secs(10 * 60);

/// The clock of one operation: when it started, its total budget, its idle limit.
#[derive(Debug, Clone)]
pub struct Deadline {
    start: Instant,
    total: Duration,
    idle: Duration,
    /// Whether the user gave the total (`--timeout`) or it is the command's default.
    given: bool,
}

impl Deadline {
    /// A deadline of `total` from now, with the idle limit [`IDLE`] (or `total` when
    /// shorter); `given` says whether the user chose the total (`--timeout`).
    pub fn new(total: Duration, given: bool) -> Deadline {
        Deadline::with_idle(total, IDLE, given)
    }

    /// A deadline of `total` from now whose single waits last at most `idle`.
    pub fn with_idle(total: Duration, idle: Duration, given: bool) -> Deadline {
        Deadline {
            start: Instant::now(),
            total,
            idle: idle.min(total),
            given,
        }
    }

    /// The total budget.
    pub fn total(&self) -> Duration {
        self.total
    }

    /// The idle limit.
    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// What is left of the total (zero once it has run out).
    pub fn remaining(&self) -> Duration {
        self.total.saturating_sub(self.start.elapsed())
    }

    /// Whether the total has run out.
    pub fn expired(&self) -> bool {
        self.remaining().is_zero()
    }

    /// How long the next single wait may last: the idle limit, or what is left of the
    /// total when that is less.
    pub fn wait(&self) -> Duration {
        self.idle.min(self.remaining())
    }

    /// Which limit ended a wait that just timed out: the total when it has run out (or
    /// was about to, within a tenth of a second), else the idle limit.
    pub fn expiry(&self) -> Expiry {
        if self.remaining() <= Duration::from_millis(100) {
            Expiry::Total {
                total: self.total,
                given: self.given,
            }
        } else {
            Expiry::Idle(self.idle)
        }
    }
}

/// Which limit ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Nothing arrived for this long.
    Idle(Duration),
    /// The whole operation's budget ran out.
    Total {
        /// The budget.
        total: Duration,
        /// Given by `--timeout`, or the command's default.
        given: bool,
    },
}

impl fmt::Display for Expiry {
    /// The limit as a phrase for a message: `for 30 s` (idle), `within the 5 s of
    /// --timeout` (total).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expiry::Idle(d) => write!(f, "for {}", Seconds(*d)),
            Expiry::Total { total, given: true } => {
                write!(f, "within the {} of --timeout", Seconds(*total))
            }
            Expiry::Total { total, given: false } => write!(
                f,
                "within the default deadline of {} (--timeout SECONDS changes it)",
                Seconds(*total)
            ),
        }
    }
}

/// A duration as people read it: `0.3 s`, `30 s`, `30 min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.as_secs_f64();
        // To a tenth of a second: what is left of a 4 s deadline reads `4 s`, not `3.99 s`.
        let tenths = (s * 10.0).round() as u64;
        if tenths >= 1200 && tenths % 600 == 0 {
            write!(f, "{} min", tenths / 600)
        } else if tenths >= 100 || tenths % 10 == 0 {
            write!(f, "{} s", (s).round() as u64)
        } else {
            write!(f, "{}.{} s", tenths / 10, tenths % 10)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wait_is_the_idle_limit_or_what_is_left() {
        let d = Deadline::new(Duration::from_secs(3600), false);
        assert_eq!(d.wait(), IDLE);
        assert_eq!(d.expiry(), Expiry::Idle(IDLE));
        let short = Deadline::new(Duration::from_secs(5), true);
        assert_eq!(short.idle(), Duration::from_secs(5));
        assert!(short.wait() <= Duration::from_secs(5));
        let gone = Deadline::new(Duration::ZERO, true);
        assert!(gone.expired());
        assert_eq!(gone.wait(), Duration::ZERO);
        assert_eq!(
            gone.expiry(),
            Expiry::Total {
                total: Duration::ZERO,
                given: true
            }
        );
    }

    #[test]
    fn limits_read_as_sentences() {
        assert_eq!(Expiry::Idle(IDLE).to_string(), "for 30 s");
        assert_eq!(
            Expiry::Total {
                total: Duration::from_secs(5),
                given: true
            }
            .to_string(),
            "within the 5 s of --timeout"
        );
        assert!(
            Expiry::Total {
                total: Duration::from_secs(1800),
                given: false
            }
            .to_string()
            .contains("default deadline of 30 min"),
        );
        assert_eq!(Seconds(Duration::from_millis(300)).to_string(), "0.3 s");
        assert_eq!(Seconds(Duration::from_secs(90)).to_string(), "90 s");
        assert_eq!(Seconds(Duration::from_millis(3990)).to_string(), "4 s");
        assert_eq!(Seconds(Duration::from_millis(1500)).to_string(), "1.5 s");
    }
}
