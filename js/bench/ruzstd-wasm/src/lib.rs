//! ruzstd behind a C ABI: dictionaries are prepared once (`nwb_add_dict`),
//! each compressed record's frame is decoded into a caller-sized buffer.

use ruzstd::decoding::{BlockDecodingStrategy, Dictionary, FrameDecoder};
use std::cell::RefCell;

thread_local! {
    static DECODER: RefCell<FrameDecoder> = RefCell::new(FrameDecoder::new());
}

/// `n` bytes of wasm memory for the caller (freed with `nwb_free`).
#[no_mangle]
pub extern "C" fn nwb_alloc(n: usize) -> *mut u8 {
    let mut v = Vec::<u8>::with_capacity(n);
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

/// # Safety
/// `p` and `n` come from one `nwb_alloc` call.
#[no_mangle]
pub unsafe extern "C" fn nwb_free(p: *mut u8, n: usize) {
    drop(unsafe { Vec::from_raw_parts(p, 0, n) });
}

/// Prepares the zstd dictionary at `p[..n]`; returns its zstd id, 0 if malformed.
///
/// # Safety
/// `p[..n]` is readable.
#[no_mangle]
pub unsafe extern "C" fn nwb_add_dict(p: *const u8, n: usize) -> u32 {
    let raw = unsafe { std::slice::from_raw_parts(p, n) };
    match Dictionary::decode_dict(raw) {
        Ok(d) => {
            let id = d.id;
            DECODER.with(|dec| dec.borrow_mut().add_dict(d).map_or(0, |_| id))
        }
        Err(_) => 0,
    }
}

/// Decodes the zstd frame `src[..n]` (with its magic) with dictionary `dict`
/// (a zstd id, 0 = none) into `out[..cap]`, which it must fill exactly.
/// Returns `cap`, or -1.
///
/// # Safety
/// `src[..n]` is readable and `out[..cap]` writable.
#[no_mangle]
pub unsafe extern "C" fn nwb_decode(src: *const u8, n: usize, dict: u32, out: *mut u8, cap: usize) -> isize {
    let mut s = unsafe { std::slice::from_raw_parts(src, n) };
    let o = unsafe { std::slice::from_raw_parts_mut(out, cap) };
    DECODER.with(|dec| {
        let d = &mut *dec.borrow_mut();
        d.set_max_window_size(8 << 20);
        if d.reset(&mut s).is_err() || (dict != 0 && d.force_dict(dict).is_err()) {
            return -1;
        }
        // At most one block past `cap`: a frame that would expand further stops there.
        match d.decode_blocks(&mut s, BlockDecodingStrategy::UptoBytes(cap + 1)) {
            Ok(true) if d.can_collect() == cap => {}
            _ => return -1,
        }
        match d.collect() {
            Some(v) if v.len() == cap => {
                o.copy_from_slice(&v);
                cap as isize
            }
            _ => -1,
        }
    })
}
