//! The buffered frame reader over a real socket: back-to-back frames in one
//! write, frames split at every size, fragmented messages, pings.

mod common;

use std::sync::Arc;

use nostrwire_loadgen::rng::Rng;
use nostrwire_loadgen::ws::{self, Admitted, Counters, WsUrl};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// Serves one connection: handshake, then `bytes` in pieces of `piece` bytes.
async fn serve_bytes(bytes: Vec<u8>, piece: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        common::handshake(&mut sock).await.unwrap();
        for p in bytes.chunks(piece) {
            sock.write_all(p).await.unwrap();
            sock.flush().await.unwrap();
            if piece < 64 {
                tokio::task::yield_now().await;
            }
        }
        // Keep the socket open until the client is done.
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    });
    url
}

fn messages(n: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut wire = Vec::new();
    let mut expected = Vec::new();
    let mut rng = Rng::new(4);
    for i in 0..n {
        // Sizes straddle the 7-bit, 16-bit and 64-bit length encodings.
        let len = match i % 4 {
            0 => rng.below(126) as usize,
            1 => 126 + rng.below(1000) as usize,
            2 => 65_536 + rng.below(3000) as usize,
            _ => 20,
        };
        let msg: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
        common::server_frame(&mut wire, 0x1, &msg);
        expected.push(msg);
    }
    (wire, expected)
}

async fn read_all(url: &str, n: usize) -> Vec<Vec<u8>> {
    let counters = Arc::new(Counters::default());
    let mut rng = Rng::new(1);
    let (mut rd, _wr) = ws::connect(&WsUrl::parse(url).unwrap(), counters, &mut rng, 1 << 20)
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < n {
        match rd.next().await.unwrap() {
            Admitted::Text(t) => got.push(t.to_vec()),
            other => panic!("unexpected {other:?}"),
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_frames_in_one_write_are_all_read() {
    let (wire, expected) = messages(200);
    let url = serve_bytes(wire, usize::MAX).await;
    assert_eq!(read_all(&url, 200).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_split_at_any_point_are_reassembled() {
    for piece in [1usize, 2, 3, 7, 1000, 4096] {
        let (wire, expected) = messages(if piece < 4 { 12 } else { 60 });
        let url = serve_bytes(wire, piece).await;
        assert_eq!(
            read_all(&url, expected.len()).await,
            expected,
            "piece {piece}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fragments_pings_and_close() {
    let mut wire = Vec::new();
    // "hello " + ping + "world" as a fragmented text message.
    wire.extend_from_slice(&[0x01, 6]);
    wire.extend_from_slice(b"hello ");
    wire.extend_from_slice(&[0x89, 2, b'h', b'i']);
    wire.extend_from_slice(&[0x80, 5]);
    wire.extend_from_slice(b"world");
    wire.extend_from_slice(&[0x88, 2, 0x03, 0xE8]);
    let url = serve_bytes(wire, 3).await;
    let mut rng = Rng::new(1);
    let (mut rd, _wr) = ws::connect(
        &WsUrl::parse(&url).unwrap(),
        Arc::new(Counters::default()),
        &mut rng,
        1 << 20,
    )
    .await
    .unwrap();
    assert_eq!(rd.next().await.unwrap(), Admitted::Ping(b"hi"));
    assert_eq!(rd.next().await.unwrap(), Admitted::Text(b"hello world"));
    assert_eq!(rd.next().await.unwrap(), Admitted::Close(Some(1000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_frames_are_refused() {
    let mut wire = Vec::new();
    common::server_frame(&mut wire, 0x1, &vec![b'x'; 5000]);
    let url = serve_bytes(wire, usize::MAX).await;
    let mut rng = Rng::new(1);
    let (mut rd, _wr) = ws::connect(
        &WsUrl::parse(&url).unwrap(),
        Arc::new(Counters::default()),
        &mut rng,
        4096,
    )
    .await
    .unwrap();
    assert!(matches!(
        rd.next().await,
        Err(nostrwire_loadgen::Error::Protocol(_))
    ));
}
