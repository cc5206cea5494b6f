//! The QuickJS allocator of a run: the system allocator plus a byte budget.
//!
//! QuickJS's built-in limit reports exhaustion by throwing, and when even the error object
//! cannot be allocated it throws `null`, which is indistinguishable from `throw null` once the
//! script's memory has been released. Enforcing the limit here instead lets the sandbox record
//! that an allocation was refused, so `MemoryLimit` is reported reliably.

use std::alloc::{self, Layout};
use std::cell::Cell;
use std::rc::Rc;

use rquickjs::allocator::Allocator;

/// Bytes in front of every block; holds the block's requested size. 16 keeps the payload
/// aligned for any C type QuickJS stores.
const HEADER: usize = 16;
const ALIGN: usize = 16;

/// What the allocator shares with the run that owns it.
#[derive(Debug, Default)]
pub struct Budget {
    used: Cell<usize>,
    limit: usize,
    refused: Cell<bool>,
}

impl Budget {
    /// A budget of `limit` bytes (0 means unlimited).
    pub fn new(limit: usize) -> Rc<Self> {
        Rc::new(Self {
            used: Cell::new(0),
            limit,
            refused: Cell::new(false),
        })
    }

    /// Whether an allocation was ever refused for lack of budget.
    pub fn exhausted(&self) -> bool {
        self.refused.get()
    }

    /// Bytes currently allocated.
    pub fn used(&self) -> usize {
        self.used.get()
    }

    fn reserve(&self, n: usize) -> bool {
        let next = self.used.get().saturating_add(n);
        if self.limit != 0 && next > self.limit {
            self.refused.set(true);
            return false;
        }
        self.used.set(next);
        true
    }

    fn release(&self, n: usize) {
        self.used.set(self.used.get().saturating_sub(n));
    }
}

/// A QuickJS allocator charging every block to a [`Budget`].
pub struct Limited(pub Rc<Budget>);

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, ALIGN).ok()
}

impl Limited {
    fn allocate(&mut self, size: usize, zeroed: bool) -> *mut u8 {
        let Some(layout) = layout(size) else {
            return std::ptr::null_mut();
        };
        if !self.0.reserve(size) {
            return std::ptr::null_mut();
        }
        // SAFETY: the layout has a non-zero size (at least HEADER bytes).
        let base = unsafe {
            if zeroed {
                alloc::alloc_zeroed(layout)
            } else {
                alloc::alloc(layout)
            }
        };
        if base.is_null() {
            self.0.release(size);
            return std::ptr::null_mut();
        }
        // SAFETY: base points to at least HEADER bytes, aligned to 16.
        unsafe {
            (base as *mut usize).write(size);
            base.add(HEADER)
        }
    }
}

// SAFETY: every pointer handed out is either null or the payload of a live block of at least
// the requested size, aligned to 16 (so to `usize`); blocks are freed with the layout they were
// allocated with, recovered from the header.
unsafe impl Allocator for Limited {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        self.allocate(size, false)
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        match count.checked_mul(size) {
            Some(total) => self.allocate(total, true),
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        if ptr.is_null() {
            return;
        }
        let base = ptr.sub(HEADER);
        let size = (base as *const usize).read();
        self.0.release(size);
        if let Some(layout) = layout(size) {
            alloc::dealloc(base, layout);
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.allocate(new_size, false);
        }
        if new_size == 0 {
            self.dealloc(ptr);
            return std::ptr::null_mut();
        }
        let base = ptr.sub(HEADER);
        let old_size = (base as *const usize).read();
        let (Some(old_layout), Some(new_layout)) = (layout(old_size), layout(new_size)) else {
            return std::ptr::null_mut();
        };
        if new_size > old_size && !self.0.reserve(new_size - old_size) {
            return std::ptr::null_mut();
        }
        let new_base = alloc::realloc(base, old_layout, new_layout.size());
        if new_base.is_null() {
            if new_size > old_size {
                self.0.release(new_size - old_size);
            }
            return std::ptr::null_mut();
        }
        if new_size < old_size {
            self.0.release(old_size - new_size);
        }
        (new_base as *mut usize).write(new_size);
        new_base.add(HEADER)
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        if ptr.is_null() {
            return 0;
        }
        (ptr.sub(HEADER) as *const usize).read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_and_refuses_over_budget() {
        let budget = Budget::new(1000);
        let mut a = Limited(budget.clone());
        let p = a.alloc(600);
        assert!(!p.is_null());
        assert_eq!(p as usize % ALIGN, 0);
        assert_eq!(budget.used(), 600);
        assert!(a.alloc(600).is_null());
        assert!(budget.exhausted());
        unsafe {
            assert_eq!(<Limited as Allocator>::usable_size(p), 600);
            let q = a.realloc(p, 900);
            assert!(!q.is_null());
            assert_eq!(budget.used(), 900);
            assert!(a.realloc(q, 2000).is_null());
            let r = a.realloc(q, 10);
            assert_eq!(budget.used(), 10);
            a.dealloc(r);
        }
        assert_eq!(budget.used(), 0);
        let z = a.calloc(10, 10);
        assert!(unsafe { std::slice::from_raw_parts(z, 100) }
            .iter()
            .all(|b| *b == 0));
        unsafe { a.dealloc(z) };
        assert!(a.calloc(usize::MAX, 2).is_null());
    }
}
