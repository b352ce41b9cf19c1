//! autobatch-tokio (under construction).
