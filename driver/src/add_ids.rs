//! Job ids made by the client for [`ClientOptions::idempotent_adds`]: every add without a custom
//! id gets one, so that an add written on a connection that is then lost can be looked up and
//! replayed instead of ending "maybe applied".
//!
//! The ids are UUIDs of version 7, the shape of bunqueue's own job ids, made as flows make
//! theirs ([`uuid_v7`]): they sort in the order the adds were made, which matters because
//! bunqueue hands out jobs of equal priority and run time in the order of their ids.
//!
//! [`ClientOptions::idempotent_adds`]: crate::ClientOptions::idempotent_adds

use autobatch_core::wire::JobOptions;

use crate::uuid::uuid_v7;

/// `opts` with a job id of the client's own, unless it has one already or repeats (bunqueue
/// refuses a custom id on a repeating job: its repetitions are named by the server).
pub(crate) fn with_own_id(opts: JobOptions) -> JobOptions {
    if opts.job_id.is_some() || opts.repeat.is_some() {
        return opts;
    }
    opts.job_id(uuid_v7())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_get_ids_in_the_order_they_were_made() {
        let ids: Vec<String> = (0..10_000)
            .map(|_| with_own_id(JobOptions::new()).job_id.unwrap())
            .collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "out of order or repeated"
        );
        assert!(ids.iter().all(|id| id.len() == 36 && &id[14..15] == "7"));
    }

    #[test]
    fn a_custom_id_or_a_repeat_is_left_alone() {
        use autobatch_core::wire::Repeat;
        use std::time::Duration;
        let own = with_own_id(JobOptions::new().job_id("order-42"));
        assert_eq!(own.job_id.as_deref(), Some("order-42"));
        let every = Repeat::every(Duration::from_secs(60));
        assert_eq!(with_own_id(JobOptions::new().repeat(every)).job_id, None);
    }
}
