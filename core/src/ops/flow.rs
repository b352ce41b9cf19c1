//! Flows: parents and children added together (`PUSHF`), children's values and failures, waiting for a job to finish.
