//! `user tokens`, `user revoke`, `user password`, `user disable`, `user enable` (issue #54):
//! each calls one `services::accounts` function as the actor `cli`.

use super::*;

/// Runs an account command (`user add` and `user token` are dispatched in `mod.rs`).
pub(super) async fn run(command: UserCommand) -> anyhow::Result<()> {
    use crate::services::accounts;
    use store::OpenMode::MustExist;
    match command {
        UserCommand::Tokens { name, db } => {
            let pool = open(&db, MustExist).await?;
            let user = users::list_accounts(&pool)
                .await?
                .into_iter()
                .find(|a| a.name == name)
                .ok_or_else(|| anyhow::anyhow!("no user named {name}"))?;
            let now = store::db_time(store::now());
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{:>6}  {:<24} {:<28} {:<28} {:<28} state",
                "id", "name", "made", "expires", "last used"
            )?;
            for t in accounts::tokens_of(&pool, user.id).await? {
                let state = if t.revoked_at.is_some() {
                    "revoked"
                } else if t.is_live(&now) {
                    "live"
                } else {
                    "expired"
                };
                writeln!(
                    out,
                    "{:>6}  {:<24} {:<28} {:<28} {:<28} {state}",
                    t.id,
                    t.name,
                    t.created_at,
                    t.expires_at.as_deref().unwrap_or("never"),
                    t.last_used_at.as_deref().unwrap_or("never"),
                )?;
            }
            Ok(())
        }
        UserCommand::Revoke { id, db } => {
            let pool = open(&db, MustExist).await?;
            let token = accounts::revoke_token(&pool, "cli", id, None).await?;
            println!(
                "revoked token {id} \"{}\" of {}",
                token.name, token.user_name
            );
            Ok(())
        }
        UserCommand::Password { name, db } => {
            let pool = open(&db, MustExist).await?;
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            let password = line.trim_end_matches(['\r', '\n']);
            accounts::set_password(&pool, "cli", &name, password).await?;
            println!("password of {name} changed; their sessions are signed out");
            Ok(())
        }
        UserCommand::Disable { name, db } => {
            let pool = open(&db, MustExist).await?;
            if accounts::set_disabled(&pool, "cli", &name, true).await? {
                println!("disabled {name}: their sessions and API tokens no longer work");
            } else {
                println!("{name} was already disabled");
            }
            Ok(())
        }
        UserCommand::Enable { name, db } => {
            let pool = open(&db, MustExist).await?;
            if accounts::set_disabled(&pool, "cli", &name, false).await? {
                println!("enabled {name}");
            } else {
                println!("{name} was not disabled");
            }
            Ok(())
        }
        UserCommand::Add { .. } | UserCommand::Token { .. } => {
            anyhow::bail!("`user add` and `user token` are run by cli::run")
        }
    }
}
