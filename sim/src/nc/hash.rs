//! The program hash: every instruction and its operands, as issued, hashed into one
//! content address (xxh3-128 over 64-bit words), with the chip's identity first. The same
//! kernel, parameters and shape give the same hash, whatever the data.

use super::{Nc, Scalar};
use crate::view::*;
use crate::Chip;

/// The program's encoding, hashed as it is issued: xxh3-128 (content addressing needs no
/// cryptographic strength, and this runs for every instruction) over little-endian 64-bit
/// words. The builder emits a few words per instruction; they are gathered in a fixed word
/// buffer and hashed in large blocks, which costs far less than feeding the hasher (or a
/// byte vector) a few bytes at a time.
pub(super) struct ProgramHasher {
    pub(super) state: xxhash_rust::xxh3::Xxh3,
    buf: Box<[u64; HASH_WORDS]>,
    len: usize,
}

const HASH_WORDS: usize = 4096;

impl ProgramHasher {
    pub(super) fn new() -> Self {
        ProgramHasher {
            state: xxhash_rust::xxh3::Xxh3::new(),
            buf: Box::new([0; HASH_WORDS]),
            len: 0,
        }
    }

    /// The next `n` words of the stream, for the caller to fill (little-endian).
    #[inline(always)]
    fn reserve(&mut self, n: usize) -> &mut [u64] {
        if self.len + n > HASH_WORDS {
            self.flush();
        }
        let start = self.len;
        self.len += n;
        &mut self.buf[start..start + n]
    }

    fn flush(&mut self) {
        self.state.update(words_as_bytes(&self.buf[..self.len]));
        self.len = 0;
    }

    fn digest128(&self) -> u128 {
        let mut h = self.state.clone();
        h.update(words_as_bytes(&self.buf[..self.len]));
        h.digest128()
    }
}

/// Calls `f` with the chip's TOML (its identity in the program hash). Serializing it costs
/// about as much as simulating a hundred instructions (25 µs for trn2), and a tuning run
/// builds many programs for one chip: the text for the last chip seen on this thread is
/// kept, keyed by the chip's `Debug` text — a tenth of the cost (2.6 µs), and exact where
/// `==` is not (`-0.0 == 0.0`, but the two print, and hash, differently).
pub(super) fn chip_toml(chip: &Chip, f: impl FnOnce(&str)) {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, String)>> = const { std::cell::RefCell::new(None) };
    }
    let key = format!("{chip:?}");
    LAST.with_borrow_mut(|last| match last {
        Some((k, toml)) if *k == key => f(toml),
        _ => {
            let (_, toml) = last.insert((key, chip.to_toml()));
            f(toml)
        }
    })
}

/// A tag of up to 7 bytes as one hash word (its length in the top byte).
#[inline(always)]
fn tag_word(bytes: &[u8]) -> u64 {
    debug_assert!(bytes.len() < 8);
    let mut w = (bytes.len() as u64) << 56;
    for (i, &b) in bytes.iter().enumerate() {
        w |= (b as u64) << (8 * i);
    }
    w.to_le()
}

/// A tile view as hash words (`3 + 2 × dims` of them) into `out`; returns how many.
#[inline(always)]
fn tile_words(v: &TileView, out: &mut [u64]) -> usize {
    let dims = v.free.as_slice();
    out[0] = (1
        | (v.tile.dtype.code() as u64) << 8
        | (v.tile.mem as u64) << 16
        | (dims.len() as u64) << 24)
        .to_le();
    out[1] = (v.tile.buf as u64 | (v.p0 as u64) << 32).to_le();
    out[2] = (v.np as u64 | (v.offset as u64) << 32).to_le();
    let words = 3 + 2 * dims.len();
    for (pair, &(s, n)) in out[3..words].chunks_exact_mut(2).zip(dims) {
        pair[0] = (s as u64).to_le();
        pair[1] = n.to_le();
    }
    words
}

/// The bytes of words already stored little-endian.
fn words_as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u8 has alignment 1 and every bit pattern is a valid u8; the byte slice covers
    // exactly the words' memory and borrows it for the same lifetime.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

impl Nc {
    /// Hash a short tag (opcode and small operands, at most 7 bytes) as one word: the
    /// bytes, little-endian, and their count in the top byte.
    #[inline(always)]
    pub(super) fn h(&mut self, bytes: &[u8]) {
        self.hash.reserve(1)[0] = tag_word(bytes);
    }
    /// An instruction's tag and its tile operands, as [`Nc::h`] and [`Nc::h_tile`] each
    /// would hash them, into one reservation of the hash buffer.
    #[inline(always)]
    pub(super) fn h_op(&mut self, tag: &[u8], views: &[&TileView]) {
        let words = 1 + views.iter().map(|v| 3 + 2 * v.free.len()).sum::<usize>();
        let out = self.hash.reserve(words);
        out[0] = tag_word(tag);
        let mut at = 1;
        for v in views {
            at += tile_words(v, &mut out[at..]);
        }
    }
    #[inline]
    pub(super) fn h64(&mut self, v: u64) {
        self.hash.reserve(1)[0] = v.to_le();
    }
    pub(super) fn h_tile(&mut self, v: &TileView) {
        let out = self.hash.reserve(3 + 2 * v.free.len());
        tile_words(v, out);
    }
    /// Either side of a DMA, as [`Nc::h_tile`] or [`Nc::h_hbm`] hashes it.
    pub(super) fn h_access(&mut self, a: &super::Access) {
        match a {
            super::Access::Tile(v) => self.h_tile(v),
            super::Access::Hbm(v) => self.h_hbm(v),
        }
    }
    pub(super) fn h_hbm(&mut self, v: &HbmView) {
        let dims = v.dims.as_slice();
        let out = self.hash.reserve(2 + 2 * dims.len());
        out[0] = (2
            | (v.tensor.dtype.code() as u64) << 8
            | (dims.len() as u64) << 16
            | (v.tensor.id as u64) << 32)
            .to_le();
        out[1] = (v.offset as u64).to_le();
        for (pair, &(s, n)) in out[2..].chunks_exact_mut(2).zip(dims) {
            pair[0] = (s as u64).to_le();
            pair[1] = n.to_le();
        }
    }
    /// A scalar operand: an immediate behind its own tag word (its bits could otherwise
    /// read as a view's first word: tag words have a non-zero top byte, view headers do
    /// not), a column as the view it is.
    pub(super) fn h_scalar(&mut self, s: &Scalar) {
        match s {
            Scalar::Imm(x) => {
                self.h(&[20]);
                self.h64(x.to_bits() as u64)
            }
            Scalar::Col(c) => self.h_tile(c),
        }
    }

    /// Content hash of the program issued so far (instructions, operands, shapes, chip):
    /// the same kernel, parameters and shape give the same hash, whatever the data.
    pub fn program_hash(&self) -> String {
        format!("{:032x}", self.hash.digest128())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExecMode;

    /// The chip's text in the program hash is the chip's own, whatever chip the thread built
    /// a program for before: 0.0 and -0.0 compare equal but print (and hash) differently.
    #[test]
    fn program_hash_names_the_chip_exactly_whatever_came_before() {
        let hash = |chip: &Chip| Nc::new(chip.clone(), ExecMode::TIMING).program_hash();
        let mut zero = Chip::trn2();
        zero.dma.descriptor_ns = 0.0;
        let mut negative_zero = zero.clone();
        negative_zero.dma.descriptor_ns = -0.0;
        assert_eq!(zero, negative_zero);
        let fresh = {
            let chip = negative_zero.clone();
            std::thread::spawn(move || hash(&chip)).join().unwrap()
        };
        hash(&zero);
        assert_eq!(hash(&negative_zero), fresh);
        assert_ne!(hash(&zero), fresh);
    }

    /// Each instruction hashes under an opcode of its own: the same operands issued as
    /// different instructions (or on different engines, or with another reduce operator)
    /// give different program hashes.
    #[test]
    fn instructions_with_the_same_operands_hash_differently() {
        use crate::{Alu, Dtype, Engine};
        let hash = |k: usize| {
            let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
            let p = nc.sbuf_pool("p", 1);
            let a = nc.tile(p, Dtype::F32, &[128, 8]).unwrap();
            let b = nc.tile(p, Dtype::F32, &[128, 8]).unwrap();
            let r = nc.tile(p, Dtype::F32, &[128, 1]).unwrap();
            let s = (Alu::Multiply, Scalar::Imm(2.0));
            match k {
                0 => nc.tensor_scalar(a, b, s, None),
                1 => nc.tensor_scalar_reduce(a, b, s, Alu::Add, r),
                2 => nc.tensor_scalar_reduce(a, b, s, Alu::Max, r),
                3 => nc.scalar_tensor_tensor(a, b, s, Alu::Add, a),
                4 => nc.tensor_tensor_scan(a, b, a, 2.0, Alu::Multiply, Alu::Add),
                5 => nc.tensor_tensor(a, b, a, Alu::Multiply),
                6 => nc.reciprocal(a, b),
                _ => nc.on(Engine::Scalar).reciprocal(a, b),
            }
            .unwrap();
            nc.program_hash()
        };
        let hashes: Vec<String> = (0..8).map(hash).collect();
        for i in 0..hashes.len() {
            for j in 0..i {
                assert_ne!(hashes[i], hashes[j], "programs {i} and {j}");
            }
        }
    }

    /// Transpose mode, the shuffles and their look-alikes hash under encodings of their own.
    #[test]
    fn transposes_and_shuffles_hash_apart_from_their_look_alikes() {
        use crate::{Dtype, Engine};
        let hash = |k: usize| {
            let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
            let (p, ps) = (nc.sbuf_pool("p", 1), nc.psum_pool("ps", 1));
            let a = nc.tile(p, Dtype::F32, &[32, 32]).unwrap();
            let eye = nc.tile(p, Dtype::F32, &[32, 32]).unwrap();
            let s = nc.tile(p, Dtype::F32, &[32, 32]).unwrap();
            let d = nc.tile(ps, Dtype::F32, &[32, 32]).unwrap();
            let mut mask = [0u8; 32];
            match k {
                0 => nc.transpose(d, a),
                1 => nc.matmul_transpose(d, a, eye),
                2 => nc.matmul(d, a, eye, false),
                3 => nc.stream_shuffle(s, a, mask),
                4 => {
                    mask[31] = 1;
                    nc.stream_shuffle(s, a, mask)
                }
                5 => nc.on(Engine::Vector).transpose(s, a),
                _ => nc.tensor_copy(s, a),
            }
            .unwrap();
            nc.program_hash()
        };
        let hashes: Vec<String> = (0..7).map(hash).collect();
        for i in 0..hashes.len() {
            for j in 0..i {
                assert_ne!(hashes[i], hashes[j], "programs {i} and {j}");
            }
        }
    }
}
