//! Stopping a comparison on SIGINT or SIGTERM. The first signal only sets
//! a flag, which every wait of the run checks; the run then returns
//! [`Error::Interrupted`], and unwinding stops the relays it started and
//! removes its scratch directory (their `Drop`s: the one way a run stops).
//! The first signal also restores the default action, so a second one ends
//! the process at once.

use std::fs::File;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::Error;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catches the next SIGINT and SIGTERM (not restarting the call they
/// interrupt, so a blocking wait such as the benchmark lock's ends too).
pub fn catch() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe; the struct is zeroed, then every field set.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether a caught signal asked the run to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// [`Error::Interrupted`] once a caught signal asked the run to stop.
pub fn check() -> Result<(), Error> {
    if interrupted() {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// Waits for `child`; when a caught signal asks the run to stop, kills it
/// and returns [`Error::Interrupted`].
pub fn wait(child: &mut Child) -> Result<ExitStatus, Error> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `cmd` to its end with its output (stdout and stderr) in `log`;
/// whether it ran and succeeded. A command that cannot start counts as
/// failed, so the caller reports it like any other failure.
pub fn run_logged(cmd: &mut Command, log: File) -> Result<bool, Error> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn();
    Ok(match child {
        Ok(mut child) => wait(&mut child)?.success(),
        Err(_) => false,
    })
}
