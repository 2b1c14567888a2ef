//! The broker's global allocator: the system allocator, except that requests of
//! a GiB or more are served by anonymous mappings reserved without swap
//! accounting (`MAP_NORESERVE`), whose pages exist only once touched.
//!
//! Why: kafka-protocol 0.15 pre-allocates every array by the element count read
//! off the wire (`Vec::with_capacity(n)`) before decoding an element, so a
//! 20-byte request declaring 2^31 topics asks for ~150 GB. The system allocator
//! refuses that and Rust aborts the whole broker — a malformed frame would take
//! down every connection. Served lazily, the reservation costs nothing; decoding
//! then runs out of bytes after a few elements, the request is rejected as
//! malformed, and the mapping is returned. (Kafka fixed the same hazard in its
//! own parser in KAFKA-14063; kafka-protocol has open pull requests #152, #161
//! and #200 for it. Drop this once the pinned crate bounds its arrays.)
//!
//! Limits: under strict overcommit (`vm.overcommit_memory = 2`) the kernel
//! ignores `MAP_NORESERVE` and the old abort returns; requests aligned above a
//! page go to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

/// Requests at least this large are mapped lazily.
const HUGE_BYTES: usize = 1 << 30;
/// mmap returns page-aligned memory; larger alignments stay with the system allocator.
const PAGE_BYTES: usize = 4096;

pub struct LazyHugeAlloc;

fn is_huge(layout: &Layout) -> bool {
    layout.size() >= HUGE_BYTES && layout.align() <= PAGE_BYTES
}

unsafe fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping touches no existing memory; failure
    // is reported as MAP_FAILED and turned into the null GlobalAlloc expects.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

// SAFETY: every block is released by the same path that produced it, decided by
// `is_huge` of the layout, which the caller passes back unchanged; mapped blocks
// are page-aligned (>= any alignment `is_huge` admits) and zero-filled.
unsafe impl GlobalAlloc for LazyHugeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            unsafe { map(layout.size()) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Fresh anonymous pages are already zero.
        if is_huge(&layout) {
            unsafe { map(layout.size()) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(&layout) {
            // SAFETY: `ptr` came from `map(layout.size())`.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: GlobalAlloc::realloc's contract guarantees new_size, rounded
        // to the alignment, does not overflow isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_huge(&layout) && !is_huge(&new_layout) {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if is_huge(&layout) && is_huge(&new_layout) {
            // Move the mapping rather than copy it: copying would touch every
            // page of a reservation that was never meant to be backed.
            // SAFETY: `ptr` came from `map(layout.size())`.
            let p =
                unsafe { libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE) };
            return if p == libc::MAP_FAILED {
                std::ptr::null_mut()
            } else {
                p.cast()
            };
        }
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live, distinct, and at least this long.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_block_is_mapped_lazily_and_survives_growth_and_release() {
        let a = LazyHugeAlloc;
        // 64 GiB: more than this machine could back, reserved but never touched.
        let layout = Layout::from_size_align(64 << 30, 8).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null(), "lazy mapping refused (strict overcommit?)");
            p.write(7);
            let q = a.realloc(p, layout, 65 << 30);
            assert!(!q.is_null());
            assert_eq!(q.read(), 7);
            a.dealloc(q, Layout::from_size_align(65 << 30, 8).unwrap());
            // Small blocks still go to the system allocator and can grow into huge ones.
            let small = Layout::from_size_align(64, 8).unwrap();
            let s = a.alloc(small);
            s.write(9);
            let big = a.realloc(s, small, HUGE_BYTES);
            assert_eq!(big.read(), 9);
            a.dealloc(big, Layout::from_size_align(HUGE_BYTES, 8).unwrap());
        }
    }
}
