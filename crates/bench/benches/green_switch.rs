//! Micro-benchmark of the green-thread context switch (`stackrt::green::context`): one round
//! trip, i.e. a switch to a green context and its switch back, as a yield to another green
//! thread and back costs in the scheduler's best case (no queue work). Compare with Go's
//! `runtime.Gosched` ping-pong (issue: green threads; goal under 50 ns per switch).

use criterion::{criterion_group, criterion_main, Criterion};
use stackrt::green::context::{init, switch, Stack};

#[repr(C)]
struct Pair {
    main_sp: usize,
    green_sp: usize,
}

extern "C" fn bouncing_entry(arg: usize) -> ! {
    let pair = arg as *mut Pair;
    loop {
        // SAFETY: the bench keeps `pair` alive while it switches to this context, and never
        // resumes the context afterwards.
        unsafe { switch(&raw mut (*pair).green_sp, (*pair).main_sp) };
    }
}

fn round_trip(c: &mut Criterion) {
    let stack = Stack::new(64 * 1024).expect("a 64 KiB stack");
    let mut pair = Pair {
        main_sp: 0,
        green_sp: 0,
    };
    let p = &raw mut pair;
    // SAFETY: the stack is ours and unused; `pair` outlives the benchmark.
    unsafe { (*p).green_sp = init(stack.top(), bouncing_entry, p as usize) };
    c.bench_function("green_switch_round_trip", |b| {
        // SAFETY: the green context is suspended between iterations.
        b.iter(|| unsafe { switch(&raw mut (*p).main_sp, (*p).green_sp) })
    });
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
