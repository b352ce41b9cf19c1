// Records the compiler version for the report's "versions" line.
fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| "rustc (unknown)".into());
    println!("cargo:rustc-env=AUTOBATCH_BENCH_RUSTC={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");
}
