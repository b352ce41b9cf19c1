//! Limits: rate limit, global concurrency, stall detection, and per-group controls.
