//! Shared harness for autobatch integration tests.
