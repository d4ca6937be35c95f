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
//! candle asks how many threads a matrix product may use on every product, and unless
//! `RAYON_NUM_THREADS` is set it answers by counting physical cores in `/proc/cpuinfo`
//! (`num_cpus::get_physical`), a file the kernel formats anew on each read. A query's forward
//! pass makes about 50 products, so a 200-character query spent a fifth of its time there:
//! `examples/embed-bench`, 37 word pieces, p50 29–31 ms unset against 22–25 ms set, two runs
//! each. [`fix_model_threads`] counts once and sets the variable to that count, so the model
//! uses the same threads and stops asking the kernel.

/// The process's allocator for Rust allocations: jemalloc, prefixed (its symbols are
/// `_rjem_*`, so C code keeps glibc's `malloc`). See the module documentation.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at its first allocation (before `main`), as a C string:
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

/// [`JEMALLOC_CONF`] where the prefixed jemalloc looks for it (`_rjem_malloc_conf`, a pointer
/// to a NUL-terminated string).
#[cfg(not(target_env = "msvc"))]
#[allow(non_upper_case_globals, unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8; JEMALLOC_CONF.len() + 1] = &{
    let mut c = [0u8; JEMALLOC_CONF.len() + 1];
    let b = JEMALLOC_CONF.as_bytes();
    let mut i = 0;
    while i < b.len() {
        c[i] = b[i];
        i += 1;
    }
    c
};

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
    #[cfg(not(target_env = "msvc"))]
    fn jemalloc_options_are_one_c_string() {
        assert_eq!(malloc_conf.last(), Some(&0));
        assert_eq!(
            &malloc_conf[..JEMALLOC_CONF.len()],
            JEMALLOC_CONF.as_bytes()
        );
        assert!(!JEMALLOC_CONF.as_bytes().contains(&0));
    }

    /// The options reach jemalloc: a misspelt symbol name would leave its defaults (10 s decay,
    /// no background thread) without any error.
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
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_arena_limit_and_the_fixed_mmap_threshold() {
        assert!(limit_arenas(), "mallopt(M_ARENA_MAX) accepted");
        assert!(fix_mmap_threshold(), "mallopt(M_MMAP_THRESHOLD) accepted");
        assert_eq!(MMAP_THRESHOLD, 1024 * 1024);
    }
}
