//! Order-preserving packing of index tuples into integer keys (to be written).
