//! Sizes told to people: the inverse of [`crate::vocab::parse_size`], in a
//! leaf module so that the error messages can use it.

/// `bytes` as people read a size: `512 B`, `3.4 MiB`, `1.5 GiB` (powers
/// of 1024, one decimal; [`crate::vocab::parse_size`] reads it back to within that
/// rounding). Every message and summary that tells a size uses it.
///
/// ```
/// use coo_assembler::vocab::format_size;
/// assert_eq!(format_size(512), "512 B");
/// assert_eq!(format_size(3_565_158), "3.4 MiB");
/// assert_eq!(format_size(256 << 20), "256 MiB");
/// ```
pub fn format_size(bytes: u64) -> String {
    // The units `parse_size` reads, so every size told can be given back.
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    // Whole numbers without a decimal: "256 MiB", not "256.0 MiB".
    if (v - v.round()).abs() < 0.05 {
        format!("{:.0} {}", v.round(), UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
