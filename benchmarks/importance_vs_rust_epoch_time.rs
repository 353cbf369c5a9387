// The timing binary behind `benchmarks/importance_vs_rust.py --rust-bin`: one epoch of RAGBooster's
// `mle::mle_importance` (the authors' crate, amsterdata/ragbooster at 3402fd2; its `src/mle/` is used
// unchanged and is not part of this repository). Build it offline from Debian's crates:
//
//   apt-get install -y cargo librust-rayon-dev librust-itertools-dev librust-rand-dev librust-libc-dev
//   mkdir -p runs/ragbooster/src/bin runs/ragbooster/.cargo
//   cp -r <crate checkout>/src/mle runs/ragbooster/src/
//   echo 'pub mod mle;' > runs/ragbooster/src/lib.rs
//   cp benchmarks/importance_vs_rust_epoch_time.rs runs/ragbooster/src/bin/epoch_time.rs
//   runs/ragbooster/Cargo.toml:
//       [package]            name = "ragbooster", version = "0.1.0", edition = "2021"
//       [lib]                name = "ragbooster", crate-type = ["rlib"]
//       [[bin]]              name = "epoch_time", path = "src/bin/epoch_time.rs"
//       [dependencies]       itertools = "0.10.3", rayon = "1.6.1", rand = "0.8.5", libc = "0.2"
//   runs/ragbooster/.cargo/config.toml:
//       [source.crates-io]   replace-with = "debian"
//       [source.debian]      directory = "/usr/share/cargo/registry"
//   (cd runs/ragbooster && cargo build --release --offline)   # -> target/release/epoch_time
//
// Times one epoch of the crate's mle::mle_importance with a grouping (the crate's code unchanged):
// BIN N THREADS REPEATS -> one line per repeat and a last line "M,threads,wall_ms,cpu_ms" (medians).
// Data: N tuples x 50 retrieved items, every position its own item (corpus M = 50 N), items
// grouped uniformly into 1,000 sources, binary utilities P(1) = 0.5, K = 10. One epoch is the
// marginal cost (5 epochs - 1 epoch) / 4, so setup done once per call is excluded.
use ragbooster::mle;
use mle::types::{Grouping, Retrieval};
use rand::distributions::{Bernoulli, Distribution};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn run(data: &[Retrieval], m: usize, grouping: &Grouping, epochs: usize, threads: usize) -> (f64, f64) {
    let copy = data.to_vec();
    let (w0, c0) = (Instant::now(), cpu_seconds());
    let v = mle::mle_importance(copy, m, Some(grouping), 10, 0.1, epochs, threads);
    let out = (w0.elapsed().as_secs_f64() * 1000.0, (cpu_seconds() - c0) * 1000.0);
    assert!(v.len() == m);
    out
}

fn median(mut x: Vec<f64>) -> f64 {
    x.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = x.len();
    if n % 2 == 1 { x[n / 2] } else { 0.5 * (x[n / 2 - 1] + x[n / 2]) }
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let (n, threads, repeats) = (args[0], args[1], args[2]);
    // the crate builds a pool of n_jobs threads but runs on rayon's global pool; size that one
    rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().unwrap();
    let d = 50;
    let m = n * d;
    let mut rng = StdRng::seed_from_u64(0);
    let coin = Bernoulli::new(0.5).unwrap();
    let data: Vec<Retrieval> = (0..n)
        .map(|t| {
            let retrieved: Vec<usize> = (0..d).map(|i| t * d + i).collect();
            let util: Vec<f64> = (0..d).map(|_| if coin.sample(&mut rng) { 1.0 } else { 0.0 }).collect();
            Retrieval::new(retrieved, util)
        })
        .collect();
    let groups: Vec<usize> = (0..m).map(|_| rng.gen_range(0..1000)).collect();
    let grouping = Grouping::new(1000, groups);
    let (mut walls, mut cpus) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        let (w1, c1) = run(&data, m, &grouping, 1, threads);
        let (w5, c5) = run(&data, m, &grouping, 5, threads);
        let (w, c) = ((w5 - w1) / 4.0, (c5 - c1) / 4.0);
        println!("repeat,{},{},{:.3},{:.3}", m, threads, w, c);
        walls.push(w);
        cpus.push(c);
    }
    println!("{},{},{:.3},{:.3}", m, threads, median(walls), median(cpus));
}
