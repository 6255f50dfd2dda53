//! ecnq's connection IDs: each one carries, sealed, the key of the
//! connection it was issued for, so the socket layer can tell a packet's
//! connection from its destination CID alone.
//!
//! quinn asks its generator for a CID with no word of the connection it is
//! for. The first CID of a connection is asked for inside
//! `Endpoint::connect_with` or `Incoming::accept_with`, on the caller's
//! thread: ecnq makes those calls inside [`issuing_for`], and the generator
//! seals that connection's key in. The CIDs quinn issues later
//! (NEW_CONNECTION_ID frames, from the endpoint's driver task) carry key
//! [`UNBOUND`]; the socket layer binds them when they first arrive.
//!
//! Layout (8 bytes): `nonce (4) | key ^ mask(nonce) (4)`, where the nonce and
//! the mask come from a keyed hash with a secret key per endpoint. To an
//! observer both halves look random; CIDs of one connection share nothing
//! visible (RFC 9000 §5.1).

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator};

/// Length of every CID ecnq issues.
pub(crate) const CID_LEN: usize = 8;

/// The key of CIDs issued outside [`issuing_for`].
pub(crate) const UNBOUND: u32 = 0;

/// Seals connection keys into CIDs and opens them again (sans-IO: the hash
/// key is chosen by the caller).
#[derive(Clone, Debug)]
pub(crate) struct CidCodec {
    hasher: RandomState,
}

/// Domain separation for the two uses of the keyed hash.
const NONCE: u8 = 0;
const MASK: u8 = 1;

impl CidCodec {
    /// A codec whose secret is `hasher`'s key.
    pub fn new(hasher: RandomState) -> CidCodec {
        CidCodec { hasher }
    }

    fn mask(&self, nonce: u32) -> u32 {
        self.hasher.hash_one((MASK, nonce)) as u32
    }

    /// The CID number `counter` of this codec, carrying `key`.
    pub fn seal(&self, key: u32, counter: u64) -> [u8; CID_LEN] {
        let nonce = self.hasher.hash_one((NONCE, counter)) as u32;
        let mut cid = [0; CID_LEN];
        cid[..4].copy_from_slice(&nonce.to_be_bytes());
        cid[4..].copy_from_slice(&(key ^ self.mask(nonce)).to_be_bytes());
        cid
    }

    /// The key a CID carries; `None` if it cannot be one of this codec's.
    /// Any 8 bytes open to some key: the caller checks that it is live.
    pub fn open(&self, cid: &[u8]) -> Option<u32> {
        let cid: &[u8; CID_LEN] = cid.try_into().ok()?;
        let [n0, n1, n2, n3, k0, k1, k2, k3] = *cid;
        let nonce = u32::from_be_bytes([n0, n1, n2, n3]);
        Some(u32::from_be_bytes([k0, k1, k2, k3]) ^ self.mask(nonce))
    }
}

thread_local! {
    /// The key the generator seals into CIDs asked for on this thread.
    static ISSUING_FOR: Cell<u32> = const { Cell::new(UNBOUND) };
}

/// Runs `f` (a quinn call that creates a connection) so that the CIDs quinn
/// asks for meanwhile, on this thread, carry `key`.
pub(crate) fn issuing_for<R>(key: u32, f: impl FnOnce() -> R) -> R {
    /// Restores the previous key, even if `f` panics.
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            ISSUING_FOR.set(self.0);
        }
    }
    let _restore = Restore(ISSUING_FOR.replace(key));
    f()
}

/// quinn's CID generator for an ecnq socket (one per quinn endpoint).
pub(crate) struct CidGenerator {
    codec: Arc<CidCodec>,
    counter: u64,
}

impl CidGenerator {
    pub fn new(codec: Arc<CidCodec>) -> CidGenerator {
        CidGenerator { codec, counter: 0 }
    }
}

impl ConnectionIdGenerator for CidGenerator {
    fn generate_cid(&mut self) -> ConnectionId {
        // quinn checks uniqueness and asks again on a clash.
        self.counter = self.counter.wrapping_add(1);
        ConnectionId::new(&self.codec.seal(ISSUING_FOR.get(), self.counter))
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_key_opens_to_itself() {
        let codec = CidCodec::new(RandomState::new());
        for (key, counter) in [(1, 1), (7, 2), (u32::MAX, 3), (UNBOUND, 4)] {
            assert_eq!(codec.open(&codec.seal(key, counter)), Some(key));
        }
    }

    #[test]
    fn only_eight_byte_cids_open() {
        let codec = CidCodec::new(RandomState::new());
        assert_eq!(codec.open(&[1; 7]), None);
        assert_eq!(codec.open(&[1; 9]), None);
        assert_eq!(codec.open(&[]), None);
    }

    #[test]
    fn cids_of_one_connection_look_unrelated() {
        let codec = CidCodec::new(RandomState::new());
        let a = codec.seal(5, 1);
        let b = codec.seal(5, 2);
        // No shared half, so an observer cannot link them by bytes.
        assert_ne!(a[..4], b[..4]);
        assert_ne!(a[4..], b[4..]);
        // Another endpoint's secret opens them to other keys.
        let other = CidCodec::new(RandomState::new());
        assert_ne!(other.open(&a), Some(5));
    }

    #[test]
    fn the_generator_seals_the_key_of_the_enclosing_call() {
        let codec = Arc::new(CidCodec::new(RandomState::new()));
        let mut generator = CidGenerator::new(codec.clone());
        let outside = generator.generate_cid();
        let inside = issuing_for(42, || generator.generate_cid());
        let after = generator.generate_cid();
        assert_eq!(codec.open(&outside), Some(UNBOUND));
        assert_eq!(codec.open(&inside), Some(42));
        assert_eq!(codec.open(&after), Some(UNBOUND));
        assert_eq!(inside.len(), generator.cid_len());
    }
}
