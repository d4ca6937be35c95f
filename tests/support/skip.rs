//! The one way a test says it did not run. [`skip`] prints a SKIPPED banner straight to the
//! terminal (the test harness captures what passing tests print) and panics instead when the run
//! requires the test: under `CI=true` (CI installs or provides what the tests need, see
//! `.ci/run`), or when the test's own `INCIDENTMIND_REQUIRE_…` variable is `1`.
//!
//! Included by each test binary with `#[path = "support/skip.rs"] mod skip;` (a file under
//! `tests/support/` is not a test binary itself).

use std::io::Write as _;

/// When a test that cannot run must fail instead of skipping.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code, reason = "each test binary uses the cases it needs")]
pub enum Required {
    /// Under `CI=true`, or when this variable is `1`.
    InCi(Option<&'static str>),
}

impl Required {
    /// Whether this run requires the test.
    pub fn now(self) -> bool {
        let set = |v: &str| std::env::var(v).is_ok_and(|x| x == "1");
        match self {
            Self::InCi(var) => {
                std::env::var("CI").is_ok_and(|v| v == "true") || var.is_some_and(set)
            }
        }
    }
}

/// Reports that `test` did not run because of `why` (and how to make it run): panics with that
/// message when `required` says this run needs the test, else prints a SKIPPED banner.
///
/// # Panics
/// When the run requires the test.
#[track_caller]
pub fn skip(test: &str, why: &str, required: Required) {
    assert!(
        !required.now(),
        "{test} did not run and this run requires it ({required:?}): {why}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "\n!!!! SKIPPED {test}: {why} — NOT measured, NOT checked !!!!\n"
    );
}
