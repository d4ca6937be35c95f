//! The C allocator's arena limit, set once at start.
//!
//! glibc's `malloc` gives threads their own arenas (up to 8 per core on 64-bit Linux), and
//! memory freed into one arena is only reused from that arena. IncidentMind allocates from many
//! threads: tokio's workers, the blocking pool that runs the built-in model's forward passes,
//! and one thread per SQLite connection that reads vectors and search results. Each arena keeps
//! its own freed memory mapped, so after a memory of 100,000 records has been loaded and
//! queried the process held ~57 MB more than with one arena (`recall-bench --n 100000`, RSS
//! 330 MB with the default, 286 MB with two arenas).
//!
//! Source: glibc manual, "Memory Allocation Tunables" (`glibc.malloc.arena_max`), and
//! mallopt(3) (`M_ARENA_MAX`).

/// Arenas allowed: one per core of the machines this is sized for (2).
pub const ARENAS: i32 = 2;

/// Limits glibc `malloc` to [`ARENAS`] arenas. Call first thing in `main`, before any thread
/// is started (the limit only shapes arenas created after it). Returns whether the limit was
/// set: `false` on other C libraries (musl, macOS), where there is nothing to set.
pub fn limit_arenas() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` takes two integers and only changes allocator parameters; glibc
        // documents `M_ARENA_MAX` as settable at any time, and no Rust invariant depends on it.
        #[allow(unsafe_code)]
        let ok = unsafe { libc::mallopt(libc::M_ARENA_MAX, ARENAS) };
        ok == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
