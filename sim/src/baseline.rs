//! The simulator's loss-based baselines: NewReno and Cubic, both the core's
//! own laws. Both react to a loss or a CE mark at most once per round trip,
//! and both start in slow start.

/// The NewReno baseline is the core's classic law (RFC 6582 window
/// arithmetic, loss and CE as congestion), the same one ecnq senders fall
/// back to.
pub type NewReno = ecnq::classic::ClassicLaw;

/// The Cubic baseline is the core's Cubic law (RFC 8312), the one erc keeps
/// beside its advertised rate.
pub type Cubic = ecnq::cubic::CubicLaw;
