//! The two header fields ecnq speaks through: the ECN codepoint and the DSCP
//! scheme tag (docs/design.md §2, "ECN field" and "DSCP scheme tag").

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

/// A scheme as routers tell it from the DSCP tag: the marking it needs. The
/// number is the scheme's tag in the DSCP pool `xxxx11` (docs/design.md §2, "DSCP
/// scheme tag"); each scheme's module names its own, and the registry
/// ([`crate::schemes::registry`]) lists them with their names, codepoints and roles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WireScheme(u8);

impl WireScheme {
    /// Untagged traffic: classic ECN treatment.
    pub const CLASSIC: WireScheme = WireScheme(0);

    /// The wire scheme with DSCP pool tag `tag` (`0..=15`).
    pub const fn new(tag: u8) -> WireScheme {
        WireScheme(tag & 0b1111)
    }

    /// The DSCP pool tag, `0..=15` (0 = untagged). Feedback reports carry it
    /// as their scheme byte.
    pub const fn id(self) -> u8 {
        self.0
    }
}

/// The scheme a packet carries in its DSCP field, with MCP's three flag bits
/// (docs/design.md §2, "DSCP scheme tag"). The DSCP layout itself is the
/// registry's ([`crate::schemes::registry`]): it knows which tags carry flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SchemeTag {
    /// The scheme's DSCP pool tag ([`WireScheme::id`]); 0 = untagged.
    pub wire_id: u8,
    /// MCP this-path bit: set by the sender that requests fairing.
    pub this_path: bool,
    /// MCP fairing bit: set by a requesting sender, propagated by routers.
    pub fairing: bool,
    /// MCP presence-probe bit: set by a sender on a presence probe, cleared
    /// by every ecnq router that meters MCP (docs/design.md §2, "No router
    /// on the path").
    pub probe: bool,
}

impl SchemeTag {
    /// No tag: classic treatment.
    pub const UNTAGGED: SchemeTag = SchemeTag {
        wire_id: 0,
        this_path: false,
        fairing: false,
        probe: false,
    };

    /// The tag a sender of the scheme with this wire id puts on its packets.
    pub const fn new(wire_id: u8) -> SchemeTag {
        SchemeTag {
            wire_id: wire_id & 0b1111,
            this_path: false,
            fairing: false,
            probe: false,
        }
    }

    /// The wire scheme the tag names.
    pub const fn wire(self) -> WireScheme {
        WireScheme::new(self.wire_id)
    }

    /// Whether the packet carries no scheme tag (classic traffic).
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
}
