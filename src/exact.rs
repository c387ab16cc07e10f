//! Exact summation of floating-point values (to be written).
