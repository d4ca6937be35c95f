//! The `incidentmind` binary: parses the command line and hands over to [`incidentmind::cli`].
//! A returned error is printed on stderr as one line (`Error: ` then its causes after colons)
//! and the exit status is 1 (the standard library's handling of an `Err` from `main`).

#![deny(unsafe_code)]

/// An error printed as one line with its causes (`{:#}` of [`anyhow::Error`]), not as a
/// Debug dump with a backtrace.
struct OneLine(anyhow::Error);

impl std::fmt::Debug for OneLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

/// Makes the process settings of [`incidentmind::startup`] before any thread starts, then
/// runs the command line on a multi-threaded tokio runtime (what `#[tokio::main]` builds).
fn main() -> Result<(), OneLine> {
    incidentmind::startup::prepare();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| OneLine(anyhow::Error::new(e).context("cannot start the async runtime")))?
        .block_on(incidentmind::cli::main())
        .map_err(OneLine)
}
