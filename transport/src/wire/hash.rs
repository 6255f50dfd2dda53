//! The packet hash every role derives from a UDP payload (docs/design.md §2,
//! "Packet hash"): `h = fmix32(FNV-1a-32(last min(16, len) bytes))`.
//!
//! QUIC encrypts packet numbers, so routers cannot tell packet order the way
//! MPCP does with TCP's seq/ack. The tail of a QUIC packet is its AEAD tag —
//! ciphertext no router changes — so sender, routers and receiver all compute
//! the same pseudo-random value from it. MPCP takes the chain position as
//! `h % n`; ADPM takes its threshold from the high 16 bits.
//!
//! Test vectors (also checked by the tests below, and computed independently
//! of this code):
//!
//! | payload | length | hash |
//! |---|---|---|
//! | empty | 0 | `0xab3e7c0b` |
//! | `"a"` | 1 | `0x1a80b1b3` |
//! | `"ecnq"` | 4 | `0x24201f29` |
//! | bytes `0..16` | 16 | `0x4aa90cd5` |
//! | bytes `0..17` | 17 | `0x26236472` |
//! | bytes `0..64` | 64 | `0x882d3513` |
//! | 1200 × `0xff` | 1200 | `0x44daf686` |

/// How many trailing payload bytes feed the hash: a QUIC AEAD tag.
pub const HASHED_TAIL: usize = 16;

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// FNV-1a, 32 bits.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// murmur3's 32-bit finalizer: every input bit flips each output bit with
/// probability about one half, so `h % n` and `h >> 16` are both well spread.
pub const fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// The ecnq packet hash of a UDP payload.
pub fn packet_hash(udp_payload: &[u8]) -> u32 {
    let tail = &udp_payload[udp_payload.len().saturating_sub(HASHED_TAIL)..];
    fmix32(fnv1a32(tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_vectors() {
        let seq = |n: u8| (0..n).collect::<Vec<u8>>();
        assert_eq!(packet_hash(b""), 0xab3e_7c0b);
        assert_eq!(packet_hash(b"a"), 0x1a80_b1b3);
        assert_eq!(packet_hash(b"ecnq"), 0x2420_1f29);
        assert_eq!(packet_hash(&seq(16)), 0x4aa9_0cd5);
        assert_eq!(packet_hash(&seq(17)), 0x2623_6472);
        assert_eq!(packet_hash(&seq(64)), 0x882d_3513);
        assert_eq!(packet_hash(&[0xff; 1200]), 0x44da_f686);
    }

    #[test]
    fn only_the_tail_counts() {
        let mut a = vec![7u8; 100];
        let b = a.clone();
        a[0] = 8;
        assert_eq!(packet_hash(&a), packet_hash(&b));
        a[99] = 9;
        assert_ne!(packet_hash(&a), packet_hash(&b));
    }

    #[test]
    fn positions_are_balanced() {
        // Chain positions of consecutive "tags" should split evenly.
        let mut counts = [0u32; 3];
        for i in 0u32..30_000 {
            counts[(packet_hash(&i.to_le_bytes()) % 3) as usize] += 1;
        }
        for c in counts {
            assert!((9_400..10_600).contains(&c), "{counts:?}");
        }
    }
}
