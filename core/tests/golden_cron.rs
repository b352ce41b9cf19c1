//! Golden tests for the job scheduler operations on frames captured from bunqueue 2.9.5
//! (`32_cron.jsonl`).

#[path = "support/ops_golden.rs"]
mod ops_golden;

use autobatch_core::ops;
use autobatch_core::wire::server::ServeOperation;
use ops_golden::{check, commands, errors, Reply};

const FILES: &[&str] = &["32_cron.jsonl"];

#[test]
fn upsert_get_list_delete() {
    check::<ops::CronUpsert>(FILES, Reply::Exact);
    check::<ops::CronGet>(FILES, Reply::Exact);
    check::<ops::CronList>(FILES, Reply::Exact);
    check::<ops::CronDelete>(FILES, Reply::Exact);
}

#[test]
fn refusals_read_as_the_server_words_them() {
    let refused = errors(FILES, "Cron");
    assert_eq!(refused.len(), 3, "{refused:?}");
    for (request, error) in refused {
        match ops::CronUpsert::read_request(&request) {
            // The cron pattern is parsed by the server only.
            Ok(_) => assert!(error.starts_with("Invalid cron expression"), "{error}"),
            Err(e) => assert_eq!(e.to_string(), error),
        }
    }
    assert_eq!(errors(FILES, "CronGet")[0].1, "Cron job not found");
    assert_eq!(errors(FILES, "CronDelete")[0].1, "Cron job not found");
}

#[test]
fn every_captured_command_is_checked() {
    let checked = ["Cron", "CronGet", "CronList", "CronDelete"];
    for cmd in commands(FILES) {
        assert!(
            checked.contains(&cmd.as_str()),
            "captured {cmd} is not checked here"
        );
    }
}
