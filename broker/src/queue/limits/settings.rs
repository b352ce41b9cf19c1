//! A queue's limits as set, read and kept: RateLimit, SetConcurrency and their clearing,
//! GetQueueLimits, and their form across a restart.

use super::*;

impl Limits {
    /// RateLimit, as bunqueue's `setRateLimit`: `limit` jobs per `duration` ms (1 s when
    /// absent or not positive), lifted after `ttl` ms when that is positive; a full bucket.
    pub fn set_rate(
        &mut self,
        queue: &str,
        limit: f64,
        duration: Option<f64>,
        ttl: Option<f64>,
        now: f64,
    ) {
        let duration = duration.filter(|d| *d > 0.0);
        let ttl = ttl.filter(|t| *t > 0.0);
        let window_seconds = duration.unwrap_or(DEFAULT_WINDOW) / 1000.0;
        let q = self.queues.entry(queue.to_owned()).or_default();
        q.rate = Some(RateLimit {
            limit,
            duration,
            expires_at: ttl.map(|t| now + t),
            bucket: Bucket::new(limit, limit / window_seconds, now),
        });
    }

    /// RateLimitClear.
    pub fn clear_rate(&mut self, queue: &str) {
        if let Some(q) = self.queues.get_mut(queue) {
            q.rate = None;
        }
        self.free_if_empty(queue);
    }

    /// SetConcurrency: a new limit keeps the count of jobs already holding a slot.
    pub fn set_concurrency(&mut self, queue: &str, limit: f64) {
        let q = self.queues.entry(queue.to_owned()).or_default();
        match &mut q.concurrency {
            Some(c) => c.limit = limit,
            None => q.concurrency = Some(Concurrency { limit, active: 0 }),
        }
    }

    /// ClearConcurrency: the limit and its count are forgotten.
    pub fn clear_concurrency(&mut self, queue: &str) {
        if let Some(q) = self.queues.get_mut(queue) {
            q.concurrency = None;
        }
        self.free_if_empty(queue);
    }

    /// `queue`'s rate and concurrency limits as a restart keeps them (see `kept`): the numbers
    /// as set, a `ttl`-form rate limit's end; none without limits.
    pub fn kept(&self, queue: &str) -> Option<Value> {
        self.queues.get(queue).map(|q| {
            Value::map([
                (
                    "rate",
                    q.rate.as_ref().map_or(Value::Nil, |r| {
                        Value::map([
                            ("limit", Value::F64(r.limit)),
                            ("duration", r.duration.map_or(Value::Nil, Value::F64)),
                            ("expiresAt", r.expires_at.map_or(Value::Nil, Value::F64)),
                        ])
                    }),
                ),
                (
                    "concurrency",
                    q.concurrency
                        .as_ref()
                        .map_or(Value::Nil, |c| Value::F64(c.limit)),
                ),
            ])
        })
    }

    /// Puts back what [`kept`](Self::kept) kept; a `ttl`-form rate limit that
    /// ran out meanwhile is dropped. A full bucket and no slot in use, as after a restart in
    /// bunqueue.
    pub fn restore(&mut self, queue: &str, v: &Value, now: f64) {
        if let Some(r) = v.get("rate").filter(|r| !r.is_nullish()) {
            let limit = r.get("limit").and_then(Value::as_f64);
            let duration = r.get("duration").and_then(Value::as_f64);
            let ends = r.get("expiresAt").and_then(Value::as_f64);
            if let (Some(limit), true) = (limit, ends.is_none_or(|at| at > now)) {
                let window_seconds = duration.unwrap_or(DEFAULT_WINDOW) / 1000.0;
                let q = self.queues.entry(queue.to_owned()).or_default();
                q.rate = Some(RateLimit {
                    limit,
                    duration,
                    expires_at: ends,
                    bucket: Bucket::new(limit, limit / window_seconds, now),
                });
            }
        }
        if let Some(limit) = v.get("concurrency").and_then(Value::as_f64) {
            let q = self.queues.entry(queue.to_owned()).or_default();
            q.concurrency = Some(Concurrency { limit, active: 0 });
        }
    }

    /// GetQueueLimits' `limits`, as bunqueue's `getQueueLimitStatus`: the rate limit
    /// (`{max, duration}` or nil), `rateLimitTtl` (-2 without a rate limit; the ms left for a
    /// ttl-form limit; else the bucket's wait for a token, 0 while fewer than `maxJobs` tokens
    /// are used), the concurrency limit (or nil) and whether its slots are all taken.
    pub fn status(&mut self, queue: &str, max_jobs: Option<f64>, now: f64) -> Value {
        self.expire(queue, now);
        let q = self.queues.get_mut(queue);
        let (rate, ttl, concurrency) = match q {
            None => (Value::Nil, -2.0, None),
            Some(q) => {
                let (rate, ttl) = match &mut q.rate {
                    None => (Value::Nil, -2.0),
                    Some(r) => {
                        let ttl = match r.expires_at {
                            Some(at) => (at - now).max(0.0),
                            None => r.bucket.ttl(max_jobs, now),
                        };
                        let rate = Value::map([
                            ("max", js_number(r.limit)),
                            ("duration", js_number(r.duration.unwrap_or(DEFAULT_WINDOW))),
                        ]);
                        (rate, ttl)
                    }
                };
                (rate, ttl, q.concurrency.as_ref())
            }
        };
        Value::map([
            ("rateLimit", rate),
            ("rateLimitTtl", js_number(ttl)),
            (
                "concurrencyLimit",
                concurrency.map_or(Value::Nil, |c| js_number(c.limit)),
            ),
            (
                "maxed",
                Value::from(concurrency.is_some_and(|c| c.active as f64 >= c.limit)),
            ),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Failure;
    use crate::queue::{PullSpec, Pulled, State};
    use crate::store::MemoryStore;
    use autobatch_core::wire::JobSpec;

    fn state() -> State {
        State::new(Box::new(MemoryStore::new()), 0.0).expect("memory store")
    }

    fn add(s: &mut State, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let spec = JobSpec::new("j", Value::from(i as i64));
                s.push("q", spec, 0.0)
            })
            .collect()
    }

    fn pull(s: &mut State, n: usize, now: f64) -> Vec<Pulled> {
        let spec = PullSpec {
            queue: "q",
            count: n,
            locked: false,
            lock_ttl: 0,
            tie_to: None,
        };
        s.pull(&spec, now)
    }

    fn limits(s: &mut State, max_jobs: Option<f64>, now: f64) -> (Value, f64, Value, bool) {
        let v = s.queue_limits("q", max_jobs, now);
        (
            v.get("rateLimit").cloned().expect("rateLimit"),
            v.get("rateLimitTtl").and_then(Value::as_f64).expect("ttl"),
            v.get("concurrencyLimit").cloned().expect("concurrency"),
            v.get("maxed").and_then(Value::as_bool).expect("maxed"),
        )
    }

    #[test]
    fn no_limits_read_as_bunqueue_defaults() {
        let mut s = state();
        assert_eq!(
            limits(&mut s, None, 0.0),
            (Value::Nil, -2.0, Value::Nil, false)
        );
    }

    #[test]
    fn concurrency_caps_active_jobs_and_finishing_frees_a_slot() {
        let mut s = state();
        add(&mut s, 4);
        s.set_concurrency("q", 2.0);
        let got = pull(&mut s, 3, 1.0);
        assert_eq!(got.len(), 2, "a PULLB stops at the limit");
        assert!(pull(&mut s, 1, 1.0).is_empty());
        assert!(limits(&mut s, None, 1.0).3, "maxed");
        s.ack(&got[0].id, None, None, false, 2.0).expect("ack");
        assert!(!limits(&mut s, None, 2.0).3);
        assert_eq!(pull(&mut s, 3, 2.0).len(), 1, "one slot freed");
        // Raising the limit keeps the count: one more slot.
        s.set_concurrency("q", 3.0);
        assert_eq!(pull(&mut s, 3, 3.0).len(), 1);
        assert_eq!(s.jobs.counts("q", 3.0).waiting, 0);
    }

    #[test]
    fn a_new_concurrency_limit_counts_from_zero_and_release_stops_at_zero() {
        let mut s = state();
        add(&mut s, 4);
        let early = pull(&mut s, 2, 1.0);
        s.set_concurrency("q", 1.0);
        // The two jobs pulled before the limit hold no slot.
        assert_eq!(pull(&mut s, 1, 1.0).len(), 1);
        assert!(pull(&mut s, 1, 1.0).is_empty());
        // Finishing both early jobs frees the one slot (the count stays at 0 after).
        for p in &early {
            s.ack(&p.id, None, None, false, 2.0).expect("ack");
        }
        assert_eq!(pull(&mut s, 2, 2.0).len(), 1);
        assert!(pull(&mut s, 1, 2.0).is_empty());
        s.clear_concurrency("q");
        assert!(limits(&mut s, None, 2.0).2.is_nullish());
        assert_eq!(s.jobs.counts("q", 2.0).waiting, 0);
    }

    #[test]
    fn rate_limit_is_a_token_bucket() {
        let mut s = state();
        add(&mut s, 5);
        s.set_rate_limit("q", 2.0, Some(1000.0), None, 0.0);
        assert_eq!(pull(&mut s, 5, 0.0).len(), 2, "a full bucket of 2");
        assert!(pull(&mut s, 1, 0.0).is_empty());
        let (rate, ttl, _, maxed) = limits(&mut s, None, 0.0);
        assert_eq!(rate.get("max"), Some(&Value::Int(2)));
        assert_eq!(rate.get("duration"), Some(&Value::Int(1000)));
        assert_eq!(ttl, 500.0, "a token every 500 ms");
        assert!(!maxed, "the rate limit is not the concurrency limit");
        assert_eq!(limits(&mut s, Some(3.0), 0.0).1, 0.0, "fewer than 3 used");
        // 250 ms refill half a token: still nothing; 500 ms a whole one.
        assert!(pull(&mut s, 1, 250.0).is_empty());
        assert_eq!(limits(&mut s, None, 250.0).1, 250.0);
        assert_eq!(pull(&mut s, 5, 500.0).len(), 1);
        // The bucket never holds more than its capacity.
        assert_eq!(pull(&mut s, 5, 60_000.0).len(), 2);
        s.clear_rate_limit("q");
        assert_eq!(limits(&mut s, None, 60_000.0).1, -2.0);
    }

    #[test]
    fn rate_limit_defaults_to_a_second_and_keeps_fractions() {
        let mut s = state();
        s.set_rate_limit("q", 2.5, Some(-5.0), Some(0.0), 0.0);
        let (rate, ttl, _, _) = limits(&mut s, None, 0.0);
        assert_eq!(rate.get("max"), Some(&Value::F64(2.5)));
        assert_eq!(rate.get("duration"), Some(&Value::Int(1000)));
        assert_eq!(ttl, 0.0, "tokens left");
        add(&mut s, 3);
        assert_eq!(pull(&mut s, 3, 0.0).len(), 2, "2.5 tokens give two jobs");
    }

    #[test]
    fn an_infinite_refill_rate_starves_as_in_js() {
        let mut s = state();
        add(&mut s, 1);
        // 1e-310 ms: the rate overflows to infinity, and 0 ms × infinity is NaN tokens.
        s.set_rate_limit("q", 5.0, Some(1e-310), None, 0.0);
        assert!(pull(&mut s, 1, 0.0).is_empty());
    }

    #[test]
    fn a_ttl_limit_lifts_itself() {
        let mut s = state();
        add(&mut s, 3);
        s.set_rate_limit("q", 1.0, None, Some(5000.0), 0.0);
        assert_eq!(pull(&mut s, 3, 0.0).len(), 1);
        assert_eq!(limits(&mut s, None, 1000.0).1, 4000.0, "the time left");
        assert!(pull(&mut s, 1, 500.0).is_empty());
        assert_eq!(
            limits(&mut s, None, 5000.0),
            (Value::Nil, -2.0, Value::Nil, false)
        );
        assert_eq!(pull(&mut s, 3, 5000.0).len(), 2, "lifted");
    }

    #[test]
    fn a_late_ack_of_a_retried_job_frees_a_slot_again() {
        let mut s = state();
        add(&mut s, 4);
        s.set_concurrency("q", 2.0);
        let got = pull(&mut s, 2, 1.0);
        assert_eq!(got.len(), 2);
        // #0 fails and waits for its retry (slot freed), then a late ACK completes it: bunqueue
        // frees a slot once more, so two jobs may start while #1 still runs.
        s.fail(&got[0].id, None, Failure::new(None), 2.0)
            .expect("fail");
        s.ack(&got[0].id, None, None, false, 3.0).expect("ack");
        assert_eq!(pull(&mut s, 4, 3.0).len(), 2);
        assert!(limits(&mut s, None, 3.0).3);
    }

    #[test]
    fn group_counts() {
        let mut s = state();
        let grouped = |g: &str| {
            JobSpec::new("j", Value::Nil)
                .with_options(autobatch_core::wire::JobOptions::new().group_id(g))
        };
        s.push("q", grouped("g"), 0.0);
        s.push("q", grouped("g"), 0.0);
        s.push("q", grouped("h"), 0.0);
        add(&mut s, 1);
        assert_eq!(
            (s.jobs.group_queued("q", "g"), s.jobs.groups_queued("q")),
            (2, 3)
        );
        // The job without a group first, then g, h and g take turns.
        assert_eq!(pull(&mut s, 1, 1.0).len(), 1);
        let got = pull(&mut s, 3, 1.0);
        assert_eq!(s.group_active_count("q", "g"), 2);
        assert_eq!(
            (s.jobs.group_queued("q", "g"), s.jobs.groups_queued("q")),
            (0, 0)
        );
        // g's first job fails and waits for its retry (released), then a late ACK releases it
        // again, as bunqueue's count does: it reads 0 while g's second job still runs.
        s.fail(&got[0].id, None, Failure::new(None), 2.0)
            .expect("fail");
        assert_eq!(s.group_active_count("q", "g"), 1);
        s.ack(&got[0].id, None, None, false, 3.0).expect("ack");
        assert_eq!(s.group_active_count("q", "g"), 0);
        assert_eq!(s.group_active_count("q", "h"), 1);
        s.obliterate("q");
        assert_eq!(s.group_active_count("q", "h"), 0);
    }

    #[test]
    fn a_zero_limit_hands_out_nothing_and_a_refused_job_keeps_its_place() {
        let mut s = state();
        let ids = add(&mut s, 2);
        s.set_concurrency("q", 5.0);
        s.set_rate_limit("q", 0.0, None, None, 0.0);
        assert!(pull(&mut s, 2, 0.0).is_empty());
        assert!(
            !limits(&mut s, None, 0.0).3,
            "the refused job gave its slot back"
        );
        s.clear_rate_limit("q");
        let got: Vec<String> = pull(&mut s, 2, 0.0).into_iter().map(|p| p.id).collect();
        assert_eq!(got, ids, "still in order");
    }

    #[test]
    fn obliterate_forgets_the_limits() {
        let mut s = state();
        s.set_concurrency("q", 1.0);
        s.set_rate_limit("q", 1.0, None, None, 0.0);
        s.obliterate("q");
        assert_eq!(
            limits(&mut s, None, 0.0),
            (Value::Nil, -2.0, Value::Nil, false)
        );
        assert!(s.limits.queues.is_empty());
    }

    fn add_grouped(s: &mut State, group: &str) -> String {
        let mut spec = JobSpec::new("j", Value::Nil);
        spec.opts.group_id = Some(group.to_owned());
        s.push("q", spec, 0.0)
    }

    #[test]
    fn pulls_pass_over_paused_groups_and_keep_their_order() {
        let mut s = state();
        let a1 = add_grouped(&mut s, "a");
        let b1 = add_grouped(&mut s, "b");
        let a2 = add_grouped(&mut s, "a");
        assert!(s.groups().pause("q", "a"));
        let got = pull(&mut s, 3, 1.0);
        assert_eq!(got.iter().map(|p| &p.id).collect::<Vec<_>>(), [&b1]);
        assert!(pull(&mut s, 1, 1.0).is_empty());
        assert!(s.groups().resume("q", "a"));
        let got = pull(&mut s, 3, 1.0);
        assert_eq!(got.iter().map(|p| &p.id).collect::<Vec<_>>(), [&a1, &a2]);
    }

    /// A pull takes the jobs without a group first, then one job per group in turn; a group
    /// at its concurrency is passed over and the others keep their turns; once a job of it
    /// finishes, its turn comes again.
    #[test]
    fn groups_take_turns_and_one_at_its_concurrency_is_passed_over() {
        use crate::queue::limits::groups::PullGroup;
        let mut s = state();
        let a1 = add_grouped(&mut s, "a");
        let a2 = add_grouped(&mut s, "a");
        let b1 = add_grouped(&mut s, "b");
        let u = add(&mut s, 1).remove(0);
        let b2 = add_grouped(&mut s, "b");
        let c1 = add_grouped(&mut s, "c");
        let spec = |count| PullSpec {
            queue: "q",
            count,
            locked: false,
            lock_ttl: 0,
            tie_to: None,
        };
        let d = PullGroup {
            concurrency: Some(1),
            limit: None,
            affinity: None,
        };
        let ids = |p: Vec<Pulled>| p.into_iter().map(|p| p.id).collect::<Vec<_>>();
        let got = ids(s.pull_in_groups(&spec(10), Some(&d), 1.0));
        assert_eq!(got, [u, a1.clone(), b1.clone(), c1]);
        s.ack(&b1, None, None, false, 2.0).expect("ack");
        s.ack(&a1, None, None, false, 2.0).expect("ack");
        // a's turn comes before b's: the ring is a, b (c left it), the cursor on a.
        let got = ids(s.pull_in_groups(&spec(10), Some(&d), 3.0));
        assert_eq!(got, [a2, b2]);
    }

    #[test]
    fn group_concurrency_bounds_a_pull_that_sends_a_default() {
        use crate::queue::limits::groups::PullGroup;
        let mut s = state();
        for _ in 0..3 {
            add_grouped(&mut s, "a");
        }
        let b = add_grouped(&mut s, "b");
        s.groups().set_concurrency("q", "a", 1);
        let spec = PullSpec {
            queue: "q",
            count: 4,
            locked: false,
            lock_ttl: 0,
            tie_to: None,
        };
        let d = PullGroup {
            concurrency: Some(2),
            limit: None,
            affinity: None,
        };
        let got = s.pull_in_groups(&spec, Some(&d), 1.0);
        assert_eq!(got.len(), 2, "one of a (its override), then b");
        assert_eq!(got[1].id, b);
        s.groups().rate_limit("q", "a", 100, 1.0);
        assert!(s.next_look("q", 1.0).is_some_and(|t| t == 101.0));
    }
}
