//! Writes the tokenizers' rank tables into `OUT_DIR` once, at build time, so that a fresh
//! process counts tokens without building a vocabulary first (see `src/bpe.rs`).
//!
//! For each encoding, three little-endian files: `NAME.bytes` (every token's bytes, in rank
//! order), `NAME.offsets` (`u32` start of each rank's bytes, one more entry than ranks) and
//! `NAME.table` (an open-addressing hash table of `u32` slots holding rank + 1, 0 when empty,
//! indexed by [`slot_hash`] with linear probing). The vocabulary is the one `tiktoken-rs`
//! ships, read through its public API, so both give the same ranks.

use std::error::Error;
use std::fs;
use std::path::PathBuf;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The hash `src/bpe.rs` uses to find a slot; both sides must agree (FNV-1a, 64 bits).
fn slot_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn write_tables(
    out: &std::path::Path,
    name: &str,
    bpe: &tiktoken_rs::CoreBPE,
    ranks: u32,
    table_bits: u32,
) -> Result<()> {
    let mut bytes = Vec::new();
    let mut offsets = Vec::with_capacity((ranks as usize + 1) * 4);
    let slots = 1usize << table_bits;
    let mut table = vec![0u32; slots];
    let mut present = 0;
    for rank in 0..ranks {
        offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        let Ok(token) = bpe.decode_bytes(&[rank]) else {
            continue;
        };
        let mut slot = (slot_hash(&token) as usize) & (slots - 1);
        while table[slot] != 0 {
            slot = (slot + 1) & (slots - 1);
        }
        table[slot] = rank + 1;
        bytes.extend_from_slice(&token);
        present += 1;
    }
    offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    if present * 2 > slots {
        return Err(format!("{name}: {present} tokens overfill {slots} slots").into());
    }
    let table: Vec<u8> = table.iter().flat_map(|s| s.to_le_bytes()).collect();
    fs::write(out.join(format!("{name}.bytes")), bytes)?;
    fs::write(out.join(format!("{name}.offsets")), offsets)?;
    fs::write(out.join(format!("{name}.table")), table)?;
    Ok(())
}

fn main() -> Result<()> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    // Ordinary ranks stop below the first special token (o200k: 199999, cl100k: 100257).
    write_tables(&out, "o200k", &tiktoken_rs::o200k_base()?, 199_999, 19)?;
    write_tables(&out, "cl100k", &tiktoken_rs::cl100k_base()?, 100_257, 18)?;
    println!("cargo::rerun-if-changed=build.rs");
    Ok(())
}
