//! The command line, run as a user would: the built binary, its exit status, stdout and stderr.

use std::path::Path;
use std::process::{Command, Output};

fn incidentmind(args: &[&str]) -> Output {
    incidentmind_in(None, args)
}

fn incidentmind_in(dir: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_incidentmind"));
    cmd.args(args)
        .env_remove("INCIDENTMIND_DATABASE_URL")
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG");
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd.output().expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn read_only_commands_refuse_a_mistyped_database_path_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("incidentmnd.db");
    let url = typo.to_str().unwrap();
    for args in [
        &["audit", "verify", "--database-url", url][..],
        &["export", "--database-url", url][..],
        &["user", "token", "alice", "--database-url", url][..],
    ] {
        let out = incidentmind(args);
        assert!(!out.status.success(), "{args:?} must fail");
        let err = stderr(&out);
        assert!(err.contains(url), "{args:?} names the path: {err}");
        assert!(err.contains("never creates"), "{args:?}: {err}");
        assert!(!err.contains("internal error"), "{args:?}: {err}");
        assert!(!typo.exists(), "{args:?} created {url}");
        assert!(!stdout(&out).contains("intact"), "{args:?}");
    }
    // A file that is not an IncidentMind database is refused too, and left as it was.
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "shopping list\n").unwrap();
    let out = incidentmind(&["audit", "verify", "--database-url", other.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not an IncidentMind database"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "shopping list\n");
}

#[test]
fn an_unopenable_database_path_is_named_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("no-such-folder").join("im.db");
    let url = bad.to_str().unwrap();
    let out = incidentmind(&["user", "add", "alice", "--database-url", url]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(url), "names the path: {err}");
    assert!(err.contains("folder exists"), "says what to do: {err}");
    assert!(!err.contains("internal error"), "{err}");
}

#[test]
fn import_names_a_missing_file_and_creates_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("im.db");
    let missing = dir.path().join("memories-typo.jsonl");
    let out = incidentmind(&[
        "import",
        missing.to_str().unwrap(),
        "--database-url",
        db.to_str().unwrap(),
        "--embeddings",
        "off",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    assert!(!db.exists());
}

#[test]
fn import_skip_existing_imports_the_rest_and_logs_carry_no_colour_codes_into_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("im.db");
    let db = db.to_str().unwrap();
    let all = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/history.jsonl"
    ))
    .unwrap();
    let lines: Vec<&str> = all.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() > 3);
    let first = dir.path().join("first.jsonl");
    std::fs::write(&first, lines[..3].join("\n")).unwrap();
    let whole = dir.path().join("whole.jsonl");
    std::fs::write(&whole, lines.join("\n")).unwrap();
    let import = |file: &Path, extra: &[&str]| {
        let mut args = vec![
            "import",
            file.to_str().unwrap(),
            "--database-url",
            db,
            "--embeddings",
            "off",
        ];
        args.extend_from_slice(extra);
        incidentmind(&args)
    };

    let out = import(&first, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("imported 3 records"),
        "{}",
        stdout(&out)
    );
    // stderr is a pipe here: the log line is plain text.
    let err = stderr(&out);
    assert!(
        err.contains("embeddings off"),
        "the log line is there: {err}"
    );
    assert!(!err.contains('\u{1b}'), "no ANSI escape codes: {err:?}");

    let out = import(&whole, &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("already in") && err.contains("--skip-existing"),
        "{err}"
    );

    let out = import(&whole, &["--skip-existing"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains(&format!("imported {} records", lines.len() - 3))
            && said.contains("skipped 3"),
        "{said}"
    );
    let out = incidentmind(&["export", "--database-url", db]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), lines.len());
}

fn help(args: &[&str]) -> String {
    let out = incidentmind(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

#[test]
fn each_subcommand_help_lists_only_its_own_options() {
    let server_only = [
        "--bind",
        "--llm-model",
        "--max-body-bytes",
        "--secure-cookies",
    ];
    for args in [
        &["audit", "verify", "--help"][..],
        &["export", "--help"][..],
        &["user", "add", "--help"][..],
        &["import", "--help"][..],
        &["history", "load", "--help"][..],
        &["eval", "recall", "--help"][..],
        &["demo", "--help"][..],
    ] {
        let h = help(args);
        for flag in server_only {
            assert!(!h.contains(flag), "{args:?} lists {flag}:\n{h}");
        }
    }
    for args in [&["serve", "--help"][..], &["--help"][..]] {
        let h = help(args);
        for flag in server_only
            .iter()
            .chain(&["--database-url", "--embeddings"])
        {
            assert!(h.contains(flag), "{args:?} lacks {flag}:\n{h}");
        }
    }
    assert!(help(&["audit", "verify", "--help"]).contains("--database-url"));
    assert!(!help(&["audit", "verify", "--help"]).contains("--embeddings"));
    assert!(help(&["import", "--help"]).contains("--skip-existing"));
    let eval = help(&["eval", "recall", "--help"]);
    assert!(eval.contains("--embeddings") && !eval.contains("--database-url"));
    assert!(!help(&["demo", "--help"]).contains("--database-url"));
}

#[test]
fn eval_names_a_missing_set_and_creates_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let out = incidentmind_in(
        Some(dir.path()),
        &["eval", "recall", "no-such-set.json", "--embeddings", "off"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no-such-set.json"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written in the working directory"
    );
}
