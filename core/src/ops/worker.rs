//! Worker registration, so the server lists the worker: register, heartbeat, unregister.
