//! The `incidentmind` binary: parses the command line and hands over to [`incidentmind::cli`].
//! A returned error is printed on stderr as one line (`Error: ` then its causes after colons)
//! and the exit status is 1 (the standard library's handling of an `Err` from `main`).

/// An error printed as one line with its causes (`{:#}` of [`anyhow::Error`]), not as a
/// Debug dump with a backtrace.
struct OneLine(anyhow::Error);

impl std::fmt::Debug for OneLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

#[tokio::main]
async fn main() -> Result<(), OneLine> {
    incidentmind::cli::main().await.map_err(OneLine)
}
