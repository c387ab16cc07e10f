//! The layouts a stored tensor can have: every layout tag the Hurray
//! specification names (`memory-layout.md`, "Named Layout Tags"), with the
//! names the library shows and parses.
//!
//! A Hurray file is a container: it may hold tensors of any of these
//! layouts side by side. The reader serves the sparse layouts we also
//! write ([`OutputLayout`]: COO, CSR, CSC); a tensor of another layout is
//! listed ([`crate::HurrayFile::tensor_infos`]), its placement checked,
//! and the operations that need its entries refuse it by name
//! ([`crate::Error::LayoutNotServed`]).

use crate::options::OutputLayout;

crate::vocab::vocabulary! {
    /// The layout of a stored tensor: one row per layout tag the Hurray
    /// specification names. [`OutputLayout`] is the subset we write.
    pub enum Layout ("layout") {
        /// Dense, the last dimension varying fastest (tag 0x01).
        RowMajor => "row-major" | "c-order": "the last dimension varies fastest (C order)",
        /// Dense, the first dimension varying fastest (tag 0x02).
        ColumnMajor => "column-major" | "fortran-order": "the first dimension varies fastest (Fortran order)",
        /// Dense with explicit strides (tag 0x03).
        Strided => "strided": "explicit strides",
        /// Dense in tiles (tag 0x04).
        Tiled => "tiled" | "blocked": "in tiles",
        /// Dense along a Morton (Z-order) curve (tag 0x05).
        Morton => "morton" | "z-order": "along a Morton (Z-order) curve",
        /// Coordinate list (tag 0x06).
        Coo => "coo": "a coordinate list",
        /// Compressed sparse rows (tag 0x07).
        Csr => "csr": "compressed rows",
        /// Compressed sparse columns (tag 0x08).
        Csc => "csc": "compressed columns",
        /// Compressed sparse fibres (tag 0x09).
        Csf => "csf": "compressed fibres",
        /// Pages found through a block table (tag 0x0A).
        BlockPaged => "block-paged": "pages found through a block table",
        /// A data-less head over member tensors (tag 0x0B).
        Composite => "composite": "a view of member tensors",
        /// Dense along a Hilbert curve (tag 0x40).
        Hilbert => "hilbert": "along a Hilbert curve",
    }
}

/// How a layout addresses its elements (the spec's "Type" column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    /// Every element is stored, at a position given by a formula.
    Dense,
    /// Only stored entries exist; the others are zero.
    Sparse,
    /// Every element is stored, found through an index structure.
    Indirect,
    /// No data of its own: a view of other tensors.
    Virtual,
}

impl LayoutKind {
    /// "dense", "sparse", "indirect" or "virtual".
    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::Dense => "dense",
            LayoutKind::Sparse => "sparse",
            LayoutKind::Indirect => "indirect",
            LayoutKind::Virtual => "virtual",
        }
    }
}

/// The layouts the reader serves, in words, for messages ("dump serves
/// COO, CSR and CSC").
pub const SERVED: &str = "COO, CSR and CSC";

impl Layout {
    /// Every layout, in tag order.
    pub const ALL: [Layout; 12] = [
        Layout::RowMajor,
        Layout::ColumnMajor,
        Layout::Strided,
        Layout::Tiled,
        Layout::Morton,
        Layout::Coo,
        Layout::Csr,
        Layout::Csc,
        Layout::Csf,
        Layout::BlockPaged,
        Layout::Composite,
        Layout::Hilbert,
    ];

    /// The Hurray layout tag (those of the layouts we write are
    /// [`OutputLayout::tag`]'s; `crate::hurray`'s constants are these).
    pub const fn tag(self) -> u8 {
        match self {
            Layout::RowMajor => 0x01,
            Layout::ColumnMajor => 0x02,
            Layout::Strided => 0x03,
            Layout::Tiled => 0x04,
            Layout::Morton => 0x05,
            Layout::Coo => OutputLayout::Coo.tag(),
            Layout::Csr => OutputLayout::Csr.tag(),
            Layout::Csc => OutputLayout::Csc.tag(),
            Layout::Csf => OutputLayout::Csf.tag(),
            Layout::BlockPaged => 0x0A,
            Layout::Composite => 0x0B,
            Layout::Hilbert => 0x40,
        }
    }

    /// The layout of a tag, if the spec names it.
    pub fn from_tag(tag: u8) -> Option<Layout> {
        Layout::ALL.into_iter().find(|l| l.tag() == tag)
    }

    /// How it addresses its elements.
    pub fn kind(self) -> LayoutKind {
        match self {
            Layout::RowMajor
            | Layout::ColumnMajor
            | Layout::Strided
            | Layout::Tiled
            | Layout::Morton
            | Layout::Hilbert => LayoutKind::Dense,
            Layout::Coo | Layout::Csr | Layout::Csc | Layout::Csf => LayoutKind::Sparse,
            Layout::BlockPaged => LayoutKind::Indirect,
            Layout::Composite => LayoutKind::Virtual,
        }
    }

    /// The layout as one of those we write and the reader serves.
    pub fn served(self) -> Option<OutputLayout> {
        OutputLayout::from_tag(self.tag())
    }

    /// Kind and name, for messages: "dense row-major", "sparse CSF"
    /// (sparse names are initialisms, written in capitals as elsewhere).
    pub fn described(self) -> String {
        let name = match self.kind() {
            LayoutKind::Sparse => self.name().to_uppercase(),
            _ => self.name().to_string(),
        };
        format!("{} {name}", self.kind().name())
    }
}

impl From<OutputLayout> for Layout {
    /// The spec's layout of the tag we write: every one is in the spec's
    /// table (`tags_are_the_specs_and_round_trip` holds them to it).
    fn from(l: OutputLayout) -> Layout {
        Layout::from_tag(l.tag()).unwrap_or(Layout::Coo)
    }
}

/// A layout tag in words, to follow "tensor \"w\" is": "dense row-major"
/// for a tag the spec names, else what the spec says of its range ("in an
/// implementation-private extension layout (tag 0xf3)").
pub fn describe_tag(tag: u8) -> String {
    match Layout::from_tag(tag) {
        Some(l) => l.described(),
        None if (0xF0..=0xFE).contains(&tag) => {
            format!("in an implementation-private extension layout (tag 0x{tag:02x})")
        }
        None => format!("in a layout the Hurray specification does not name (tag 0x{tag:02x})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Vocabulary;

    #[test]
    fn tags_are_the_specs_and_round_trip() {
        for l in Layout::ALL {
            assert_eq!(Layout::from_tag(l.tag()), Some(l));
            assert_eq!(l.to_string().parse::<Layout>().unwrap(), l);
        }
        assert_eq!(Layout::TERMS.len(), Layout::ALL.len());
        // Every layout we write is the spec's of its tag, spelt the same.
        for t in OutputLayout::TERMS {
            let l = Layout::from(t.value);
            assert_eq!((l.tag(), l.name()), (t.value.tag(), t.value.name()));
            assert_eq!(l.served(), Some(t.value));
        }
        assert_eq!(Layout::RowMajor.tag(), 0x01);
        assert_eq!(Layout::Hilbert.tag(), 0x40);
        for t in [0x00, 0x0C, 0x3F, 0x80, 0xF0, 0xFF] {
            assert_eq!(Layout::from_tag(t), None, "0x{t:02x}");
        }
        assert_eq!(Layout::RowMajor.described(), "dense row-major");
        assert_eq!(Layout::Csf.described(), "sparse CSF");
        assert!(describe_tag(0xF3).contains("extension"));
        assert!(describe_tag(0x33).contains("0x33"));
    }

    /// The layouts we write are spelt as in this table: one name each.
    #[test]
    fn written_layouts_share_the_names_and_tags() {
        for o in OutputLayout::TERMS {
            let l = Layout::from(o.value);
            assert_eq!((l.name(), l.tag()), (o.name, o.value.tag()));
            assert_eq!(l.served(), Some(o.value));
        }
        let served = Layout::ALL.iter().filter(|l| l.served().is_some()).count();
        assert_eq!(served, OutputLayout::TERMS.len());
    }
}
