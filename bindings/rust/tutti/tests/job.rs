//! The safe API against a real tuttid and the real library: ranks are threads of this process.
mod common;

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use common::Tuttid;
use tutti::{AllreduceOptions, Bool, Error, Op, Tensor, TensorMut};

#[test]
fn collectives_on_two_sets() {
    let tuttid = Tuttid::start();
    let results = tuttid.job("collectives", 4, |rt, rank| {
        assert_eq!((rt.rank().unwrap(), rt.size().unwrap()), (rank, 4));
        let evens = rt.add_process_set(&[0, 2], None).unwrap();
        let odds = rt.add_process_set(&[1, 3], None).unwrap();
        let (mine, first) = if rank % 2 == 0 { (evens, 0) } else { (odds, 1) };
        assert_eq!(mine.ranks().unwrap(), vec![first, first + 2]);
        assert_eq!(mine.rank().unwrap(), rank / 2);

        let mut values: Vec<f64> = (0..5).map(|i| (rank * 10 + i) as f64).collect();
        rt.allreduce("values", mine, &mut values, Op::Sum).unwrap();
        let expected: Vec<f64> = (0..5).map(|i| (20 * first + 20 + 2 * i) as f64).collect();
        assert_eq!(values, expected);

        // Average with a postscale, out of place, i32.
        let input = [rank + 1; 3];
        let mut output = [0i32; 3];
        let options = AllreduceOptions::new(Op::Average).postscale(10.0);
        rt.allreduce_into("scaled", rt.world(), &input, &mut output, &options).unwrap();
        assert_eq!(output, [20; 3]); // (1 + 2 + 3 + 4) / 4 = 2 (an integer average truncates), * 10

        let mut weights = if rank == first { vec![7i64, 8, 9] } else { vec![0; 3] };
        rt.broadcast("weights", mine, &mut weights, first).unwrap();
        assert_eq!(weights, vec![7, 8, 9]);

        // Rank r gives r + 1 rows of two values: uneven first dimensions.
        let rows = vec![rank as i16; 2 * (rank as usize + 1)];
        let gathered = rt.allgather("rows", rt.world(), Tensor::new(&rows, &[rank as usize + 1, 2]).unwrap()).unwrap();
        assert_eq!(gathered.shape, vec![10, 2]);
        let expected: Vec<i16> = (0..4).flat_map(|r| vec![r as i16; 2 * (r as usize + 1)]).collect();
        assert_eq!(gathered.data, expected);

        let flags = [Bool::from(rank == 3)];
        let mut any = [Bool(0)];
        rt.allreduce_into("any", rt.world(), &flags, &mut any, &AllreduceOptions::new(Op::Max)).unwrap();
        assert!(any[0].get());

        // Pairs (0,1) and (2,3) exchange on the world: a send and its reply.
        let partner = rank ^ 1;
        let mut got = [0.0f32; 4];
        if rank % 2 == 0 {
            rt.send(rt.world(), &[rank as f32; 4], partner, 5).unwrap();
            rt.recv(rt.world(), &mut got, partner, 6).unwrap();
        } else {
            rt.recv(rt.world(), &mut got, partner, 5).unwrap();
            let reply: Vec<f32> = got.iter().map(|x| -x).collect();
            rt.send(rt.world(), &reply, partner, 6).unwrap();
        }
        let sign = if rank % 2 == 0 { -1.0 } else { 1.0 };
        assert_eq!(got, [sign * (rank & !1) as f32; 4]);
        rt.barrier(rt.world()).unwrap();
        rt.finalize().unwrap();
        rank
    });
    assert_eq!(results, vec![0, 1, 2, 3]);
}

#[test]
fn a_non_member_gets_not_a_member_with_the_library_message() {
    let tuttid = Tuttid::start();
    tuttid.job("not-a-member", 3, |rt, rank| {
        let pair = rt.add_process_set(&[0, 1], None).unwrap();
        let mut data = [1.0f32; 4];
        if rank == 2 {
            let error = rt.allreduce("x", pair, &mut data, Op::Sum).unwrap_err();
            assert_eq!(error, Error::NotAMember("rank 2 is not a member of process set 1".into()));
            assert_eq!(error.status(), -3);
            assert_eq!(pair.rank().unwrap_err(), Error::NotAMember("rank 2 is not a member of process set 1".into()));
            assert!(!pair.includes_me().unwrap());
            assert_eq!(pair.autotune().unwrap_err(), Error::NotAMember("rank 2 is not a member of process set 1".into()));
        } else {
            pair.autotune().unwrap();
            rt.allreduce("x", pair, &mut data, Op::Sum).unwrap();
            assert_eq!(data, [2.0; 4]);
        }
    });
}

#[test]
fn a_set_of_another_runtime_is_refused() {
    // Two single-rank jobs in one thread: a set handle carries its runtime, so using it with
    // the other is caught here instead of being taken as one of that runtime's ids.
    let tuttid = Tuttid::start();
    let join = |job: &str| {
        let options = tutti::InitOptions::new()
            .coordinator(&tuttid.endpoint)
            .job(&format!("{}-{}", job, std::process::id()))
            .rank(0)
            .size(1);
        tutti::Runtime::init_with(&options).unwrap()
    };
    let (first, second) = (join("first"), join("second"));
    let mut data = [1.5f32; 2];
    let error = second.allreduce("x", first.world(), &mut data, Op::Sum).unwrap_err();
    assert_eq!(error, Error::InvalidArgument("process set 0 belongs to another runtime".into()));
    first.allreduce("x", first.world(), &mut data, Op::Sum).unwrap();
    assert_eq!(data, [1.5; 2]);
    // A name with a NUL byte never reaches the library.
    let error = first.allreduce("a\0b", first.world(), &mut data, Op::Sum).unwrap_err();
    assert_eq!(error, Error::InvalidArgument("tensor name \"a\\0b\" contains a NUL byte".into()));
    second.finalize().unwrap();
    first.finalize().unwrap();
}

#[test]
fn requests_wait_with_a_timeout_in_other_threads_and_scopes_settle_them() {
    let tuttid = Tuttid::start();
    let (late_tx, late_rx) = mpsc::channel::<()>();
    let (late_tx, late_rx) = (Mutex::new(late_tx), Mutex::new(late_rx));
    tuttid.job("requests", 2, |rt, rank| {
        let mut late = [rank as f32 + 1.0; 3];
        if rank == 0 {
            rt.scope(|s| {
                let mut request = s.allreduce("late", rt.world(), &mut late, Op::Sum).unwrap();
                // Rank 1 has not submitted: the wait expires and the request stays pending.
                let error = request.wait(Some(Duration::from_millis(200))).unwrap_err();
                assert_eq!(
                    error,
                    Error::Timeout("wait for 'late' timed out after 200 ms; the request is still pending".into())
                );
                assert!(!request.test().unwrap());
                late_tx.lock().unwrap().send(()).unwrap();
                // Requests are Send: another thread completes the wait.
                std::thread::scope(|t| {
                    t.spawn(move || request.wait(Some(Duration::from_secs(30))).unwrap());
                });
            });
        } else {
            late_rx.lock().unwrap().recv().unwrap();
            rt.allreduce("late", rt.world(), &mut late, Op::Sum).unwrap();
        }
        assert_eq!(late, [3.0; 3]);

        // Two requests in flight, neither waited on: the scope waits for them before returning,
        // so the borrowed buffers hold the results afterwards.
        let (mut a, mut b) = ([rank; 2], [10 * rank as i64; 2]);
        rt.scope(|s| {
            s.allreduce("a", rt.world(), &mut a, Op::Max).unwrap();
            std::mem::forget(s.allreduce("b", rt.world(), TensorMut::from(&mut b), Op::Sum).unwrap());
        });
        assert_eq!((a, b), ([1; 2], [10; 2]));

        // A mismatch (different element counts) fails on every member, with its message.
        let mut wrong = vec![0u8; 2 + rank as usize];
        let error = rt.allreduce("wrong", rt.world(), &mut wrong, Op::Sum).unwrap_err();
        assert_eq!(
            error,
            Error::Mismatch(
                "mismatched 'wrong' on process set 0: rank 0 sent allreduce uint8[2] op=sum, \
                 rank 1 sent allreduce uint8[3] op=sum"
                    .into()
            )
        );
    });
}
