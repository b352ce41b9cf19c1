//! Replays the committed corpora of the session and batcher fuzz targets
//! (`fuzz/corpus/session_input`, `fuzz/corpus/batcher_ops`) on stable, with the checks the
//! targets run (`fuzz/src/session_checks.rs`, included by path).

#[path = "../../fuzz/src/session_checks.rs"]
mod session_checks;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus");

fn replay(target: &str, check: fn(&[u8])) {
    let dir = format!("{CORPUS}/{target}");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{dir} holds only {} inputs", files.len());
    for path in files {
        let data = std::fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| check(&data));
        assert!(r.is_ok(), "{}", path.display());
    }
}

#[test]
fn session_input_corpus_replays() {
    replay("session_input", session_checks::session_input);
}

#[test]
fn batcher_ops_corpus_replays() {
    replay("batcher_ops", session_checks::batcher_ops);
}
