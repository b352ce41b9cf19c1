//! Job schedulers (`Cron*`): upsert, get, list and remove repeatable jobs.
