//! Thread names the forwarder gives its threads, so observers can tell a worker (and which
//! one) from the device thread or anything else in the process.

/// Prefix of a worker thread's name: worker N is `fwd-worker-N`.
pub const WORKER_PREFIX: &str = "fwd-worker-";
/// The synthetic device's thread, when it has one.
pub const DEVICE_THREAD: &str = "fwd-nic";

/// The name of worker `n`'s thread.
pub fn worker_thread_name(n: usize) -> String {
    format!("{WORKER_PREFIX}{n}")
}

/// The worker index of a thread name (`fwd-worker-N`), if it is a worker's.
pub fn worker_index(thread_name: &str) -> Option<usize> {
    thread_name.strip_prefix(WORKER_PREFIX)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(worker_index(&worker_thread_name(12)), Some(12));
        assert_eq!(worker_index("fwd-nic"), None);
        assert_eq!(worker_index("fwd-worker-x"), None);
    }
}
