//! One job's own records: progress, logs, data, and its lock.
