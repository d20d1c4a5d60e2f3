//! The crash loops' generator: xorshift64, seeded, the same sequence on every machine, so a
//! seed printed by a failing run replays it. Included by path by `bin/crash_loop.rs` and
//! `bin/repair_crash_loop.rs` (which the CLI tests include by path in turn).

/// xorshift64 (13, 7, 17). The seed must not be 0.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}
