//! Process settings: the allocator, chosen at link time, and what is set once at start, before
//! any thread: the C allocator's arena limit and mmap threshold, and the built-in model's thread
//! count. [`prepare`] makes the settings made at start.
//!
//! ## The allocator
//!
//! Rust allocations go to jemalloc ([`tikv_jemallocator`], declared here so every binary that
//! links this library, benches included, runs on it), configured by [`JEMALLOC_CONF`]. glibc's
//! `malloc` keeps memory freed by a thread in that thread's arena and returns it to the system
//! only from the top of a heap, so the peak of a burst stayed resident: in a 600 s
//! `soak-bench` at 200 connections, heap and stacks (`RssAnon`) grew 190 → 268 MiB while what
//! was allocated and not freed grew 176 → 191 MiB. jemalloc hands freed pages back after a
//! decay time (here none: [`JEMALLOC_CONF`]), and a background thread does it even when no
//! thread allocates afterwards. mimalloc was tried too and held more (198 → 288 MiB).
//!
//! Source: jemalloc(3), "TUNING" and the `opt.dirty_decay_ms`, `opt.muzzy_decay_ms` and
//! `opt.background_thread` options.
//!
//! ## The C allocator's arenas
//!
//! C code (SQLite, through sqlx) still allocates with glibc's `malloc`, which gives threads
//! their own arenas (up to 8 per core on 64-bit Linux); memory freed into one arena is only
//! reused from that arena. [`limit_arenas`] keeps them to two and [`fix_mmap_threshold`] keeps
//! large blocks in their own maps. Measured before Rust allocations moved to jemalloc, when
//! they went through glibc too: after a memory of 100,000 records had been loaded and queried
//! the process held ~57 MB more with the default arenas than with two (`recall-bench --n
//! 100000`, RSS 330 against 286 MB).
//!
//! Source: glibc manual, "Memory Allocation Tunables" (`glibc.malloc.arena_max`), and
//! mallopt(3) (`M_ARENA_MAX`).
//!
//! ## The model's thread count
//!
//! The built-in model's forward pass runs on rayon's global pool (`bert_encoder` splits a
//! product's rows with `rayon::join`, and several texts run side by side). [`fix_model_threads`]
//! builds that pool once at start, before any other thread, with the count in effect, so the
//! first query does not pay for starting it.

/// The process's allocator for Rust allocations: jemalloc, prefixed (its symbols are
/// `_rjem_*`, so C code keeps glibc's `malloc`). See the module documentation.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, built into it (`.cargo/config.toml` sets `JEMALLOC_SYS_WITH_MALLOC_CONF`
/// to this text, which tikv-jemalloc-sys passes to `configure --with-malloc-conf`):
/// - `background_thread:true`: a jemalloc thread returns freed pages to the system, so memory
///   goes back after a burst even when no thread allocates afterwards;
/// - `dirty_decay_ms:0`: freed pages are purged at once (default: kept 10 s for reuse). With
///   1 s, a 50 MB paste (`examples/evidence-large`) peaked at 5.1× its size and left the heap at
///   89 MB; purged at once, 3.9× (the client's copy included) and back to 18 MB, idle's;
/// - `muzzy_decay_ms:0`: purged pages are returned at once (`MADV_DONTNEED`), not kept lazily
///   (`MADV_FREE` pages still count in RSS until the kernel needs them).
///
/// Source: jemalloc(3), "opt.background_thread", "opt.dirty_decay_ms", "opt.muzzy_decay_ms".
pub const JEMALLOC_CONF: &str = "background_thread:true,dirty_decay_ms:0,muzzy_decay_ms:0";

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

/// Builds rayon's global pool (the built-in model's threads) with `RAYON_NUM_THREADS` threads
/// when the operator set it, else one per CPU this process may run on
/// ([`std::thread::available_parallelism`]: it honours the CPU affinity mask and a cgroup
/// quota). Returns the pool's thread count. When the pool exists already (a second call, or
/// rayon used before), it is left as it is and its count returned.
pub fn fix_model_threads() -> usize {
    let n = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // An error means the global pool was built already: keep it.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global();
    rayon::current_num_threads()
}

/// Niceness of the threads that do background model work ([`lower_this_thread`]): the
/// memory's backfill of stored records and incident documents. At 10 a
/// busy background thread gets about a tenth of a core that a request thread wants (the
/// kernel's weight table: 110 against 1,024 for nice 0; sched(7)), so a webhook or a page view
/// that arrives while the model runs is not queued behind it, and the background work still
/// finishes under sustained load.
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`BACKGROUND_NICE`] (setpriority(2) with
/// `PRIO_PROCESS` and the caller's thread: on Linux the nice value is a per-thread attribute,
/// sched(7)). Raising niceness needs no privilege. Returns whether it was set: `false` on
/// other systems or when the kernel refused (a seccomp profile), which only costs the
/// priority.
pub fn lower_this_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid` and `setpriority` take and return integers only; they change this
        // thread's scheduling weight and nothing a Rust invariant depends on.
        #[allow(unsafe_code)]
        let ok = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BACKGROUND_NICE)
        };
        ok == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
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

    /// The build setting and the documented options are the same text.
    #[test]
    fn the_build_setting_is_these_options() {
        let config = include_str!("../.cargo/config.toml");
        assert!(
            config.contains(&format!(
                "JEMALLOC_SYS_WITH_MALLOC_CONF = \"{JEMALLOC_CONF}\""
            )),
            "{config}"
        );
    }

    /// The options reach jemalloc: a build without the setting would leave its defaults (10 s
    /// decay, no background thread) without any error.
    #[test]
    #[cfg(not(target_env = "msvc"))]
    fn jemalloc_runs_with_these_options() {
        assert_eq!(
            tikv_jemalloc_ctl::opt::background_thread::read().ok(),
            Some(true)
        );
        // SAFETY: both options are `ssize_t` (jemalloc(3)), read as `isize`.
        #[allow(unsafe_code)]
        let decay = unsafe {
            (
                tikv_jemalloc_ctl::raw::read::<isize>(b"opt.dirty_decay_ms\0"),
                tikv_jemalloc_ctl::raw::read::<isize>(b"opt.muzzy_decay_ms\0"),
            )
        };
        assert_eq!((decay.0.ok(), decay.1.ok()), (Some(0), Some(0)));
    }

    #[test]
    fn the_model_pool_is_built_once_with_the_count_in_effect() {
        let n = fix_model_threads();
        assert!(n >= 1);
        assert_eq!(fix_model_threads(), n, "a second call keeps the pool");
        assert_eq!(rayon::current_num_threads(), n);
    }

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_arena_limit_and_the_fixed_mmap_threshold() {
        assert!(limit_arenas(), "mallopt(M_ARENA_MAX) accepted");
        assert!(fix_mmap_threshold(), "mallopt(M_MMAP_THRESHOLD) accepted");
        assert_eq!(MMAP_THRESHOLD, 1024 * 1024);
    }
}
