//! Free chunks: an intrusive LIFO list threaded through the headers' `link` word (a thread's
//! private cache, no lock), a stack of such lists ("batches") for the pool shared by all
//! threads (each shared list guarded by a `crate::base::spin::SpinLock`).
//!
//! Nothing here allocates and nothing makes a system call but the lock's `sched_yield` under
//! contention. Chunks move between a thread and the shared pool a *batch* at a time: the lock
//! is taken once per batch and held for a constant-time splice, so threads that overflow and
//! underflow a lot do not serialize on it (each lock operation moves up to
//! `RuntimeConfig::max_batch` chunks). The holder makes no call and touches no probed stack,
//! so a thread can never be interrupted by its own stack-growth `SIGSEGV` while holding it
//! (the MMU mechanisms take chunks in that handler): other holders release it after a few
//! instructions.
//!
//! While a chunk is free, its per-use header words are scratch for the lists: word 7 (`link`)
//! links the chunks of one list; in the first chunk of a batch, word 1 (`prev_sp`) holds the
//! batch's length, word 2 (`prev_header`) the next batch and word 4 (`resume`) the batch's
//! last chunk. Linking a chunk into a chain rewrites all of them.

use core::ptr;

use super::header::ChunkHeader;

/// A LIFO list of free chunks, linked through [`ChunkHeader::link`], with its length and last
/// chunk (so whole lists splice in constant time).
#[derive(Debug)]
pub struct FreeList {
    head: *mut ChunkHeader,
    tail: *mut ChunkHeader,
    len: usize,
}

impl FreeList {
    pub const fn new() -> Self {
        FreeList {
            head: ptr::null_mut(),
            tail: ptr::null_mut(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pushes a free chunk.
    ///
    /// # Safety
    /// `h` is a chunk header owned by the caller (in no chain or list) whose memory stays
    /// mapped while it is in the list.
    pub unsafe fn push(&mut self, h: *mut ChunkHeader) {
        // SAFETY: the caller hands over an exclusively owned, mapped header.
        unsafe { (*h).link = self.head };
        if self.head.is_null() {
            self.tail = h;
        }
        self.head = h;
        self.len += 1;
    }

    /// Pops the most recently pushed chunk; its `link` is reset to null.
    pub fn pop(&mut self) -> Option<*mut ChunkHeader> {
        if self.head.is_null() {
            return None;
        }
        let h = self.head;
        // SAFETY: every header in the list was pushed under push()'s contract: mapped and
        // owned by the list.
        unsafe {
            self.head = (*h).link;
            (*h).link = ptr::null_mut();
        }
        self.len -= 1;
        if self.head.is_null() {
            self.tail = ptr::null_mut();
        }
        Some(h)
    }

    /// Puts all of `other` on top of this list (constant time).
    pub fn splice(&mut self, other: FreeList) {
        if other.is_empty() {
            return;
        }
        // SAFETY: other's tail is a mapped header owned by `other`, now by this list.
        unsafe { (*other.tail).link = self.head };
        if self.head.is_null() {
            self.tail = other.tail;
        }
        self.head = other.head;
        self.len += other.len;
    }

    /// Keeps the `keep` most recently pushed chunks and returns the rest (the older ones) as a
    /// list of their own. Walks `keep` links.
    pub fn split_off(&mut self, keep: usize) -> FreeList {
        if keep >= self.len {
            return FreeList::new();
        }
        if keep == 0 {
            return core::mem::take(self);
        }
        let mut last = self.head;
        for _ in 1..keep {
            // SAFETY: the list holds more than `keep` mapped headers.
            last = unsafe { (*last).link };
        }
        // SAFETY: `last` is the keep-th header of the list; the rest starts at its link.
        let rest_head = unsafe { (*last).link };
        // SAFETY: as above.
        unsafe { (*last).link = ptr::null_mut() };
        let rest = FreeList {
            head: rest_head,
            tail: self.tail,
            len: self.len - keep,
        };
        self.tail = last;
        self.len = keep;
        rest
    }

    /// The headers in pop order (for tests and invariant checks).
    pub fn iter(&self) -> impl Iterator<Item = *mut ChunkHeader> + '_ {
        let mut cur = self.head;
        core::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            let h = cur;
            // SAFETY: headers in the list are mapped (push() contract).
            cur = unsafe { (*h).link };
            Some(h)
        })
    }
}

impl Default for FreeList {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: a list exclusively owns the free chunks it links; nothing ties them to a thread.
unsafe impl Send for FreeList {}

/// A LIFO stack of batches (non-empty [`FreeList`]s), linked through the first chunk of each
/// batch (see the module docs). Push and pop are constant time.
#[derive(Debug)]
pub struct BatchStack {
    top: *mut ChunkHeader,
    batches: usize,
    chunks: usize,
}

impl BatchStack {
    pub const fn new() -> Self {
        BatchStack {
            top: ptr::null_mut(),
            batches: 0,
            chunks: 0,
        }
    }

    /// Chunks in all batches.
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    pub fn is_empty(&self) -> bool {
        self.top.is_null()
    }

    /// Pushes a batch; an empty list is ignored.
    pub fn push(&mut self, batch: FreeList) {
        if batch.is_empty() {
            return;
        }
        let h = batch.head;
        // SAFETY: h heads a list of free, mapped chunks now owned by this stack; the batch
        // words of a free chunk are scratch (module docs).
        unsafe {
            (*h).prev_sp = batch.len;
            (*h).prev_header = self.top;
            (*h).resume = batch.tail as usize;
        }
        self.top = h;
        self.batches += 1;
        self.chunks += batch.len;
    }

    /// Pops the most recently pushed batch.
    pub fn pop(&mut self) -> Option<FreeList> {
        if self.top.is_null() {
            return None;
        }
        let h = self.top;
        // SAFETY: h heads a batch pushed by push(): its batch words are intact.
        let (len, next, tail) = unsafe {
            (
                (*h).prev_sp,
                (*h).prev_header,
                (*h).resume as *mut ChunkHeader,
            )
        };
        self.top = next;
        self.batches -= 1;
        self.chunks -= len;
        Some(FreeList { head: h, tail, len })
    }

    /// The headers of all batches, newest batch first (for tests).
    pub fn headers(&self) -> impl Iterator<Item = *mut ChunkHeader> + '_ {
        let mut batch = self.top;
        let mut cur: *mut ChunkHeader = ptr::null_mut();
        core::iter::from_fn(move || {
            if cur.is_null() {
                if batch.is_null() {
                    return None;
                }
                cur = batch;
                // SAFETY: batch heads are mapped and their batch words intact.
                batch = unsafe { (*batch).prev_header };
            }
            let h = cur;
            // SAFETY: headers in a batch are mapped.
            cur = unsafe { (*h).link };
            Some(h)
        })
    }
}

impl Default for BatchStack {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: as for FreeList.
unsafe impl Send for BatchStack {}

#[cfg(test)]
mod tests {
    //! The free lists against a plain-`Vec` model: every operation's effect on the order of
    //! every list and batch, the lengths, the tails (checked by later splices), the scratch
    //! words of batches.

    use super::*;
    use proptest::prelude::*;

    /// `n` zeroed fake chunk headers; only their `link` and batch words are used here.
    fn headers(n: usize) -> Box<[ChunkHeader]> {
        (0..n)
            .map(|_| ChunkHeader {
                thread_stack: 0,
                prev_sp: 0,
                prev_header: ptr::null_mut(),
                limit: 0,
                resume: 0,
                map_base: 0,
                map_len: 0,
                link: ptr::null_mut(),
            })
            .collect()
    }

    fn index(base: *mut ChunkHeader, h: *mut ChunkHeader) -> usize {
        (h as usize - base as usize) / core::mem::size_of::<ChunkHeader>()
    }

    /// A list's headers in pop order, as indices.
    fn list_order(base: *mut ChunkHeader, l: &FreeList) -> Vec<usize> {
        l.iter().map(|h| index(base, h)).collect()
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Pop from list `from`, push on list `to`.
        Move { from: usize, to: usize },
        /// Splice all of list `from` on top of list `to`.
        Splice { from: usize, to: usize },
        /// `split_off(keep)` of list `from`; the returned older part is spliced onto `to`.
        Split { from: usize, keep: usize, to: usize },
        /// Push all of list `from` as a batch.
        BatchPush { from: usize },
        /// Pop a batch and splice it onto list `to`.
        BatchPop { to: usize },
    }

    const LISTS: usize = 3;
    const CHUNKS: usize = 24;

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..LISTS, 0..LISTS).prop_map(|(from, to)| Op::Move { from, to }),
            2 => (0..LISTS, 0..LISTS).prop_map(|(from, to)| Op::Splice { from, to }),
            3 => (0..LISTS, 0..12usize, 0..LISTS).prop_map(|(from, keep, to)| Op::Split {
                from,
                keep,
                to
            }),
            2 => (0..LISTS).prop_map(|from| Op::BatchPush { from }),
            2 => (0..LISTS).prop_map(|to| Op::BatchPop { to }),
        ]
    }

    proptest! {
        #[test]
        fn free_lists_and_batches_follow_the_model(ops in prop::collection::vec(op(), 1..80)) {
            let mut mem = headers(CHUNKS);
            let base = mem.as_mut_ptr();
            let mut lists: Vec<FreeList> = (0..LISTS).map(|_| FreeList::new()).collect();
            let mut stack = BatchStack::new();
            // The model: each list top last; the batch stack top batch last.
            let mut model: Vec<Vec<usize>> = vec![Vec::new(); LISTS];
            let mut mbatches: Vec<Vec<usize>> = Vec::new();
            for i in 0..CHUNKS {
                // SAFETY: a distinct header of `mem`, in no list, alive for the whole test.
                unsafe { lists[0].push(base.add(i)) };
                model[0].push(i);
            }
            for op in ops {
                match op {
                    Op::Move { from, to } => {
                        let got = lists[from].pop();
                        match model[from].pop() {
                            None => prop_assert!(got.is_none()),
                            Some(i) => {
                                let h = got.expect("model has a chunk to pop");
                                prop_assert_eq!(index(base, h), i);
                                // SAFETY: h was just popped: a header of `mem` in no list.
                                prop_assert!(unsafe { (*h).link }.is_null(), "pop resets link");
                                // SAFETY: as above.
                                unsafe { lists[to].push(h) };
                                model[to].push(i);
                            }
                        }
                    }
                    Op::Splice { from, to } => {
                        if from != to {
                            let l = core::mem::take(&mut lists[from]);
                            lists[to].splice(l);
                            let l = core::mem::take(&mut model[from]);
                            model[to].extend(l);
                        }
                    }
                    Op::Split { from, keep, to } => {
                        let rest = lists[from].split_off(keep);
                        let m = &mut model[from];
                        let cut = m.len().saturating_sub(keep);
                        let mrest: Vec<usize> = m.drain(..cut).collect();
                        prop_assert_eq!(list_order(base, &rest), mrest.iter().rev().copied().collect::<Vec<_>>());
                        if from == to {
                            // Put the older part back underneath: the list is whole again.
                            let kept = core::mem::replace(&mut lists[from], rest);
                            lists[from].splice(kept);
                            let kept = core::mem::replace(&mut model[from], mrest);
                            model[from].extend(kept);
                        } else {
                            lists[to].splice(rest);
                            model[to].extend(mrest);
                        }
                    }
                    Op::BatchPush { from } => {
                        stack.push(core::mem::take(&mut lists[from]));
                        let b = core::mem::take(&mut model[from]);
                        if !b.is_empty() {
                            mbatches.push(b);
                        }
                    }
                    Op::BatchPop { to } => {
                        let got = stack.pop();
                        match mbatches.pop() {
                            None => prop_assert!(got.is_none()),
                            Some(b) => {
                                let got = got.expect("model has a batch");
                                prop_assert_eq!(got.len(), b.len());
                                prop_assert_eq!(
                                    list_order(base, &got),
                                    b.iter().rev().copied().collect::<Vec<_>>()
                                );
                                lists[to].splice(got);
                                model[to].extend(b);
                            }
                        }
                    }
                }
                for (l, m) in lists.iter().zip(&model) {
                    prop_assert_eq!(list_order(base, l), m.iter().rev().copied().collect::<Vec<_>>());
                    prop_assert_eq!(l.len(), m.len());
                    prop_assert_eq!(l.is_empty(), m.is_empty());
                }
                let want: Vec<usize> =
                    mbatches.iter().rev().flat_map(|b| b.iter().rev().copied()).collect();
                let got: Vec<usize> = stack.headers().map(|h| index(base, h)).collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(stack.chunks(), mbatches.iter().map(Vec::len).sum::<usize>());
                prop_assert_eq!(stack.is_empty(), mbatches.is_empty());
            }
            // Every chunk is in exactly one list or batch.
            let mut all: Vec<usize> = model.concat();
            all.extend(mbatches.concat());
            all.sort_unstable();
            prop_assert_eq!(all, (0..CHUNKS).collect::<Vec<_>>());
        }
    }

    #[test]
    fn split_off_edges() {
        let mut mem = headers(4);
        let base = mem.as_mut_ptr();
        let mut l = FreeList::new();
        assert!(l.split_off(0).is_empty());
        for i in 0..4 {
            // SAFETY: distinct headers of `mem`, alive for the test.
            unsafe { l.push(base.add(i)) };
        }
        // Keeping all (or more) returns nothing.
        assert!(l.split_off(4).is_empty());
        assert!(l.split_off(9).is_empty());
        assert_eq!(list_order(base, &l), [3, 2, 1, 0]);
        // Keeping one: the newest stays, the three older ones go, oldest last.
        let rest = l.split_off(1);
        assert_eq!(list_order(base, &l), [3]);
        assert_eq!(list_order(base, &rest), [2, 1, 0]);
        // The kept list's tail is right: a splice under it links the rest after chunk 3.
        let mut under = rest;
        under.splice(l);
        assert_eq!(list_order(base, &under), [3, 2, 1, 0]);
        // Keeping none takes everything.
        let all = under.split_off(0);
        assert!(under.is_empty());
        assert_eq!(list_order(base, &all), [3, 2, 1, 0]);
        // Splicing an empty list changes nothing; splicing onto an empty one takes its tail.
        let mut e = FreeList::new();
        e.splice(FreeList::new());
        assert!(e.is_empty());
        e.splice(all);
        let h = e.pop().unwrap();
        let mut more = FreeList::new();
        // SAFETY: h was just popped from `e`: a header of `mem` in no list.
        unsafe { more.push(h) };
        // `e` (2, 1, 0) goes on top of `more` (3): its tail (0) must link to 3.
        more.splice(e);
        assert_eq!(list_order(base, &more), [2, 1, 0, 3]);
    }

    #[test]
    fn batch_words_describe_the_batch() {
        let mut mem = headers(5);
        let base = mem.as_mut_ptr();
        let mut s = BatchStack::new();
        assert!(s.pop().is_none());
        s.push(FreeList::new());
        assert!(s.is_empty(), "an empty list is not a batch");
        for range in [0..2, 2..5] {
            let mut l = FreeList::new();
            for i in range {
                // SAFETY: distinct headers of `mem`, in no list.
                unsafe { l.push(base.add(i)) };
            }
            s.push(l);
        }
        // The newest batch's first chunk (4) holds its length, the next batch and its last chunk.
        // SAFETY: headers of `mem`.
        let (len, next, last) = unsafe {
            (
                (*base.add(4)).prev_sp,
                (*base.add(4)).prev_header,
                (*base.add(4)).resume,
            )
        };
        assert_eq!(len, 3);
        // SAFETY: pointer arithmetic inside `mem`.
        assert_eq!(next, unsafe { base.add(1) });
        // SAFETY: as above.
        assert_eq!(last, unsafe { base.add(2) } as usize);
        assert_eq!(s.chunks(), 5);
        let b = s.pop().unwrap();
        assert_eq!(list_order(base, &b), [4, 3, 2]);
        let b = s.pop().unwrap();
        assert_eq!(list_order(base, &b), [1, 0]);
        assert!(s.pop().is_none());
        assert_eq!(s.chunks(), 0);
    }
}
