//! The `incidentmind` binary: parses the command line and hands over to [`incidentmind::cli`].
//! A returned error is printed on stderr and the exit status is 1.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    incidentmind::cli::main().await
}
