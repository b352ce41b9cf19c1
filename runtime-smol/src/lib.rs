//! autobatch-smol (under construction).
