//! The api crate's test binary's allocator: it counts each thread's live bytes
//! and their peak, so that a test checks a memory bound against what the
//! allocator was really asked for. One per binary (a binary has one global
//! allocator): every test of this crate that measures memory uses [`peak_of`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: every call goes to the system allocator unchanged; the counters
// are thread-local cells, which allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        count(new as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new) }
    }
}

fn count(delta: isize) {
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + delta);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// The peak of live bytes `make` reached (on this thread) above where it
/// started, and what it made.
pub fn peak_of<T>(make: impl FnOnce() -> T) -> (usize, T) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let made = make();
    (PEAK.with(Cell::get).saturating_sub(start) as usize, made)
}
