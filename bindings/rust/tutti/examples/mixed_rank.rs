//! The Rust rank of the mixed-language job (tests/bindings/mixed_job.py): rank 2 of 5, in the
//! set {0, 1, 2, 3} with a Python, a C and a Go rank; the same steps as tests/bindings/mixed_rank.c.
use std::process::ExitCode;

use tutti::{Op, Runtime};

const LANGUAGE: i32 = 3; // python 1, c 2, rust 3, go 4

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("mixed (rust): {}", e);
            ExitCode::from(2)
        }
    }
}

fn run() -> tutti::Result<bool> {
    let rt = Runtime::init()?; // everything from TUTTI_*
    let (rank, size) = (rt.rank()?, rt.size()?);
    let set = rt.add_process_set(&[0, 1, 2, 3], None)?;
    let mut ok = true;

    let r = (rank + 1) as f32;
    let mut values = [r, 0.5 * r, LANGUAGE as f32];
    rt.allreduce("mixed.values", set, &mut values, Op::Sum)?;
    if values != [10.0, 5.0, 10.0] {
        eprintln!("rank {} (rust): set allreduce {:?}", rank, values);
        ok = false;
    }
    let languages = rt.allgather("mixed.languages", set, &[LANGUAGE])?;
    if languages.data != [1, 2, 3, 4] || languages.shape != [4] {
        eprintln!("rank {} (rust): set allgather {:?}", rank, languages);
        ok = false;
    }
    let mut world = [1i64];
    rt.allreduce("mixed.world", rt.world(), &mut world, Op::Sum)?;
    if world != [size as i64] {
        eprintln!("rank {} (rust): world allreduce {:?}", rank, world);
        ok = false;
    }
    rt.finalize()?;
    println!("rank {} (rust): mixed {}", rank, if ok { "ok" } else { "WRONG" });
    Ok(ok)
}
