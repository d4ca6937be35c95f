//! Built-in embedding model cost per query (issue #14): embeds texts of about 50, 100 and 200
//! characters one at a time and prints p50 and p99 in milliseconds with their word pieces.
//!
//! Usage: `cargo run --release --example embed-bench -- [--rounds 200] [--no-prepare]`.
//!
//! Makes the process settings of `incidentmind::startup` first, as the binary does, unless
//! `--no-prepare` (then rayon builds its pool at the first embedding, with its default count).

use std::time::Instant;

use incidentmind::memory::minilm::{self, MiniLm};

/// Loads the model, then times each length; see the module doc.
fn main() -> anyhow::Result<()> {
    let mut rounds = 200usize;
    let mut prepare = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().unwrap_or_default().parse()?,
            "--no-prepare" => prepare = false,
            other => anyhow::bail!(
                "unknown argument {other}; usage: embed-bench [--rounds 200] [--no-prepare]"
            ),
        }
    }
    if prepare {
        incidentmind::startup::prepare();
    }
    let t = Instant::now();
    let model = MiniLm::load(&minilm::default_dir())?;
    println!("loaded in {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);
    let base = "the checkout service returns gateway timeouts after the morning deploy while the \
                queue consumer lag climbs on every broker and the database replica falls behind \
                by several minutes during peak traffic hours";
    for chars in [50usize, 100, 200] {
        let mut times = Vec::with_capacity(rounds);
        let mut pieces = 0;
        for i in 0..rounds {
            let text = format!(
                "{} {i}",
                incidentmind::evidence::truncate_chars(base, chars)
            );
            pieces = model.word_pieces(&text)?;
            let t = Instant::now();
            model.embed(&[text.as_str()])?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        let at =
            |p: f64| times[((p * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
        println!(
            "{chars:>4} characters ({pieces} word pieces): p50 {:.1} ms, p99 {:.1} ms",
            at(0.5),
            at(0.99)
        );
    }
    Ok(())
}
