//! The streaming HRRYFILE container writer (to be written).
