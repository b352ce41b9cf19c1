//! autobatch-async-std (under construction).
