//! The green-thread context switch (`stackrt::green::context`, assembly in
//! `crate::green::arch`): a million round trips between the test's own context and a green
//! one keep a shared count in step (both targets: `cargo test -p stackrt --target
//! i686-unknown-linux-gnu --test green_switch` runs it in 32 bits), and on x86-64 the
//! callee-saved registers (rbx, rbp, r12-r15) of each side survive the other side setting them
//! all to different values.

#[cfg(target_arch = "x86_64")]
use std::arch::asm;

use stackrt::green::context::{init, switch, Stack};

/// The two saved stack pointers and what the green side counts.
#[repr(C)]
struct Pair {
    main_sp: usize,
    green_sp: usize,
    count: u64,
    /// Registers the green side found changed across its switches (0: none).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    green_bad: u64,
}

extern "C" fn counting_entry(arg: usize) -> ! {
    let pair = arg as *mut Pair;
    loop {
        // SAFETY: `pair` outlives every switch to this context (the test keeps it alive and
        // never resumes the context after the last round).
        unsafe {
            (*pair).count += 1;
            switch(&raw mut (*pair).green_sp, (*pair).main_sp);
        }
    }
}

#[test]
fn a_million_round_trips_keep_both_sides_in_step() {
    let stack = Stack::new(64 * 1024).unwrap();
    let mut pair = Pair {
        main_sp: 0,
        green_sp: 0,
        count: 0,
        green_bad: 0,
    };
    let p = &raw mut pair;
    // SAFETY: the stack is ours and unused; `pair` lives until the end of the test.
    unsafe { (*p).green_sp = init(stack.top(), counting_entry, p as usize) };
    for i in 1..=1_000_000u64 {
        // SAFETY: the green context is suspended (it switched back, or never ran).
        unsafe { switch(&raw mut (*p).main_sp, (*p).green_sp) };
        // SAFETY: the green context is suspended again.
        assert_eq!(unsafe { (*p).count }, i);
    }
}

#[cfg(target_arch = "x86_64")]
/// Sets every callee-saved register to `seed + k`, switches, and returns a bit mask of the
/// registers that did not come back with their values.
///
/// # Safety
/// As for [`switch`].
unsafe fn switch_checked(save: *mut usize, to: usize, seed: u64) -> u64 {
    let bad: u64;
    // SAFETY: rbx and rbp (which the compiler may use) are pushed and popped around the call;
    // r12-r15 are declared clobbered (they are set here); the switch follows the C ABI. No
    // `nostack`: the block pushes, and rsp is 16-byte aligned on entry.
    unsafe {
        asm!(
            "push rbx",
            "push rbp",
            "mov rbx, {seed}",
            "lea rbp, [rbx + 1]",
            "lea r12, [rbx + 2]",
            "lea r13, [rbx + 3]",
            "lea r14, [rbx + 4]",
            "lea r15, [rbx + 5]",
            "push rbx",
            "push rbx",
            "call {sw}",
            "pop rax",
            "pop rax",
            "xor ecx, ecx",
            "cmp rbx, rax",
            "setne cl",
            "lea rdx, [rax + 1]",
            "cmp rbp, rdx",
            "setne dl",
            "shl dl, 1",
            "or cl, dl",
            "lea rdx, [rax + 2]",
            "cmp r12, rdx",
            "setne dl",
            "shl dl, 2",
            "or cl, dl",
            "lea rdx, [rax + 3]",
            "cmp r13, rdx",
            "setne dl",
            "shl dl, 3",
            "or cl, dl",
            "lea rdx, [rax + 4]",
            "cmp r14, rdx",
            "setne dl",
            "shl dl, 4",
            "or cl, dl",
            "lea rdx, [rax + 5]",
            "cmp r15, rdx",
            "setne dl",
            "shl dl, 5",
            "or cl, dl",
            "movzx eax, cl",
            "pop rbp",
            "pop rbx",
            seed = in(reg) seed,
            sw = sym stackrt_green_switch_for_test,
            in("rdi") save,
            in("rsi") to,
            out("rax") bad,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        );
    }
    bad
}

#[cfg(target_arch = "x86_64")]
extern "C" {
    #[link_name = "stackrt_green_switch"]
    fn stackrt_green_switch_for_test(save: *mut usize, to: usize);
}

#[cfg(target_arch = "x86_64")]
extern "C" fn clobbering_entry(arg: usize) -> ! {
    let pair = arg as *mut Pair;
    let mut round = 0u64;
    loop {
        round += 1;
        // SAFETY: as in `counting_entry`.
        unsafe {
            (*pair).count += 1;
            let bad = switch_checked(&raw mut (*pair).green_sp, (*pair).main_sp, round << 20);
            (*pair).green_bad |= bad;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn callee_saved_registers_survive_the_other_side() {
    let stack = Stack::new(64 * 1024).unwrap();
    let mut pair = Pair {
        main_sp: 0,
        green_sp: 0,
        count: 0,
        green_bad: 0,
    };
    let p = &raw mut pair;
    // SAFETY: as in the first test.
    unsafe { (*p).green_sp = init(stack.top(), clobbering_entry, p as usize) };
    for i in 1..=1000u64 {
        // SAFETY: the green context is suspended.
        let bad = unsafe { switch_checked(&raw mut (*p).main_sp, (*p).green_sp, 0x5a5a_0000 + i) };
        assert_eq!(
            bad, 0,
            "main side, round {i}: registers changed (mask {bad:#b})"
        );
        // SAFETY: the green context is suspended again.
        unsafe {
            assert_eq!((*p).count, i);
            assert_eq!((*p).green_bad, 0, "green side, round {i}");
        }
    }
}
