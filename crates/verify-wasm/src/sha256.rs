//! SHA-256 (FIPS 180-4): a streaming hasher for one message, and a
//! multi-buffer one that hashes four messages at once, one per lane of a
//! 128-bit vector (wasm SIMD128 when the build enables it; plain arrays
//! elsewhere, which is what the host tests run).
//!
//! Both share one round function, generic over the word type: `u32` for one
//! message, [`Lanes`] for four. The multi-buffer hasher takes the longest
//! messages first and refills a lane as soon as its message is done, so the
//! lanes stay busy; a message left alone in the last lane is finished by the
//! scalar code, which is cheaper than a vector with three idle lanes.

#![allow(
    clippy::big_endian_bytes,
    reason = "SHA-256 reads and writes big-endian words"
)]

const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// What the round function needs of a word: one 32-bit word, or one per lane.
trait Word: Copy {
    fn splat(k: u32) -> Self;
    fn add(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn rotr<const N: u32>(self) -> Self;
    fn shr<const N: u32>(self) -> Self;
    /// Bits of `a` where `mask` is set, else of `b`.
    fn select(a: Self, b: Self, mask: Self) -> Self;
}

impl Word for u32 {
    #[inline(always)]
    fn splat(k: u32) -> Self {
        k
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    #[inline(always)]
    fn xor(self, o: Self) -> Self {
        self ^ o
    }
    #[inline(always)]
    fn rotr<const N: u32>(self) -> Self {
        self.rotate_right(N)
    }
    #[inline(always)]
    fn shr<const N: u32>(self) -> Self {
        self >> N
    }
    #[inline(always)]
    fn select(a: Self, b: Self, mask: Self) -> Self {
        (a & mask) | (b & !mask)
    }
}

/// 64 rounds over the 16 message words `w` (in place: it becomes the
/// schedule's last 16 words), added into `state`.
#[inline(always)]
fn rounds<W: Word>(state: &mut [W; 8], w: &mut [W; 16]) {
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    macro_rules! round {
        ($t:expr, $i:expr) => {{
            if $t >= 16 {
                let s0 = {
                    let x = w[($i + 1) & 15];
                    x.rotr::<7>().xor(x.rotr::<18>()).xor(x.shr::<3>())
                };
                let s1 = {
                    let x = w[($i + 14) & 15];
                    x.rotr::<17>().xor(x.rotr::<19>()).xor(x.shr::<10>())
                };
                w[$i] = w[$i].add(s0).add(w[($i + 9) & 15]).add(s1);
            }
            let t1 = h
                .add(e.rotr::<6>().xor(e.rotr::<11>()).xor(e.rotr::<25>()))
                .add(W::select(f, g, e))
                .add(W::splat(K[$t]))
                .add(w[$i]);
            let t2 = a
                .rotr::<2>()
                .xor(a.rotr::<13>())
                .xor(a.rotr::<22>())
                .add(W::select(c, b, a.xor(b)));
            h = g;
            g = f;
            f = e;
            e = d.add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.add(t2);
        }};
    }
    macro_rules! sixteen {
        ($base:expr) => {
            round!($base, 0);
            round!($base + 1, 1);
            round!($base + 2, 2);
            round!($base + 3, 3);
            round!($base + 4, 4);
            round!($base + 5, 5);
            round!($base + 6, 6);
            round!($base + 7, 7);
            round!($base + 8, 8);
            round!($base + 9, 9);
            round!($base + 10, 10);
            round!($base + 11, 11);
            round!($base + 12, 12);
            round!($base + 13, 13);
            round!($base + 14, 14);
            round!($base + 15, 15);
        };
    }
    sixteen!(0);
    sixteen!(16);
    sixteen!(32);
    sixteen!(48);
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        *s = s.add(v);
    }
}

/// One 64-byte block into a one-message state.
#[inline(never)]
fn compress(state: &mut [u32; 8], block: &[u8; 64]) {
    let mut w = [0u32; 16];
    for (w, b) in w.iter_mut().zip(block.chunks_exact(4)) {
        *w = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    }
    rounds(state, &mut w);
}

fn digest_bytes(state: &[u32; 8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, s) in out.chunks_exact_mut(4).zip(state) {
        o.copy_from_slice(&s.to_be_bytes());
    }
    out
}

/// A streaming SHA-256 of one message.
pub(crate) struct Sha256 {
    state: [u32; 8],
    buf: [u8; 64],
    buffered: usize,
    total: u64,
}

impl Sha256 {
    pub(crate) const fn new() -> Self {
        Sha256 {
            state: IV,
            buf: [0; 64],
            buffered: 0,
            total: 0,
        }
    }

    pub(crate) fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.buffered > 0 {
            let n = data.len().min(64 - self.buffered);
            self.buf[self.buffered..self.buffered + n].copy_from_slice(&data[..n]);
            self.buffered += n;
            data = &data[n..];
            if self.buffered < 64 {
                return;
            }
            compress(&mut self.state, &self.buf);
            self.buffered = 0;
        }
        let mut blocks = data.chunks_exact(64);
        for b in &mut blocks {
            compress(&mut self.state, b.try_into().expect("64 bytes"));
        }
        let rest = blocks.remainder();
        self.buf[..rest.len()].copy_from_slice(rest);
        self.buffered = rest.len();
    }

    pub(crate) fn finish(mut self) -> [u8; 32] {
        let bits = self.total.wrapping_mul(8);
        let mut pad = [0u8; 72];
        pad[0] = 0x80;
        // 0x80, zeros, then the bit length ending a block.
        let n = 1 + (55 - self.buffered as isize).rem_euclid(64) as usize;
        pad[n..n + 8].copy_from_slice(&bits.to_be_bytes());
        self.update(&pad[..n + 8]);
        debug_assert_eq!(self.buffered, 0);
        digest_bytes(&self.state)
    }
}

/// SHA-256 of `data`.
#[cfg(test)]
pub(crate) fn digest(data: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(data);
    h.finish()
}

/// Four words, one per lane.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod lanes {
    use super::Word;
    use core::arch::wasm32::*;

    #[derive(Clone, Copy)]
    pub(super) struct Lanes(v128);

    impl Word for Lanes {
        #[inline(always)]
        fn splat(k: u32) -> Self {
            Lanes(u32x4_splat(k))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Lanes(i32x4_add(self.0, o.0))
        }
        #[inline(always)]
        fn xor(self, o: Self) -> Self {
            Lanes(v128_xor(self.0, o.0))
        }
        #[inline(always)]
        fn rotr<const N: u32>(self) -> Self {
            Lanes(v128_or(u32x4_shr(self.0, N), i32x4_shl(self.0, 32 - N)))
        }
        #[inline(always)]
        fn shr<const N: u32>(self) -> Self {
            Lanes(u32x4_shr(self.0, N))
        }
        #[inline(always)]
        fn select(a: Self, b: Self, mask: Self) -> Self {
            Lanes(v128_bitselect(a.0, b.0, mask.0))
        }
    }

    impl Lanes {
        #[inline(always)]
        pub(super) fn get(self, lane: usize) -> u32 {
            match lane {
                0 => u32x4_extract_lane::<0>(self.0),
                1 => u32x4_extract_lane::<1>(self.0),
                2 => u32x4_extract_lane::<2>(self.0),
                _ => u32x4_extract_lane::<3>(self.0),
            }
        }

        #[inline(always)]
        pub(super) fn set(&mut self, lane: usize, v: u32) {
            self.0 = match lane {
                0 => u32x4_replace_lane::<0>(self.0, v),
                1 => u32x4_replace_lane::<1>(self.0, v),
                2 => u32x4_replace_lane::<2>(self.0, v),
                _ => u32x4_replace_lane::<3>(self.0, v),
            };
        }

        /// The 16 big-endian words of four blocks, word `i` of lane `j` in
        /// lane `j` of the `i`-th vector: byte swaps and 4×4 transposes.
        #[inline(always)]
        pub(super) fn load(blocks: [&[u8; 64]; 4]) -> [Lanes; 16] {
            let mut w = [Lanes(u32x4_splat(0)); 16];
            for q in 0..4 {
                let row = |j: usize| {
                    // SAFETY: 16 bytes at 16·q inside a 64-byte block;
                    // v128_load has no alignment requirement.
                    let v = unsafe { v128_load(blocks[j].as_ptr().add(16 * q) as *const v128) };
                    i8x16_swizzle(
                        v,
                        i8x16(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12),
                    )
                };
                let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
                let t0 = i32x4_shuffle::<0, 4, 1, 5>(r0, r1);
                let t1 = i32x4_shuffle::<2, 6, 3, 7>(r0, r1);
                let t2 = i32x4_shuffle::<0, 4, 1, 5>(r2, r3);
                let t3 = i32x4_shuffle::<2, 6, 3, 7>(r2, r3);
                w[4 * q] = Lanes(i64x2_shuffle::<0, 2>(t0, t2));
                w[4 * q + 1] = Lanes(i64x2_shuffle::<1, 3>(t0, t2));
                w[4 * q + 2] = Lanes(i64x2_shuffle::<0, 2>(t1, t3));
                w[4 * q + 3] = Lanes(i64x2_shuffle::<1, 3>(t1, t3));
            }
            w
        }
    }
}

/// Four words, one per lane, as plain arrays: the same algorithm on the
/// host, where the tests run it.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod lanes {
    use super::Word;

    #[derive(Clone, Copy)]
    pub(super) struct Lanes([u32; 4]);

    impl Lanes {
        #[inline(always)]
        fn map2(self, o: Self, f: impl Fn(u32, u32) -> u32) -> Self {
            Lanes([
                f(self.0[0], o.0[0]),
                f(self.0[1], o.0[1]),
                f(self.0[2], o.0[2]),
                f(self.0[3], o.0[3]),
            ])
        }

        #[inline(always)]
        pub(super) fn get(self, lane: usize) -> u32 {
            self.0[lane]
        }

        #[inline(always)]
        pub(super) fn set(&mut self, lane: usize, v: u32) {
            self.0[lane] = v;
        }

        #[inline(always)]
        pub(super) fn load(blocks: [&[u8; 64]; 4]) -> [Lanes; 16] {
            let mut w = [Lanes([0; 4]); 16];
            for (i, w) in w.iter_mut().enumerate() {
                for (j, b) in blocks.iter().enumerate() {
                    w.0[j] =
                        u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
                }
            }
            w
        }
    }

    impl Word for Lanes {
        #[inline(always)]
        fn splat(k: u32) -> Self {
            Lanes([k; 4])
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            self.map2(o, u32::wrapping_add)
        }
        #[inline(always)]
        fn xor(self, o: Self) -> Self {
            self.map2(o, |a, b| a ^ b)
        }
        #[inline(always)]
        fn rotr<const N: u32>(self) -> Self {
            self.map2(self, |a, _| a.rotate_right(N))
        }
        #[inline(always)]
        fn shr<const N: u32>(self) -> Self {
            self.map2(self, |a, _| a >> N)
        }
        #[inline(always)]
        fn select(a: Self, b: Self, mask: Self) -> Self {
            Lanes([
                u32::select(a.0[0], b.0[0], mask.0[0]),
                u32::select(a.0[1], b.0[1], mask.0[1]),
                u32::select(a.0[2], b.0[2], mask.0[2]),
                u32::select(a.0[3], b.0[3], mask.0[3]),
            ])
        }
    }
}

use lanes::Lanes;

/// Four blocks into a four-lane state.
#[inline(never)]
fn compress4(state: &mut [Lanes; 8], blocks: [&[u8; 64]; 4]) {
    let mut w = Lanes::load(blocks);
    rounds(state, &mut w);
}

/// One message in a lane: where it is, and its padded end.
struct Job<'a> {
    msg: usize,
    data: &'a [u8],
    /// Blocks of `data` taken as they are.
    whole: usize,
    /// Blocks in all (the whole ones, then one or two of `tail`).
    blocks: usize,
    next: usize,
    tail: [u8; 128],
}

impl<'a> Job<'a> {
    fn new(msg: usize, data: &'a [u8]) -> Self {
        let whole = data.len() / 64;
        let rest = &data[64 * whole..];
        let blocks = whole + if rest.len() < 56 { 1 } else { 2 };
        let mut tail = [0u8; 128];
        tail[..rest.len()].copy_from_slice(rest);
        tail[rest.len()] = 0x80;
        let end = 64 * (blocks - whole);
        tail[end - 8..end].copy_from_slice(&(data.len() as u64).wrapping_mul(8).to_be_bytes());
        Job {
            msg,
            data,
            whole,
            blocks,
            next: 0,
            tail,
        }
    }

    fn block(&self, i: usize) -> &[u8; 64] {
        let b = if i < self.whole {
            &self.data[64 * i..64 * i + 64]
        } else {
            &self.tail[64 * (i - self.whole)..64 * (i - self.whole) + 64]
        };
        b.try_into().expect("64 bytes")
    }
}

/// The most messages one [`digest_many`] call takes.
pub(crate) const MAX_MESSAGES: usize = 256;

/// `out[i]` = SHA-256 of `data[spans[i].0..spans[i].0 + spans[i].1]` for
/// every span (at most [`MAX_MESSAGES`]), four at a time.
pub(crate) fn digest_many(data: &[u8], spans: &[(usize, usize)], out: &mut [[u8; 32]]) {
    let n = spans.len();
    assert!(n <= MAX_MESSAGES && out.len() == n);
    let msg = |i: usize| &data[spans[i].0..spans[i].0 + spans[i].1];
    // A wasm build without SIMD128 (for comparison) hashes one at a time:
    // four lanes of plain arrays would only be slower.
    if cfg!(all(target_arch = "wasm32", not(target_feature = "simd128"))) {
        for (i, o) in out.iter_mut().enumerate() {
            let mut h = Sha256::new();
            h.update(msg(i));
            *o = h.finish();
        }
        return;
    }
    // Longest first, so that the lanes finish close together (insertion
    // sort: a few dozen spans per call).
    let mut order = [0u16; MAX_MESSAGES];
    for i in 0..n {
        let mut j = i;
        while j > 0 && spans[usize::from(order[j - 1])].1 < spans[i].1 {
            order[j] = order[j - 1];
            j -= 1;
        }
        order[j] = i as u16;
    }
    let mut queue = order[..n].iter().map(|&i| usize::from(i));

    let idle = [0u8; 64];
    let mut state = [Lanes::splat(0); 8];
    let mut jobs: [Option<Job<'_>>; 4] = [None, None, None, None];
    loop {
        let mut active = 0;
        for (lane, slot) in jobs.iter_mut().enumerate() {
            if slot.is_none() {
                if let Some(m) = queue.next() {
                    *slot = Some(Job::new(m, msg(m)));
                    for (s, iv) in state.iter_mut().zip(IV) {
                        s.set(lane, iv);
                    }
                }
            }
            active += usize::from(slot.is_some());
        }
        if active <= 1 {
            break;
        }
        let block = |lane: usize| match &jobs[lane] {
            Some(j) => j.block(j.next),
            None => &idle,
        };
        compress4(&mut state, [block(0), block(1), block(2), block(3)]);
        for (lane, slot) in jobs.iter_mut().enumerate() {
            if let Some(j) = slot {
                j.next += 1;
                if j.next == j.blocks {
                    out[j.msg] = digest_bytes(&state.map(|s| s.get(lane)));
                    *slot = None;
                }
            }
        }
    }
    // The last message alone: the scalar rounds, from where its lane stopped.
    for (lane, slot) in jobs.iter().enumerate() {
        if let Some(j) = slot {
            let mut s = state.map(|s| s.get(lane));
            for i in j.next..j.blocks {
                compress(&mut s, j.block(i));
            }
            out[j.msg] = digest_bytes(&s);
        }
    }
}
