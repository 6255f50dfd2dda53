//! The two header fields ecnq speaks through: the ECN codepoint and the DSCP
//! scheme tag (DESIGN.md §2, "ECN field" and "DSCP scheme tag").

/// The two ECN bits of the IPv4 TOS / IPv6 traffic-class byte (RFC 3168).
///
/// The numeric order is the order routers raise codes in: VCP's low-load
/// `01` < high-load `10` < overload `11`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Ecn {
    /// `00`: the sender does not speak ECN.
    NotEct = 0b00,
    /// `01`: ECT(1). VCP low load.
    Ect1 = 0b01,
    /// `10`: ECT(0). VCP high load; the BMCC/ADPM unmarked base codepoint.
    Ect0 = 0b10,
    /// `11`: Congestion Experienced. VCP overload.
    Ce = 0b11,
}

impl Ecn {
    /// All four codepoints, in numeric order.
    pub const ALL: [Ecn; 4] = [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce];

    /// The codepoint held in the low two bits of `bits`; higher bits are ignored.
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The codepoint carried by a TOS / traffic-class byte.
    pub const fn from_tos(tos: u8) -> Ecn {
        Ecn::from_bits(tos)
    }

    /// The two bits, `0..=3`.
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// Whether the sender declared an ECN-capable transport (anything but `00`).
    pub const fn is_ect(self) -> bool {
        !matches!(self, Ecn::NotEct)
    }
}

/// The DSCP scheme tag: DSCP bits 5..3 carry the scheme's wire id, bit 1 the
/// MCP this-path bit, bit 0 the MCP fairing bit; bit 2 is reserved and sent as 0
/// (DESIGN.md §2, "DSCP scheme tag").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SchemeTag {
    /// Scheme wire id, `0..=7` (0 = classic / untagged).
    pub wire_id: u8,
    /// MCP this-path bit: set by the sender that requests fairing.
    pub this_path: bool,
    /// MCP fairing bit: set by a requesting sender, propagated by routers.
    pub fairing: bool,
}

impl SchemeTag {
    /// No tag: DSCP 0, classic treatment.
    pub const UNTAGGED: SchemeTag = SchemeTag {
        wire_id: 0,
        this_path: false,
        fairing: false,
    };

    /// The tag a sender of the scheme with this wire id puts on its packets.
    pub const fn new(wire_id: u8) -> SchemeTag {
        SchemeTag {
            wire_id: wire_id & 0b111,
            this_path: false,
            fairing: false,
        }
    }

    /// Reads a six-bit DSCP value (higher bits ignored).
    pub const fn from_dscp(dscp: u8) -> SchemeTag {
        SchemeTag {
            wire_id: (dscp >> 3) & 0b111,
            this_path: dscp & 0b10 != 0,
            fairing: dscp & 0b01 != 0,
        }
    }

    /// Reads the tag out of a whole TOS / traffic-class byte.
    pub const fn from_tos(tos: u8) -> SchemeTag {
        SchemeTag::from_dscp(tos >> 2)
    }

    /// The six-bit DSCP value; the reserved bit 2 is always 0.
    pub const fn dscp(self) -> u8 {
        (self.wire_id & 0b111) << 3 | (self.this_path as u8) << 1 | self.fairing as u8
    }

    /// The whole TOS / traffic-class byte for this tag and an ECN codepoint.
    pub const fn tos(self, ecn: Ecn) -> u8 {
        self.dscp() << 2 | ecn.bits()
    }

    /// Whether the packet carries no scheme id (classic traffic).
    pub const fn is_untagged(self) -> bool {
        self.wire_id == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecn_bits_round_trip_and_order() {
        for e in Ecn::ALL {
            assert_eq!(Ecn::from_bits(e.bits()), e);
            assert_eq!(Ecn::from_tos(0b1010_1100 | e.bits()), e);
        }
        assert!(Ecn::Ect1 < Ecn::Ect0 && Ecn::Ect0 < Ecn::Ce);
        assert!(!Ecn::NotEct.is_ect() && Ecn::Ce.is_ect());
    }

    #[test]
    fn tag_layout_matches_design() {
        // DPCP (id 2), this-path and fairing set: DSCP 0b010_0_1_1.
        let tag = SchemeTag {
            wire_id: 2,
            this_path: true,
            fairing: true,
        };
        assert_eq!(tag.dscp(), 0b010_011);
        assert_eq!(tag.tos(Ecn::Ect1), 0b0100_1101);
        assert_eq!(SchemeTag::from_tos(tag.tos(Ecn::Ce)), tag);
        // The reserved bit is ignored on read and never written.
        assert_eq!(SchemeTag::from_dscp(0b101_100), SchemeTag::new(5));
        assert_eq!(SchemeTag::new(5).dscp(), 0b101_000);
        assert!(SchemeTag::from_tos(0b0000_0010).is_untagged());
    }

    #[test]
    fn every_dscp_reads_back_without_the_reserved_bit() {
        for dscp in 0u8..64 {
            assert_eq!(SchemeTag::from_dscp(dscp).dscp(), dscp & !0b100);
        }
    }
}
