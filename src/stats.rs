//! Streaming statistics over the logical tensor (to be written).
