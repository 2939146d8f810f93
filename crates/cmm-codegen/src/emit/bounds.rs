//! The input of the static stack bounds ([`crate::bounds`]) from the emission stage: every
//! function printed under the chosen mechanism, through a mechanism that records frames and
//! call sites and otherwise writes what the mechanism writes.

use std::cell::RefCell;
use std::collections::HashMap;

use regalloc2::PReg;

use super::mech::{CallSite, FrameInfo, Mechanism};
use super::{EmitError, EmitOptions, MechKind, Target};
use crate::bounds::{self, BoundsConfig, BoundsFunction, BoundsInput, StackBounds};
use crate::callgraph::{self, CallGraphConfig};
use crate::LoweredProgram;

/// What the recorder saw of one function.
#[derive(Clone, Debug, Default)]
struct Seen {
    /// `(call overhead + S, incoming argument bytes)` from the prologue.
    frame: Option<(u32, u32)>,
    /// `(callee symbol, external, arg bytes)` in program order.
    calls: Vec<(String, bool, u32)>,
}

/// A mechanism that delegates everything to `inner` and records frames and calls.
struct Recorder<'a> {
    inner: &'a dyn Mechanism,
    index: HashMap<String, usize>,
    seen: RefCell<(usize, Vec<Seen>)>,
}

impl Recorder<'_> {
    fn call(&self, c: &CallSite, external: bool) {
        let mut seen = self.seen.borrow_mut();
        let cur = seen.0;
        if let Some(s) = seen.1.get_mut(cur) {
            s.calls.push((c.callee.to_string(), external, c.arg_bytes));
        }
    }
}

impl Mechanism for Recorder<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn abi_id(&self) -> u32 {
        self.inner.abi_id()
    }
    fn reserved_regs(&self, target: Target) -> Vec<PReg> {
        self.inner.reserved_regs(target)
    }
    fn entry_arg_offset(&self, target: Target) -> u32 {
        self.inner.entry_arg_offset(target)
    }
    fn call_overhead(&self, target: Target) -> u32 {
        self.inner.call_overhead(target)
    }
    fn stack_need_word(&self, f: &FrameInfo) -> Option<u32> {
        self.inner.stack_need_word(f)
    }
    fn frame_bottom(&self, target: Target) -> u32 {
        self.inner.frame_bottom(target)
    }
    fn frame_align(&self, target: Target) -> u32 {
        self.inner.frame_align(target)
    }
    fn call_base(&self, target: Target) -> Option<&'static str> {
        self.inner.call_base(target)
    }
    fn prologue(&self, f: &FrameInfo, out: &mut String) {
        {
            let mut seen = self.seen.borrow_mut();
            if let Some(&i) = self.index.get(f.symbol) {
                seen.0 = i;
                let frame = self.inner.call_overhead(f.target) + f.frame_size;
                seen.1[i] = Seen {
                    frame: Some((frame, f.arg_bytes)),
                    calls: Vec::new(),
                };
            } else {
                seen.0 = usize::MAX;
            }
        }
        self.inner.prologue(f, out);
    }
    fn epilogue(&self, f: &FrameInfo, out: &mut String) {
        self.inner.epilogue(f, out);
    }
    fn call_prefix(&self, c: &CallSite, out: &mut String) -> u32 {
        self.call(c, false);
        self.inner.call_prefix(c, out)
    }
    fn call_suffix(&self, c: &CallSite, out: &mut String) {
        self.inner.call_suffix(c, out);
    }
    fn extern_call_prefix(&self, c: &CallSite, out: &mut String) {
        self.call(c, true);
        self.inner.extern_call_prefix(c, out);
    }
    fn extern_call_check(&self, c: &CallSite, out: &mut String) {
        self.inner.extern_call_check(c, out);
    }
    fn extern_call(&self, c: &CallSite, out: &mut String) {
        self.inner.extern_call(c, out);
    }
    fn extern_call_return(&self, c: &CallSite, out: &mut String) {
        self.inner.extern_call_return(c, out);
    }
}

fn whole(message: String) -> EmitError {
    EmitError {
        function: None,
        message,
    }
}

/// The stack bounds of every function of `p` under `opts` (what `cmm compile FILE --emit
/// stack-bounds` prints). A C function counts as its pushed arguments plus a budget: under
/// `lookahead` the look-ahead analysis' (green threads' C calls run on the worker's stack and
/// leave a few words on the thread's), under every other mechanism the C reserve the
/// mechanisms keep for a C call on the thread's own stack ([`callgraph::default_extern_budget`],
/// 8 KiB; `heap` runs C calls on the thread's C stack and counts them there).
pub fn stack_bounds(p: &LoweredProgram, opts: &EmitOptions) -> Result<StackBounds, EmitError> {
    super::check_pointer_type(p, opts)?;
    let target = opts.target;
    // The mechanism whose frames the real emission prints (`lookahead` under green threads
    // word-aligns its frames; its plan-less first pass prints the same frames as the second).
    let planless;
    let inner: &dyn Mechanism = match opts.mech {
        MechKind::Lookahead { .. } => {
            planless = super::mech::lookahead::Lookahead::planless(p);
            &planless
        }
        kind => super::mech::by_kind(kind),
    };
    let rec = Recorder {
        inner,
        index: super::function_index(p),
        seen: RefCell::new((usize::MAX, vec![Seen::default(); p.functions.len()])),
    };
    super::print_all(p, target, &rec)?;
    let (_, seen) = rec.seen.into_inner();
    let taken = super::address_taken(p);
    let mut functions = Vec::with_capacity(p.functions.len());
    for (i, (f, s)) in p.functions.iter().zip(seen).enumerate() {
        let (frame, arg_bytes) = s
            .frame
            .ok_or_else(|| whole(format!("function `{}` was not printed", f.name)))?;
        let mut calls = Vec::with_capacity(s.calls.len());
        for (callee, external, arg_bytes) in s.calls {
            let callee = super::resolve_callee(p, &rec.index, &callee, external)?;
            calls.push(callgraph::CallSite { callee, arg_bytes });
        }
        functions.push(BoundsFunction {
            name: f.name.clone(),
            arg_bytes,
            frame,
            calls,
            root: f.name == "main" || taken[i],
        });
    }
    let lookahead = matches!(opts.mech, MechKind::Lookahead { .. });
    let mut cg = CallGraphConfig::new(callgraph::DEFAULT_CHUNK_SIZE, target.slot());
    cg.green = lookahead && crate::lower::is_green_threads(p);
    let budgets = p.externs.iter().map(|e| cg.budget_of(&e.name)).collect();
    let budget_note = if cg.green {
        format!(
            "a C call counts as its arguments plus {} bytes (it runs on the worker's stack), a \
             call into the thread library plus {} (sthread_exit {})",
            callgraph::GREEN_CCALL_BUDGET,
            callgraph::libcall_budget(target.slot()),
            callgraph::thread_library_budget(callgraph::THREAD_EXIT, target.slot())
        )
    } else {
        format!(
            "a C call counts as its arguments plus {} bytes, the C reserve of every mechanism",
            cg.extern_budget
        )
    };
    let config = BoundsConfig {
        target: match target {
            Target::I686 => "i686",
            Target::X86_64 => "x86_64",
        }
        .into(),
        mech: opts.mech.name().into(),
        budgets,
        budget_note,
    };
    Ok(bounds::analyze(
        &BoundsInput {
            functions,
            externs: p.externs.iter().map(|e| e.name.clone()).collect(),
        },
        &config,
    ))
}
