//! Running the `nostrwire` binary from tests.
#![allow(dead_code)]

use std::process::Command;

/// Runs `nostrwire ARGS` from the workspace root (where the default
/// `testdata/` paths resolve) and returns its standard output; fails the
/// test, with standard error, when it exits unsuccessfully.
pub fn nostrwire(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A loopback port nothing listens on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on `port` (a relay started by a test).
pub fn wait_listening(port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "relay did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The body of a plain HTTP GET to the relay, with these extra header lines.
pub fn http_get(port: u16, path: &str, headers: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_string())
}

/// The lines of `testdata/real-events.jsonl`, real signed events.
pub fn corpus() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/real-events.jsonl"
    ))
    .unwrap()
}
