//! Compression ratio and speed of permessage-deflate on relay traffic: every
//! corpus event framed as the relay sends it (`["EVENT","q",…]`), compressed
//! message by message as one connection would, at several levels, with and
//! without context takeover. Best of 5 runs.
//!
//! cargo run --release -p nostrwire-websocket --example deflate_levels [FILE.jsonl]

use std::time::Instant;

use nostrwire_websocket::deflate::{DeflateConfig, DeflateParams};
use nostrwire_websocket::Role;

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "testdata/real-events.jsonl".into());
    let text = std::fs::read_to_string(&path).expect("corpus file");
    let messages: Vec<Vec<u8>> = text
        .lines()
        .map(|l| format!(r#"["EVENT","q",{l}]"#).into_bytes())
        .collect();
    let total: usize = messages.iter().map(Vec::len).sum();
    println!("{} messages, {total} bytes, from {path}", messages.len());
    println!("context takeover | level | bytes / plain | deflate MB/s | inflate MB/s");
    for takeover in [true, false] {
        for level in [1, 2, 3, 6, 9] {
            let config = DeflateConfig {
                level,
                ..DeflateConfig::default()
            };
            let params = DeflateParams {
                server_no_context_takeover: !takeover,
                client_no_context_takeover: !takeover,
            };
            let (mut deflate_s, mut inflate_s, mut size) = (f64::MAX, f64::MAX, 0);
            for _ in 0..5 {
                let mut compressor = params.compressor(Role::Server, &config);
                let mut decompressor = params.decompressor(Role::Client);
                let started = Instant::now();
                let wire: Vec<(bool, Vec<u8>)> = messages
                    .iter()
                    .map(|m| {
                        if compressor.wants(m.len()) {
                            let mut out = Vec::new();
                            compressor.compress(m, &mut out);
                            (true, out)
                        } else {
                            (false, m.clone())
                        }
                    })
                    .collect();
                deflate_s = deflate_s.min(started.elapsed().as_secs_f64());
                size = wire.iter().map(|(_, w)| w.len()).sum();
                let started = Instant::now();
                for ((compressed, w), m) in wire.iter().zip(&messages) {
                    if *compressed {
                        let mut back = Vec::new();
                        decompressor.decompress(w, &mut back, 1 << 24).unwrap();
                        assert_eq!(&back, m);
                    }
                }
                inflate_s = inflate_s.min(started.elapsed().as_secs_f64());
            }
            println!(
                "{takeover} | {level} | {:.3} | {:.0} | {:.0}",
                size as f64 / total as f64,
                total as f64 / deflate_s / 1e6,
                total as f64 / inflate_s / 1e6
            );
        }
    }
}
