//! Handler stacks of the worker OS threads (chunked mechanisms): where the chunk handlers and
//! every C call of their green threads run, so that a green thread's stack holds only its C--
//! frames.

use crate::green::context::Stack;

/// Gives the calling worker OS thread a handler stack of its own (the chunked mechanisms, see
/// `crate::chunk::handler`): the chunk handlers and every C call of its green threads run
/// there (under `lookahead` the thread library's too), so a green thread's stack holds only
/// its C-- frames. It lives as long as the process.
pub(super) fn give_handler_stack() {
    let stack = handler_stack().unwrap_or_else(|e| {
        super::fail(&format!(
            "stackrt: cannot map a worker's handler stack: {e}"
        ))
    });
    use_handler_stack(stack);
}

/// A worker's handler stack (chunked mechanisms), mapped before its OS thread starts so that a
/// spare that cannot have one is not started (`handoff`).
pub(super) fn handler_stack() -> Result<Stack, String> {
    Stack::new(crate::chunk::handler::MIN_HANDLER_STACK).map_err(|e| e.to_string())
}

/// Makes `stack` the calling worker OS thread's handler stack for good.
pub(super) fn use_handler_stack(stack: Stack) {
    crate::chunk::handler::set_worker_stack(stack.top() & !15);
    core::mem::forget(stack);
}
