//! The engine work still running on blocking threads, so that a program can wait for it before it exits.
//!
//! A stream that its reader drops stops at the engine's next check (the next token, or the next batch of the
//! prompt), not at once. If `main` returned in between, the C++ runtime's static destructors (ggml's backend
//! registry, the OpenMP pool) would run under a thread still inside llama.cpp, and the process would die with a
//! segmentation fault after its work was done. [`wait_until_idle`] is what a program calls before it exits.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

static RUNNING: Mutex<usize> = Mutex::new(0);
static CHANGED: Condvar = Condvar::new();

/// Marks one piece of engine work as running until it is dropped.
pub(crate) struct Busy(());

impl Busy {
    pub(crate) fn start() -> Busy {
        *RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) += 1;
        Busy(())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) -= 1;
        CHANGED.notify_all();
    }
}

/// Blocks until no engine work runs on a blocking thread (model loads, answers being generated), or until
/// `timeout` has passed. Returns whether everything had stopped. Call it after the async runtime has shut down
/// and before the process exits.
pub fn wait_until_idle(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut running = RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    while *running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        running = CHANGED.wait_timeout(running, left).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_work_that_is_still_running() {
        let busy = Busy::start();
        assert!(!wait_until_idle(Duration::from_millis(20)), "one piece of work is running");
        let worker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(busy);
        });
        assert!(wait_until_idle(Duration::from_secs(10)));
        worker.join().unwrap();
    }
}
