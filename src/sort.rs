//! Radix sort of (key, value) records (to be written).
