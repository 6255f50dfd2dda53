//! What the routers of the schemes other than erc write per interval, in
//! the values the program compares packets with: both the control loop,
//! which computes them, and the maps, which carry them, use them.

use std::time::Duration;

use ecnq::router::meter::LinkLoad;
use ecnq::schemes::mpcp::Chain;
use ecnq::schemes::vcp::{self, VcpMarker};
use ecnq::schemes::{bmcc, mcp};
use ecnq::signal::{LinkState, Marker, PacketMarks};
use ecnq::wire::ecn::{Ecn, SchemeTag};

/// The code VCP's router writes on a link of `load`: what `VcpMarker`
/// (the shim's) raises the lowest code, ECT(1), to. The program raises
/// an ECT packet of VCP's to it (tests/marks.rs holds it to `VcpMarker`).
pub fn vcp_code(load: &LinkLoad) -> Ecn {
    let link = LinkState {
        load: *load,
        ..LinkState::default()
    };
    let mut pkt = PacketMarks {
        ecn: Ecn::Ect1,
        tag: SchemeTag::new(vcp::WIRE.id()),
        hash: 0,
        flow: 0,
    };
    VcpMarker.mark(Duration::ZERO, &link, &mut pkt);
    pkt.ecn
}

/// What the routers of the schemes other than erc write into a packet,
/// from a link's load factors: the values the program compares a packet
/// with (`struct control` in `bpf/ecnq.bpf.c`). Each comes from its
/// scheme's own code, so that the program marks as the scheme's router
/// does (tests/marks.rs, `the_kernel_path_marks_as_the_router_code_does`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Codes {
    /// VCP's code (and EVCP's, which travels as VCP), ECN bits.
    pub vcp: u8,
    /// MCP's code, ECN bits.
    pub mcp: u8,
    /// Whether BMCC's load is at least u: its ECT packets become CE.
    pub bmcc_ce: bool,
    /// How many values of a hash's high 16 bits have an ADPM threshold
    /// under BMCC's load: their packets are marked ECT(1).
    pub bmcc_below: u32,
    /// MPCP's digit at each position of a chain of two, and of three.
    pub dpcp: [u8; 2],
    pub tpcp: [u8; 3],
    /// The meter's last completed interval: MCP's fairing requests last
    /// in intervals.
    pub epoch: u64,
}

impl Codes {
    /// The codes of a link loaded as `load` says.
    pub fn of(load: &LinkLoad) -> Codes {
        let f = load[bmcc::FORMULA].get();
        // θ(h) rises with the hash's high 16 bits (bmcc::threshold): the
        // marked ones are those under the first whose θ is not under f.
        let (mut below, mut above) = (0u32, 1u32 << 16);
        while below < above {
            let mid = (below + above) / 2;
            if f > bmcc::threshold(mid << 16) {
                below = mid + 1;
            } else {
                above = mid;
            }
        }
        let digits = |chain: Chain| {
            let level = chain.level_of(load[vcp::FORMULA]);
            move |position: usize| chain.digit(level, position)
        };
        let (dpcp, tpcp) = (digits(Chain::Two), digits(Chain::Three));
        Codes {
            vcp: vcp_code(load).bits(),
            mcp: mcp::code_of(load[mcp::FORMULA]).bits(),
            bmcc_ce: f >= bmcc::U,
            bmcc_below: below,
            dpcp: std::array::from_fn(dpcp),
            tpcp: std::array::from_fn(tpcp),
            epoch: load.epoch,
        }
    }
}
