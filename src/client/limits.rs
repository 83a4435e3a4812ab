//! The client's own limits: file descriptors and local ports. A load tester
//! that runs out of them must say so, not blame the server.

// rlim_t is u64 on Linux but not on every unix: the casts are for portability.
#![allow(clippy::unnecessary_cast)]

/// The process's open-file limit after [`raise_nofile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    pub soft: u64,
    pub hard: u64,
    /// The soft limit before it was raised, if it was.
    pub raised_from: Option<u64>,
}

/// File descriptors the process needs besides one socket per request in
/// flight (runtime, terminal, reports, the built-in simulator's listener).
pub const RESERVED_FDS: u64 = 64;

/// The limit as [`raise_nofile`] last left it, for messages.
static RECORDED: std::sync::Mutex<Option<FdLimit>> = std::sync::Mutex::new(None);

/// The open-file limit as the last [`raise_nofile`] left it (None before).
pub fn recorded() -> Option<FdLimit> {
    *RECORDED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Raises the soft open-file limit to the hard one, as load testers do.
/// None where the limit cannot be read.
pub fn raise_nofile() -> Option<FdLimit> {
    let l = raise();
    *RECORDED.lock().unwrap_or_else(|e| e.into_inner()) = l;
    l
}

fn raise() -> Option<FdLimit> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return None;
        }
        let before = lim.rlim_cur as u64;
        let hard = lim.rlim_max as u64;
        if lim.rlim_cur < lim.rlim_max {
            // macOS refuses more than OPEN_MAX with an infinite hard limit.
            #[cfg(target_os = "macos")]
            let target = lim.rlim_max.min(libc::OPEN_MAX as libc::rlim_t);
            #[cfg(not(target_os = "macos"))]
            let target = lim.rlim_max;
            let raised = libc::rlimit {
                rlim_cur: target,
                rlim_max: lim.rlim_max,
            };
            // SAFETY: setrlimit reads the struct we pass.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                return Some(FdLimit {
                    soft: target as u64,
                    hard,
                    raised_from: Some(before),
                });
            }
        }
        Some(FdLimit {
            soft: before,
            hard,
            raised_from: None,
        })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// A warning when `planned` requests in flight need more sockets than the
/// open-file limit leaves.
pub fn concurrency_warning(planned: u64, limit: &FdLimit) -> Option<String> {
    let room = limit.soft.saturating_sub(RESERVED_FDS);
    (planned > room).then(|| {
        format!(
            "up to {planned} requests in flight need as many sockets, but the open-file limit is {} (hard limit {}): requests beyond about {room} will fail as client_limit. Raise it (ulimit -n) or lower --max-concurrency",
            limit.soft, limit.hard
        )
    })
}

/// The OS error means the client ran out of something of its own: file
/// descriptors (EMFILE, ENFILE) or local addresses/ports (EADDRNOTAVAIL).
pub fn is_client_limit(code: i32) -> bool {
    #[cfg(unix)]
    {
        code == libc::EMFILE
            || code == libc::ENFILE
            || code == libc::EADDRNOTAVAIL
            || code == libc::ENOBUFS
    }
    #[cfg(not(unix))]
    {
        let _ = code;
        false
    }
}

/// What the client-limit error means, for the message.
pub fn hint(code: i32) -> &'static str {
    #[cfg(unix)]
    {
        if code == libc::EMFILE || code == libc::ENFILE {
            return "client limit: llmsweep is out of file descriptors, one a request in flight; raise the hard open-file limit (ulimit -Hn) or lower the rate or --max-concurrency";
        }
        if code == libc::EADDRNOTAVAIL {
            return "client limit: no free local port; too many connections to one address (ephemeral ports exhausted)";
        }
    }
    let _ = code;
    "client limit: the machine running llmsweep is out of network resources"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_fires_only_past_the_limit() {
        let l = FdLimit {
            soft: 1024,
            hard: 4096,
            raised_from: None,
        };
        assert_eq!(concurrency_warning(512, &l), None);
        let w = concurrency_warning(2000, &l).unwrap();
        assert!(w.contains("1024") && w.contains("client_limit"), "{w}");
    }

    #[cfg(unix)]
    #[test]
    fn raising_never_lowers_the_limit() {
        let l = raise_nofile().expect("getrlimit works on unix");
        assert!(l.soft <= l.hard || l.hard == libc::RLIM_INFINITY as u64);
        if let Some(before) = l.raised_from {
            assert!(l.soft >= before);
        }
        // Idempotent: a second call finds nothing to raise.
        let again = raise_nofile().unwrap();
        assert_eq!(again.soft, l.soft);
    }

    #[cfg(unix)]
    #[test]
    fn client_limit_codes() {
        assert!(is_client_limit(libc::EMFILE));
        assert!(is_client_limit(libc::EADDRNOTAVAIL));
        assert!(!is_client_limit(libc::ECONNREFUSED));
        assert!(hint(libc::EMFILE).contains("ulimit"));
    }
}
