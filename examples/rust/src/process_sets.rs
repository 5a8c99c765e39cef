//! Process sets from Rust: the even and the odd ranks each allreduce in a set of their own while
//! the whole world allreduces at the same time; then each set broadcasts weights from its first
//! member, the world gathers batches of different sizes, and pairs of ranks pass an activation
//! and its gradient with send/recv. Every result is checked; any difference exits with 1.
//! Run it with: build/tuttirun -np 4 examples/rust/target/release/process_sets (even sizes)
use std::process::ExitCode;
use std::time::Duration;

use tutti::{Error, Op, Runtime, Tensor};

const COUNT: usize = 1024;

fn main() -> ExitCode {
    match run() {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("process_sets (rust): {}", e);
            ExitCode::from(2)
        }
    }
}

/// Counts wrong results, so that one run reports every mismatch it finds.
struct Checks {
    rank: i32,
    failed: u32,
}

impl Checks {
    fn expect<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            eprintln!("rank {}: {}: got {:?}, expected {:?}", self.rank, what, got, want);
            self.failed += 1;
        }
    }
}

fn run() -> tutti::Result<u32> {
    let rt = Runtime::init()?; // coordinator, job, rank and size come from tuttirun
    let (rank, size) = (rt.rank()?, rt.size()?);
    let mut checks = Checks { rank, failed: 0 };
    if size % 2 != 0 {
        return Err(Error::InvalidArgument(format!("run on an even number of ranks, not {}", size)));
    }

    // Every rank adds both sets (members wait for each other, non-members return at once).
    let evens: Vec<i32> = (0..size).step_by(2).collect();
    let odds: Vec<i32> = (1..size).step_by(2).collect();
    let even_set = rt.add_process_set(&evens, Some(Duration::from_secs(60)))?;
    let odd_set = rt.add_process_set(&odds, None)?;
    let (mine, other, first) = if rank % 2 == 0 { (even_set, odd_set, 0) } else { (odd_set, even_set, 1) };
    let set_size = mine.size()?;

    // Two requests in flight at once, in the set and in the world: their streams run
    // independently. The scope waits for both before the buffers can be read.
    let mut in_set: Vec<f32> = (0..COUNT).map(|i| (rank + i as i32) as f32).collect();
    let mut in_world = vec![1.0f64; COUNT];
    rt.scope(|s| -> tutti::Result<()> {
        let mut a = s.allreduce("mine", mine, &mut in_set, Op::Sum)?;
        let mut b = s.allreduce("world", rt.world(), &mut in_world, Op::Sum)?;
        a.wait(Some(Duration::from_secs(60)))?;
        b.wait(None)
    })?;
    let rank_sum: i32 = (first..size).step_by(2).sum();
    checks.expect("set sum", in_set[7], (rank_sum + set_size * 7) as f32);
    checks.expect("set sums", in_set.iter().enumerate().all(|(i, &x)| x == (rank_sum + set_size * i as i32) as f32), true);
    checks.expect("world sum", in_world.iter().all(|&x| x == size as f64), true);

    // A rank outside a set may not run its collectives; the library says why.
    let mut probe = [0i32; 1];
    let refused = rt.allreduce("probe", other, &mut probe, Op::Sum).err();
    let message = format!("rank {} is not a member of process set {}", rank, other.id());
    checks.expect("non-member allreduce", refused, Some(Error::NotAMember(message)));

    // Broadcast in the set from its first member (a global rank): initial weights.
    let mut weights = if rank == first { [100.0f32, 101.0, 102.0, 103.0] } else { [0.0; 4] };
    rt.broadcast("weights", mine, &mut weights, first)?;
    checks.expect("broadcast", weights, [100.0, 101.0, 102.0, 103.0]);

    // Allgather on the world: rank r gives r + 1 rows of 2 values (batches of different sizes).
    let rows = rank as usize + 1;
    let batch = vec![rank; 2 * rows];
    let gathered = rt.allgather("batches", rt.world(), Tensor::new(&batch, &[rows, 2])?)?;
    let expected: Vec<i32> = (0..size).flat_map(|r| vec![r; 2 * (r as usize + 1)]).collect();
    checks.expect("allgather shape", gathered.shape.clone(), vec![expected.len() as i64 / 2, 2]);
    checks.expect("allgather rows", gathered.data, expected);

    // Allgather in the set: each member's set rank, in set order.
    let position = [mine.rank()? as i64];
    let order = rt.allgather("positions", mine, &position)?;
    checks.expect("set allgather", order.data, (0..set_size as i64).collect::<Vec<_>>());

    // Send/recv between pipeline stages: each even rank passes an activation to the odd rank
    // after it, which answers with a gradient (world set, global ranks, tags 1 and 2).
    let mut activation = [0.0f32; 8];
    let mut gradient = [0.0f32; 8];
    if rank % 2 == 0 {
        let sent: Vec<f32> = (0..8).map(|i| (rank * 10 + i) as f32).collect();
        rt.scope(|s| -> tutti::Result<()> {
            // Both posted before either is waited for: the order of arrival does not matter.
            let mut out = s.send(rt.world(), &sent, rank + 1, 1)?;
            let mut back = s.recv(rt.world(), &mut gradient, rank + 1, 2)?;
            out.wait(None)?;
            back.wait(None)
        })?;
        checks.expect("gradient", gradient.to_vec(), sent.iter().map(|x| -x).collect());
    } else {
        rt.recv(rt.world(), &mut activation, rank - 1, 1)?;
        let reply: Vec<f32> = activation.iter().map(|x| -x).collect();
        rt.send(rt.world(), &reply, rank - 1, 2)?;
        checks.expect("activation", activation.to_vec(), (0..8).map(|i| ((rank - 1) * 10 + i) as f32).collect());
    }

    rt.barrier(rt.world())?;
    println!(
        "rank {}: rust {} set {} sum, world sum = {}, broadcast, allgather of {} rows, send/recv: {}",
        rank,
        if rank % 2 == 0 { "even" } else { "odd" },
        mine.id(),
        in_world[0],
        gathered.shape[0],
        if checks.failed == 0 { "ok" } else { "WRONG" }
    );
    rt.finalize()?;
    Ok(checks.failed)
}
