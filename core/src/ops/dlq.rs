//! The dead-letter queue: list, stats, retry, purge, remove, and its configuration.
