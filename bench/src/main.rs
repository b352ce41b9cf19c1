//! `autobatch-bench`: add() throughput, batching off and on, measured the way bunqueue's
//! auto-batching write-up (<https://bunqueue.dev>) measures it.
//!
//! With no arguments it starts the embedded broker in-process and measures the write-up's four
//! patterns (sequential `await add`, and waves of 10, 50 and 100 concurrent adds joined with
//! `join_all`) with autobatch's batching off and on, interleaved, 5 repetitions each, and
//! prints the throughput table with medians and spreads. `--compare` runs the same patterns against
//! one real bunqueue 2.9.5 server with autobatch, bunqueue's own TS client and the official
//! Rust client side by side, plus the loopback ping-pong floor. Every run without `--tls` also
//! measures, beside each concurrent cell, the server's ceiling and the client floor (core's
//! encoder and decoder on a blocking socket), and judges the client's CPU per add against the
//! latter; `--client-only` leaves all of those out, for profiling. `--tls` runs the
//! throughput table over TLS and over plain TCP side by side, against twin embedded brokers (one serving
//! TLS with a certificate made at start). `--fleet 1,2,3` runs them on bunqueue's PostgreSQL
//! multi-broker mode (a throwaway PostgreSQL and up to three brokers) with bunqueue's TS
//! client beside autobatch. See `--help`.
#![forbid(unsafe_code)]

mod autobatch;
mod ceiling;
mod chart;
mod cli;
mod client_floor;
mod cpu;
mod fleet;
mod floor;
mod ids;
mod machine;
mod mode;
mod official;
mod render;
mod render_error;
mod report;
mod run;
mod runtime_kind;
mod stats;
mod svg;
mod table;
mod throughput;
mod ts;
mod web;
mod workload;

use std::io;
use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::cli::Args;
use crate::machine::MachineInfo;
use crate::mode::{Mode, Rendering};

fn main() -> ExitCode {
    let args = Args::parse();
    // A command line that names no run is a usage error, reported as clap reports its own.
    let mode = Mode::from_args(&args).unwrap_or_else(|e| Args::command().error(e.kind(), e).exit());
    match run(&mode) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("autobatch-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `mode`: the one place where the modes part ways.
fn run(mode: &Mode) -> io::Result<()> {
    match mode {
        Mode::Render { rendering, path } => print_rendering(*rendering, path),
        Mode::Web {
            bunqueue,
            plan,
            output,
        } => web::main(
            plan,
            *bunqueue,
            output.json.as_deref(),
            output.svg.as_deref(),
            &MachineInfo::collect(),
        ),
        Mode::Fleet { sizes, measure } => fleet::main(sizes, measure, MachineInfo::collect()),
        Mode::Table { table, measure } => throughput::main(table, measure, MachineInfo::collect()),
    }
}

/// Prints `rendering` of the JSON document at `path`.
fn print_rendering(rendering: Rendering, path: &Path) -> io::Result<()> {
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let rendered = match rendering {
        Rendering::Markdown => render::markdown(&doc),
        Rendering::Headline => render::headline(&doc),
        Rendering::Svg => render::svg(&doc),
    };
    let text = rendered.map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })?;
    print!("{text}");
    Ok(())
}
