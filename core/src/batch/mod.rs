//! The generic batcher (under construction).
