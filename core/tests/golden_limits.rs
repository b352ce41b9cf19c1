//! Golden tests for the limit operations (rate limit, concurrency, stall settings, groups) on
//! frames captured from bunqueue 2.9.5 (`33_limits.jsonl`, `34_groups.jsonl`).

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops;
use ops_golden::{check, commands, Reply};

const FILES: &[&str] = &["33_limits.jsonl", "34_groups.jsonl"];

#[test]
fn queue_limits() {
    check::<ops::RateLimit>(FILES, Reply::Exact);
    check::<ops::RateLimitClear>(FILES, Reply::Exact);
    check::<ops::SetConcurrency>(FILES, Reply::Exact);
    check::<ops::ClearConcurrency>(FILES, Reply::Exact);
}

#[test]
fn stall_config() {
    check::<ops::GetStallConfig>(FILES, Reply::Exact);
    check::<ops::SetStallConfig>(FILES, Reply::Exact);
}

#[test]
fn groups() {
    check::<ops::GetGroupJobsCount>(FILES, Reply::Exact);
    check::<ops::GetGroupsJobsCount>(FILES, Reply::Exact);
    check::<ops::GetGroupActiveCount>(FILES, Reply::Exact);
    check::<ops::SetGroupRateLimit>(FILES, Reply::Exact);
    check::<ops::GetGroupRateLimit>(FILES, Reply::Exact);
    check::<ops::GetGroupRateLimitTtl>(FILES, Reply::Exact);
    check::<ops::RemoveGroupRateLimit>(FILES, Reply::Exact);
    check::<ops::SetGroupConcurrency>(FILES, Reply::Exact);
    check::<ops::GetGroupConcurrency>(FILES, Reply::Exact);
    check::<ops::RemoveGroupConcurrency>(FILES, Reply::Exact);
    check::<ops::PauseGroup>(FILES, Reply::Exact);
    check::<ops::ResumeGroup>(FILES, Reply::Exact);
    check::<ops::IsGroupPaused>(FILES, Reply::Exact);
    check::<ops::RateLimitGroup>(FILES, Reply::Exact);
}

#[test]
fn every_captured_command_is_checked() {
    let checked = [
        "RateLimit",
        "RateLimitClear",
        "SetConcurrency",
        "ClearConcurrency",
        "GetStallConfig",
        "SetStallConfig",
        "GetGroupJobsCount",
        "GetGroupsJobsCount",
        "GetGroupActiveCount",
        "SetGroupRateLimit",
        "GetGroupRateLimit",
        "GetGroupRateLimitTtl",
        "RemoveGroupRateLimit",
        "SetGroupConcurrency",
        "GetGroupConcurrency",
        "RemoveGroupConcurrency",
        "PauseGroup",
        "ResumeGroup",
        "IsGroupPaused",
        "RateLimitGroup",
        // The set-up add of 34_groups (a job of group t1): checked in golden_job_options.
        "PUSHB",
    ];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
