//! Contender ids: how the report, the JSON document and the yardsticks name each measured
//! client. A leaf module, so that every contender can name itself without depending on the
//! report that reads it.

/// autobatch with batching off.
pub const AB_OFF: &str = "autobatch-off";
/// autobatch with batching on (the default).
pub const AB_ON: &str = "autobatch-on";
/// autobatch with batching on and `ClientOptions::idempotent_adds` (`--compare`).
pub const AB_IDEMPOTENT: &str = "autobatch-idempotent-on";
/// bunqueue's TS client, autoBatch off.
pub const TS_OFF: &str = "ts-off";
/// bunqueue's TS client, autoBatch on (its default).
pub const TS_ON: &str = "ts-on";
/// The official Rust client.
pub const OFFICIAL: &str = "official";
/// The ping-pong floor.
pub const FLOOR: &str = "floor";
/// The raw PUSH ping-pong.
pub const FLOOR_PUSH: &str = "floor-push";
/// autobatch with batching off, over TLS (`--tls`).
pub const TLS_OFF: &str = "autobatch-tls-off";
/// autobatch with batching on, over TLS (`--tls`).
pub const TLS_ON: &str = "autobatch-tls-on";
/// The server's ceiling: pre-encoded PUSHB frames, a few in flight.
pub const CEILING: &str = "ceiling";
/// The client floor: core's encoder and decoder on a blocking socket, PUSHB frames of 50,
/// a few in flight (what any client must spend per add).
pub const CLIENT_FLOOR: &str = "client-floor";
/// The unbatched client floor: the same, one PUSH per job, a window of 100 in flight
/// (what any client must spend per add without batching).
pub const CLIENT_FLOOR_PUSH: &str = "client-floor-push";
/// The server's ceiling in the pattern's own waves (a wave's pre-encoded frames out at
/// once, the next wave when all are answered): the most any client gets with them.
pub const CEILING_WAVES: &str = "ceiling-waves";
