//! The `incidentmind` binary: parses the command line and hands over to [`incidentmind::cli`].
//! A returned error is printed on stderr as one line (its causes after colons) and the exit
//! status is 1.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match incidentmind::cli::main().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
