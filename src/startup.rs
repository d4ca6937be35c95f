//! Process settings made once at start, before any thread: the C allocator's arena limit and
//! the built-in model's thread count. [`prepare`] makes both.
//!
//! ## The allocator's arenas
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
//!
//! ## The model's thread count
//!
//! candle asks how many threads a matrix product may use on every product, and unless
//! `RAYON_NUM_THREADS` is set it answers by counting physical cores in `/proc/cpuinfo`
//! (`num_cpus::get_physical`), a file the kernel formats anew on each read. A query's forward
//! pass makes about 50 products, so a 200-character query spent a fifth of its time there:
//! `examples/embed-bench`, 37 word pieces, p50 29–31 ms unset against 22–25 ms set, two runs
//! each. [`fix_model_threads`] counts once and sets the variable to that count, so the model
//! uses the same threads and stops asking the kernel.

/// Makes every setting of this module: [`limit_arenas`], [`fix_mmap_threshold`], then
/// [`fix_model_threads`]. Call first thing in `main`, before any thread is started.
pub fn prepare() {
    limit_arenas();
    fix_mmap_threshold();
    fix_model_threads();
}

/// Allocations of at least this many bytes get their own memory map ([`fix_mmap_threshold`]).
pub const MMAP_THRESHOLD: i32 = 1 << 20;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD`] (1 MiB). By default the threshold is
/// dynamic: each freed mapped block raises it, up to 32 MiB, so after one large paste the
/// next large buffers (bodies, redaction pieces, log lines) come from the heap and stay there
/// when freed. `examples/evidence-large` showed it: heap after 1–50 MB pastes grew 18 → 132 MB
/// and stayed. Setting the threshold turns the adjustment off (mallopt(3), `M_MMAP_THRESHOLD`),
/// so a buffer of 1 MiB or more goes back to the system when freed. Returns whether it was set.
pub fn fix_mmap_threshold() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: as in `limit_arenas`: two integers, allocator parameters only.
        #[allow(unsafe_code)]
        let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        ok == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Sets `RAYON_NUM_THREADS` to the thread count candle would choose by itself
/// (`candle_core::utils::get_num_threads`: physical cores, or the CPU mask it is confined to),
/// unless the operator set it. Returns the count in effect. Call before any thread is started:
/// changing the environment while another thread reads it is undefined behaviour on glibc.
pub fn fix_model_threads() -> usize {
    const VAR: &str = "RAYON_NUM_THREADS";
    if let Some(n) = std::env::var(VAR)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    let n = candle_core::utils::get_num_threads().max(1);
    // SAFETY: called from `main` before the runtime or any other thread exists (see above),
    // so nothing reads the environment concurrently.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var(VAR, n.to_string());
    }
    n
}

/// Arenas allowed: one per core of the machines this is sized for (2).
pub const ARENAS: i32 = 2;

/// Limits glibc `malloc` to [`ARENAS`] arenas. Call before any thread is started (the limit
/// only shapes arenas created after it). Returns whether the limit was set: `false` on other C
/// libraries (musl, macOS), where there is nothing to set.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_arena_limit_and_the_fixed_mmap_threshold() {
        assert!(limit_arenas(), "mallopt(M_ARENA_MAX) accepted");
        assert!(fix_mmap_threshold(), "mallopt(M_MMAP_THRESHOLD) accepted");
        assert_eq!(MMAP_THRESHOLD, 1024 * 1024);
    }
}
