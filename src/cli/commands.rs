//! The commands that act on a database besides `serve`: `user add`, `consolidate`, `backup`,
//! `restore`, `import` and `migrate-db`, with the checks they share.

use super::*;

/// `consolidate`: builds the app as `serve` does (database, memory with the chosen embedder)
/// over an existing database and runs [`crate::services::consolidation::consolidate`] once.
pub(super) async fn consolidate(
    db: &DbArgs,
    embeddings: &EmbeddingArgs,
    rule_cap: usize,
) -> anyhow::Result<()> {
    open(db, store::OpenMode::MustExist).await?.close().await;
    let app = App::build(crate::app::Config {
        database_url: db.database_url.clone(),
        settings: Settings {
            rule_cap,
            ..Settings::default()
        },
        embedder: embedder(embeddings, None)?,
        llm: None,
    })
    .await?;
    let report =
        crate::services::consolidation::consolidate(app.memory(), app.state.settings.rule_cap)
            .await?;
    println!("{report}");
    Ok(())
}

/// `incidentmind user add`: creates the user (the password read from stdin when asked) and
/// prints its API token.
pub(super) async fn user_add(
    name: String,
    role: String,
    password_stdin: bool,
    db: DbArgs,
) -> anyhow::Result<()> {
    use store::OpenMode::CreateIfMissing;
    let password = if password_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        let p = line.trim_end_matches(['\r', '\n']).to_string();
        anyhow::ensure!(
            p.chars().count() >= 8,
            "the password must be at least 8 characters"
        );
        Some(p)
    } else {
        None
    };
    let pool = open(&db, CreateIfMissing).await?;
    let token = crate::services::users::add_user(&pool, &name, &role, password.as_deref()).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "created user {name} ({role})")?;
    writeln!(out, "{token}")?;
    Ok(())
}

/// Checks the database file at `path`: opens it (it must be an IncidentMind database), runs
/// `PRAGMA integrity_check` and verifies the audit chain; returns what it holds and the number
/// of audit entries checked.
pub(super) async fn check_database(
    path: &std::path::Path,
) -> anyhow::Result<(store::backup::Contents, i64)> {
    let url = path.to_string_lossy();
    let pool = store::open(&url, store::OpenMode::MustExist).await?;
    let checked = async {
        let problems = store::backup::integrity_check(&pool).await?;
        anyhow::ensure!(
            problems == ["ok"],
            "{}: integrity check failed: {}",
            path.display(),
            problems.join("; ")
        );
        let entries = match audit::verify(&pool).await? {
            audit::Verification::Intact { entries } => entries,
            audit::Verification::Broken { seq, reason } => {
                anyhow::bail!(
                    "{}: audit log BROKEN at entry {seq}: {reason}",
                    path.display()
                )
            }
        };
        Ok((store::backup::contents(&pool).await?, entries))
    }
    .await;
    pool.close().await;
    checked
}

/// `migrate-db --from URL --to URL`: [`store::migrate::copy_database`], then the audit chain
/// verified on the target; prints rows per table.
pub(super) async fn migrate_db(from: &str, to: &str) -> anyhow::Result<()> {
    let source = store::open(from, store::OpenMode::MustExist).await?;
    let target = store::open(to, store::OpenMode::CreateIfMissing).await?;
    let report = store::migrate::copy_database(&source, &target).await;
    source.close().await;
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            target.close().await;
            anyhow::bail!("nothing was copied: {e}");
        }
    };
    let mut total = 0;
    for (table, rows) in &report {
        println!("{table:<32} {rows:>9}");
        total += rows;
    }
    println!("{:<32} {total:>9}", "rows copied");
    let verified = audit::verify(&target).await?;
    target.close().await;
    match verified {
        audit::Verification::Intact { entries } => {
            println!(
                "audit chain on {}: intact ({entries} entries)",
                store::redacted_url(to)
            );
            Ok(())
        }
        audit::Verification::Broken { seq, reason } => {
            anyhow::bail!("the audit chain on the target is broken at entry {seq}: {reason}")
        }
    }
}

/// Refuses `command` (a SQLite file operation) on a PostgreSQL database, naming the tool to use.
pub(super) fn sqlite_only(db: &DbArgs, command: &str, instead: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        store::Backend::of_url(&db.database_url) == store::Backend::Sqlite,
        "`{command}` copies a SQLite file; this database is PostgreSQL: use {instead}"
    );
    Ok(())
}

/// `backup FILE`: `VACUUM INTO` from the live database, then [`check_database`] on the copy. A
/// copy that fails its check is left in place for inspection and the command fails.
pub(super) async fn backup(file: &std::path::Path, db: &DbArgs) -> anyhow::Result<()> {
    sqlite_only(db, "backup", "pg_dump")?;
    anyhow::ensure!(
        !file.exists(),
        "{} already exists; give a new file name (backups are never overwritten)",
        file.display()
    );
    let pool = open(db, store::OpenMode::MustExist).await?;
    let copied = store::backup::vacuum_into(&pool, file).await;
    pool.close().await;
    copied.map_err(|e| {
        anyhow::anyhow!(
            "cannot write the backup to {}: {}; check that its folder exists and is writable",
            file.display(),
            std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string())
        )
    })?;
    let (contents, entries) = check_database(file)
        .await
        .map_err(|e| e.context(format!("the backup at {} failed its check", file.display())))?;
    let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    println!(
        "backup written to {} ({bytes} bytes): integrity ok, audit log intact ({entries} \
         entries); {contents}",
        file.display()
    );
    Ok(())
}

/// `restore FILE`: checks the backup, refuses a non-empty target without `force`, writes a
/// copy of the backup beside the target and renames it over the target (after removing the
/// target's `-wal` and `-shm`, which belong to the old file), then checks the result.
pub(super) async fn restore(
    file: &std::path::Path,
    force: bool,
    db: &DbArgs,
) -> anyhow::Result<()> {
    sqlite_only(
        db,
        "restore",
        "pg_restore, or migrate-db from a SQLite backup",
    )?;
    let (contents, _) = check_database(file)
        .await
        .map_err(|e| e.context(format!("not restoring from {}", file.display())))?;
    let target = store::database_file(&db.database_url)?;
    if target.exists() && !force {
        let existing = store::open(&target.to_string_lossy(), store::OpenMode::MustExist).await;
        match existing {
            Ok(pool) => {
                let held = store::backup::contents(&pool).await;
                pool.close().await;
                let held = held?;
                anyhow::ensure!(
                    held.is_empty(),
                    "{} is not empty ({held}); pass --force to replace it with {}",
                    target.display(),
                    file.display()
                );
            }
            Err(e) => anyhow::bail!("{e}; pass --force to replace it with {}", file.display()),
        }
    }
    let side = |suffix: &str| {
        let mut p = target.clone().into_os_string();
        p.push(suffix);
        std::path::PathBuf::from(p)
    };
    let staged = side(".restoring");
    let _ = std::fs::remove_file(&staged);
    let source = store::open(&file.to_string_lossy(), store::OpenMode::MustExist).await?;
    let copied = store::backup::vacuum_into(&source, &staged).await;
    source.close().await;
    copied.map_err(|e| {
        anyhow::anyhow!(
            "cannot write {} (beside the database): {e}; check that the folder is writable",
            staged.display()
        )
    })?;
    for stale in [side("-wal"), side("-shm")] {
        match std::fs::remove_file(&stale) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!("cannot remove {}: {e}", stale.display()),
        }
    }
    std::fs::rename(&staged, &target)
        .map_err(|e| anyhow::anyhow!("cannot move the restored copy into place: {e}"))?;
    let (restored, entries) = check_database(&target).await?;
    anyhow::ensure!(
        restored == contents,
        "the restored database holds {restored}, the backup {contents}"
    );
    println!(
        "restored {} into {}: integrity ok, audit log intact ({entries} entries); {restored}",
        file.display(),
        target.display()
    );
    Ok(())
}

/// `import FILE`: reads the file before the database is opened (a missing file creates nothing).
pub(super) async fn import(
    file: &std::path::Path,
    skip_existing: bool,
    db: &DbArgs,
    embeddings: &EmbeddingArgs,
) -> anyhow::Result<()> {
    use crate::services::memory::ImportError;
    let bytes = std::fs::read(file).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the import file {}: {e}; give the path of a .jsonl file written by \
             `incidentmind export`",
            file.display()
        )
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let pool = open(db, store::OpenMode::CreateIfMissing).await?;
    match crate::services::memory::import(&pool, "import", &text, skip_existing).await {
        Ok(done) => {
            println!(
                "imported {} records from {}{}",
                done.imported,
                file.display(),
                if done.skipped > 0 {
                    format!(
                        "; skipped {} whose id was already in the database",
                        done.skipped
                    )
                } else {
                    String::new()
                }
            );
            let memory = crate::memory::Memory::new(pool.clone(), embedder(embeddings, None)?);
            let (docs, vectors) = crate::memory::embeddings::catch_up(&memory).await?;
            println!("indexed {docs} incident documents, embedded {vectors} texts");
            Ok(())
        }
        Err(ImportError::BadLines(bad)) => {
            for b in &bad {
                eprintln!("{}: line {}: {}", file.display(), b.line, b.message);
            }
            anyhow::bail!(
                "{} bad line(s) in {}; nothing was imported",
                bad.len(),
                file.display()
            )
        }
        Err(ImportError::Existing(ids)) => anyhow::bail!(
            "{} record(s) of {} are already in {} (ids {}); nothing was imported. Pass \
             --skip-existing to import only the others",
            ids.len(),
            file.display(),
            db.database_url,
            id_list(&ids)
        ),
        Err(ImportError::App(e)) => Err(e.into()),
    }
}

/// Up to ten ids, then "…".
pub(super) fn id_list(ids: &[i64]) -> String {
    let mut s = ids
        .iter()
        .take(10)
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > 10 {
        s.push_str(", …");
    }
    s
}
