//! erc — ecnq's explicit rate control: every router tells each flow the
//! max-min fair rate of its output link, and senders pace at the smallest
//! rate on their path. The idea is RCP's and XCP's (routers that know their
//! link compute the rate, senders stop probing for it); the wire is ecnq's
//! own, in the two ECN bits, over chains of packets as MPCP carries levels.
//!
//! # Wire
//! A rate is an **index** on a log scale, [`rate_of`] / [`index_of`]: index 1
//! is [`RATE_MAX`] (200 Gbit/s), index [`MAX_INDEX`] (1023) is [`RATE_MIN`]
//! (10 kbit/s), each step 1.66 % below the last. A larger index is a smaller
//! rate, so the path's minimum rate is the maximum index, which routers can
//! compute by only ever raising it. [`UNSPOKEN`], the index whose digits are
//! all 1, means "no erc router": it is what a sender's unmarked packets carry
//! (ECT(0), so that an L4S bottleneck with no erc router on the path queues
//! them as classic traffic, which the sender's Cubic law answers correctly,
//! RFC 9331 §4.3), and no router advertises it; index 0, all digits 0, means
//! the same.
//!
//! The index travels Gray-coded, one binary digit per packet, over chains of
//! [`DIGITS`] packets: the packet's position is `h % 10` from the packet hash
//! (docs/design.md §2), digit 0 is Not-ECT and digit 1 is ECT(0). Both are
//! classic codepoints, so an L4S DualPI2 bottleneck downstream keeps every
//! packet of the flow in its classic queue, in order (with ECT(1) as a digit,
//! the flow was split across its two queues and the L4S queue's packets
//! overtook the classic queue's by its delay, which QUIC reads as loss).
//! A classic AQM drops a Not-ECT digit where it would mark an ECT(0) one;
//! the sender's Cubic window answers either. CE is never a digit: it keeps
//! meaning congestion, from classic and L4S AQMs, and the sender answers it
//! as Cubic does. ECT(1) carries no digit and is never rewritten.
//! Gray coding makes a one-step change of the index a one-digit change, so a
//! receiver that has seen only part of a chain since a change still reads one
//! of the two neighbouring indices.
//!
//! # Router ([`ErcMarker`])
//! Every interval (about 16 packets of a fair-share flow, 10–250 ms) the
//! router measures each flow's arrival rate (bounded, expiring
//! [`FlowTable`](crate::signal::flow_table::FlowTable)) and computes the
//! max-min fair share of the capacity it targets: `η·C`, less what drains
//! the queue it saw within [`ErcConfig::drain_time`]. Other schemes' flows
//! in the same queue ([`Marker::observe`](crate::signal::Marker::observe))
//! count as flows alike. Flows that send
//! well under the share are limited elsewhere (or by their application)
//! and keep their rate; the rest split what is left (water-filling). A new
//! flow counts as one more bottlenecked flow from its tenth packet on (no
//! receiver reads a chain from fewer) if it has waited a round trip for
//! its peer, else once its packets have passed every position of the chain
//! (fake newcomers sent back to back claim nothing), and stays so while
//! young, so that the share drops before the newcomer sends at it (a safe
//! start); a short flow that ends sooner never takes a share from the
//! others. Once the
//! share is computed again, young flows hold as many shares as recent
//! newcomers came to use (most do where flows are long, few where most are
//! short), and a newcomer that came back after a round trip and then went
//! quiet for two has ended and frees its share. Shares reserved for
//! young flows that do not come to use them go to the flows there: the
//! share advertised is the max-min share times a gain that grows into
//! spare capacity as RCP's rate does, per round trip of the flows, and
//! falls at once when a queue stands. The packets a flow sends before it
//! counts carry the max-min share with it counted, since its first chain
//! is read mostly from them; not the gain, which hands the flows there
//! what they leave unused. The router
//! writes its own index's digit into a packet only when its index is above
//! the flow's incoming one, which it learns per flow from the digits it
//! sees: the path maximum of the index, the path minimum of the rate.
//! A flow that sends well under the rate written into its packets has not
//! read it yet: it is told no other until that one has passed at every
//! position of the chain.
//!
//! # Receiver ([`ErcDecoder`])
//! Keeps the newest digit per position. After a digit changes, the index is
//! complete again once every position has been seen since; meanwhile it
//! reports the larger (slower) of the last complete index and the one the
//! digits spell, so that a rate decrease is heard at once and an increase
//! only once it is certain.
//!
//! # Sender ([`ErcLaw`])
//! Until a router speaks (index 0), it is Cubic. While its first chain is
//! partial, the slowest rate the chain can still spell bounds it from both
//! sides: the router advertises at least that, so the sender paces at it
//! once it is above what the Cubic start sends, and the Cubic start grows
//! no further. Once its delay has risen (a queue, from its own initial
//! window on a slow link) it falls to half its initial window, or to that
//! rate if larger. Once it hears an index it paces at the advertised rate:
//! a decrease at once, an increase ramped over one smoothed RTT (the first
//! reading within 50 ms). Beside the rate it keeps a Cubic window, capped
//! while it does not limit the flow; loss and CE shrink that window as
//! Cubic would, so a drop-tail or classic-ECN bottleneck elsewhere on the
//! path is respected. It never sends above the last advertised rate: with
//! no feedback it holds.
//!
//! # Layout
//! `index` holds the scale and the wire, `router` the marker (its `share`
//! computes the fair share every interval, its `written` picks the index
//! each flow's packets carry), `decoder` the receiver and `law` the
//! sender; each file's tests sit beside its code.

mod counts;
mod decoder;
mod index;
mod law;
mod router;
mod start;

pub use counts::{AckedDigits, ErcCountReader};
pub use decoder::ErcDecoder;
pub use index::{
    digit, digit_of, ecn_of, from_gray, gray, index_of, position, rate_of, Digits, DIGITS,
    MAX_INDEX, MAX_LEVEL, PARTIAL, RATE_MAX, RATE_MIN, UNSPOKEN,
};
pub use law::ErcLaw;
pub use router::{ErcConfig, ErcMarker, DATA_PACKET, LONGEST_ROUND, RETURN_GAP};
pub use start::{first_window_pace, start_with_code, START_CODE_DIGITS, START_CODE_STEP};

use crate::wire::ecn::WireScheme;

/// erc's DSCP pool tag (docs/design.md §2, tag table).
pub const WIRE: WireScheme = WireScheme::new(6);
