//! Times one query against 100,000 quantised 384-dimension vectors: the full scan and the
//! sign-bit shortlist (`QuantizedSet::scan_nearest`). `cargo run --release --example vector-scan`.
use incidentmind::memory::vectors::QuantizedSet;
use std::time::Instant;

fn main() {
    let (n, dim) = (100_000usize, 384usize);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut unit = || {
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / norm).collect::<Vec<f32>>()
    };
    let mut set = QuantizedSet::new(true);
    set.extend((0..n as i64).map(|i| (i, unit())));
    let queries: Vec<Vec<f32>> = (0..50).map(|_| unit()).collect();
    for round in 0..3 {
        let t = Instant::now();
        let mut sink = 0.0f32;
        for q in &queries {
            set.scan(q, |_, c| sink += c);
        }
        let full = t.elapsed() / queries.len() as u32;
        print!("round {round}: full scan {full:?}");
        for shortlist in [0usize, 960, 3_840] {
            let t = Instant::now();
            let mut scored = 0usize;
            for q in &queries {
                let mut other = 0.0f32;
                set.scan_nearest(
                    q,
                    shortlist,
                    |_, c| {
                        sink += c;
                        scored += 1;
                    },
                    |c| other += c,
                );
                sink -= other;
            }
            let took = t.elapsed() / queries.len() as u32;
            print!(
                ", shortlist {shortlist} ({} scored) {took:?}",
                scored / queries.len()
            );
        }
        println!(" per query ({sink:.1})");
    }
}
