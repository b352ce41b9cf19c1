//! Read-only lookups: jobs by state or custom id, progress, counts per priority, queue limits, deduplication keys, queues, workers, stats and metrics.
