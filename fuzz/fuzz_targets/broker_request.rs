//! A request frame as the broker's listener hands it to dispatch (length
//! prefix stripped): decoded to a request or refused with a DispatchError,
//! never a panic or an abort (a huge declared array length included: the
//! broker's allocator guard is installed here as in the broker binary).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOCATOR: epochal_broker::huge_alloc::LazyHugeAlloc =
    epochal_broker::huge_alloc::LazyHugeAlloc;

fuzz_target!(|data: &[u8]| {
    let _ = epochal_broker::server::dispatch::decode(bytes::Bytes::copy_from_slice(data));
});
