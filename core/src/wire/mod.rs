//! The bunqueue wire protocol (under construction).
