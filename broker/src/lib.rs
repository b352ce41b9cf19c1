//! autobatch-broker (under construction).
