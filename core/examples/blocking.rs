//! The core embedded in a loop of one's own: a blocking driver over `std::net`, no async runtime.
//!
//! ```text
//! cargo run -p autobatch-core --example blocking -- 127.0.0.1:6789 [jobs]
//! ```
//!
//! It adds `jobs` jobs (default 1000) to queue `blocking-example` in one go, so they leave in
//! batches of at most 50, then closes the session and prints what went over the wire. Point it
//! at a bunqueue server or at `autobatch-broker`.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use autobatch_core::session::{Event, Session, SessionConfig};
use autobatch_core::wire::{JobSpec, Value};

fn main() {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:6789".into())
        .parse()
        .expect("usage: blocking HOST:PORT [jobs]");
    let jobs: usize = args
        .next()
        .map_or(1000, |n| n.parse().expect("jobs is a number"));

    let start = Instant::now();
    let mut session =
        Session::new(SessionConfig::default(), start).expect("default config is valid");
    for i in 0..jobs {
        let data = Value::map([("i", Value::from(i as u64))]);
        session
            .add(start, "blocking-example", JobSpec::new("example", data))
            .expect("valid job");
    }
    session.close(start);

    let mut socket: Option<TcpStream> = None;
    let mut out = Vec::with_capacity(64 * 1024);
    let mut buf = vec![0u8; 64 * 1024];
    let (mut ok, mut failed) = (0usize, 0usize);
    loop {
        // 1. Write what the session has for the wire.
        out.clear();
        if session.poll_transmit(Instant::now(), &mut out) {
            if let Some(s) = socket.as_mut() {
                if s.write_all(&out).is_err() {
                    socket = None;
                    session.handle_disconnected(Instant::now());
                }
            }
        }
        // 2. Act on its events. Acting may feed the session new input (a connect): then go
        // round again before blocking, so what it unblocked is written first.
        let mut fed_input = false;
        while let Some(event) = session.poll_event() {
            fed_input |= event == Event::Connect;
            match event {
                Event::Connect => match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                    Ok(s) => {
                        s.set_nodelay(true).ok();
                        socket = Some(s);
                        session.handle_connected(Instant::now());
                    }
                    Err(e) => {
                        eprintln!("connect {addr}: {e}");
                        session.handle_connect_failed(Instant::now());
                    }
                },
                Event::Disconnect => socket = None,
                Event::Done { result: Ok(_), .. } => ok += 1,
                Event::Done { result: Err(e), .. } => {
                    failed += 1;
                    eprintln!("add failed: {e}");
                }
                Event::Closed => {
                    let stats = session.stats();
                    println!(
                        "{ok} added, {failed} failed in {:?}: {} PUSHB frames, {} frames in all, {} bytes sent",
                        start.elapsed(),
                        stats.pushb_frames,
                        stats.frames_sent,
                        stats.bytes_sent
                    );
                    return;
                }
                _ => {}
            }
        }
        if fed_input {
            continue;
        }
        // 3. Wait for bytes, or for the session's next deadline.
        let now = Instant::now();
        let wait = session
            .poll_timeout()
            .map(|t| t.saturating_duration_since(now))
            .unwrap_or(Duration::from_secs(1))
            .max(Duration::from_millis(1));
        match socket.as_mut() {
            Some(s) => {
                s.set_read_timeout(Some(wait)).ok();
                match s.read(&mut buf) {
                    Ok(0) => {
                        socket = None;
                        session.handle_disconnected(Instant::now());
                    }
                    Ok(n) => session.handle_input(Instant::now(), &buf[..n]),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(_) => {
                        socket = None;
                        session.handle_disconnected(Instant::now());
                    }
                }
            }
            None => std::thread::sleep(wait),
        }
        session.handle_timeout(Instant::now());
    }
}
