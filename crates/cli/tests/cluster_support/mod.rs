//! A relay cluster for tests: three NATS servers (JetStream, clustered on
//! loopback ports, data in a temporary directory) and relay nodes run from
//! the built binary, so a test can `kill -9` either. Every process is
//! killed when its handle drops.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use nostrwire_event::{
    message::write, Event, EventId, Filter, Keys, Kind, RelayMessage, SignedFields, Tag, Timestamp,
    UnsignedEvent,
};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::support::{free_port, http_get, wait_listening};

/// The `nats-server` to run: `$NATS_SERVER`, the one on `PATH`, or the one
/// `go install` left in `~/go/bin` (as `build.rs` looks for it: without one
/// there the cluster tests are ignored, so reaching here without one means
/// they were asked for by name or with `--include-ignored`).
pub fn nats_server() -> PathBuf {
    let candidates = std::env::var_os("NATS_SERVER")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("PATH").into_iter().flat_map(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("nats-server"))
                .collect::<Vec<_>>()
        }))
        .chain(std::env::var_os("HOME").map(|h| Path::new(&h).join("go/bin/nats-server")));
    for candidate in candidates {
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "nats-server not found (set NATS_SERVER or install it: go install github.com/nats-io/nats-server/v2@v2.15.2)"
    );
}

/// The binary the relay nodes run: the one built with the tests, or
/// `$NOSTRWIRE_RELAY_BIN` (a release build, to load the cluster harder).
fn relay_bin() -> PathBuf {
    std::env::var_os("NOSTRWIRE_RELAY_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_nostrwire")),
        PathBuf::from,
    )
}

/// One NATS server of the test cluster.
pub struct Nats {
    bin: PathBuf,
    pub conf: PathBuf,
    pub port: u16,
    child: Option<Child>,
}

impl Nats {
    fn spawn(&mut self) {
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(&self.conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nats-server");
        self.child = Some(child);
        wait_listening(self.port);
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same data.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGSTOP (`resume` is SIGCONT): the server reads and answers nothing
    /// while its connections stay open, as a server far behind would.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let status = Command::new("kill")
                .arg(signal)
                .arg(child.id().to_string())
                .status()
                .unwrap();
            assert!(status.success());
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One relay node.
pub struct Node {
    pub name: String,
    pub port: u16,
    pub config: PathBuf,
    pub data: PathBuf,
    child: Option<Child>,
}

impl Node {
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.data.with_extension("log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
            .arg("relay")
            .arg("--config")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the relay");
        self.child = Some(child);
        wait_listening(self.port);
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same data.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGTERM and wait, so its database may be read.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while child.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The lines of this node's log (its stderr) that contain `pattern`.
    pub fn log_lines(&self, pattern: &str) -> Vec<String> {
        std::fs::read_to_string(self.data.with_extension("log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(pattern))
            .map(str::to_string)
            .collect()
    }

    pub fn metrics(&self) -> String {
        http_get(self.port, "/metrics", "")
    }

    /// A `nostrwire_cluster_*` gauge of this node.
    pub fn gauge(&self, name: &str) -> Option<u64> {
        let prefix = format!("nostrwire_cluster_{name}{{node=\"{}\"}} ", self.name);
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
    }

    /// Every stored event as canonical JSON lines, sorted (`nostrwire
    /// export` on its database).
    pub fn export(&self) -> Vec<String> {
        let out = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
            .arg("export")
            .arg("--data")
            .arg(&self.data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three NATS servers and `relays` relay nodes.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub nats: Vec<Nats>,
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// Starts everything and waits until every node is connected to the
    /// stream; None when there is no nats-server (outside CI).
    pub fn start(relays: usize) -> Cluster {
        let bin = nats_server();
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, route)| format!("nats-route://127.0.0.1:{route}"))
            .collect();
        let mut nats = Vec::new();
        for (i, (port, route)) in ports.iter().enumerate() {
            let store = dir.path().join(format!("nats{}", i + 1));
            std::fs::create_dir_all(&store).unwrap();
            let conf = dir.path().join(format!("nats{}.conf", i + 1));
            std::fs::write(
                &conf,
                format!(
                    "server_name: nats{n}\nlisten: 127.0.0.1:{port}\n\
                     jetstream {{ store_dir: \"{store}\" }}\n\
                     cluster {{\n  name: test\n  listen: 127.0.0.1:{route}\n  routes: [{routes}]\n}}\n",
                    n = i + 1,
                    store = store.display(),
                    routes = routes.join(", "),
                ),
            )
            .unwrap();
            let mut server = Nats {
                bin: bin.clone(),
                conf,
                port: *port,
                child: None,
            };
            server.spawn();
            nats.push(server);
        }
        let urls: Vec<String> = nats
            .iter()
            .map(|n| format!("\"nats://127.0.0.1:{}\"", n.port))
            .collect();
        let mut nodes = Vec::new();
        for i in 0..relays {
            let name = format!("relay{}", i + 1);
            let port = free_port();
            let data = dir.path().join(&name);
            let config = dir.path().join(format!("{name}.toml"));
            std::fs::write(
                &config,
                format!(
                    "[relay]\nlisten = \"127.0.0.1:{port}\"\ndata = \"{data}\"\n\n\
                     [cluster]\nenabled = true\nurls = [{urls}]\nnode = \"{name}\"\npublish_timeout_ms = 3000\n",
                    data = data.display(),
                    urls = urls.join(", "),
                ),
            )
            .unwrap();
            let mut node = Node {
                name,
                port,
                config,
                data,
                child: None,
            };
            node.spawn();
            nodes.push(node);
        }
        let cluster = Cluster { dir, nats, nodes };
        for node in &cluster.nodes {
            cluster.wait_connected(node);
        }
        cluster.wait_stream_replicated();
        cluster
    }

    /// `nostrwire cluster status --json`, as node 1's configuration sees
    /// the cluster; None while it cannot be read.
    pub fn status(&self) -> Option<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
            .args(["cluster", "status", "--json", "--config"])
            .arg(&self.nodes[0].config)
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    /// Waits until the stream has a leader and its three copies are
    /// current: a new stream takes a moment to elect one, and a write
    /// before that is refused.
    pub fn wait_stream_replicated(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = self.status().is_some_and(|status| {
                let peers = status["peers"].as_array().cloned().unwrap_or_default();
                peers.len() == 3
                    && peers.iter().any(|p| p["leader"] == true)
                    && peers.iter().all(|p| p["current"] == true)
            });
            if ready {
                return;
            }
            assert!(Instant::now() < deadline, "the stream has no leader");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Waits until `node` reports a connection to the stream.
    pub fn wait_connected(&self, node: &Node) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while node.gauge("connected") != Some(1) {
            assert!(
                Instant::now() < deadline,
                "{} did not connect to the cluster",
                node.name
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until every running node in `nodes` has applied the stream up
    /// to `sequence`.
    pub fn wait_applied(&self, nodes: &[usize], sequence: u64, within: Duration) {
        if let Err(e) = self.try_wait_applied(nodes, sequence, within) {
            panic!("{e}");
        }
    }

    /// [`Cluster::wait_applied`], saying which node stopped short instead
    /// of panicking.
    pub fn try_wait_applied(
        &self,
        nodes: &[usize],
        sequence: u64,
        within: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + within;
        for &i in nodes {
            loop {
                let applied = self.nodes[i].gauge("applied_sequence").unwrap_or(0);
                if applied >= sequence {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "{} applied {applied} of {sequence}",
                        self.nodes[i].name
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    /// The highest stream sequence any node in `nodes` has seen.
    pub fn stream_sequence(&self, nodes: &[usize]) -> u64 {
        nodes
            .iter()
            .filter_map(|&i| self.nodes[i].gauge("stream_sequence"))
            .max()
            .unwrap_or(0)
    }
}

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn connect(url: &str) -> Socket {
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// An `OK` answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub accepted: bool,
    pub message: String,
}

/// The next text message on `ws` within `within` (other frames passed
/// over); `None` when the time passes or the connection ends.
pub async fn next_text(ws: &mut Socket, within: Duration) -> Option<Utf8Bytes> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => return Some(text),
            Ok(Some(Ok(_))) => {}
            _ => return None,
        }
    }
}

/// Publishes `event` and waits for its `OK`.
pub async fn publish(ws: &mut Socket, event: &Event) -> Answer {
    let mut out = Vec::new();
    write::client_event(&mut out, event);
    ws.send(Message::text(String::from_utf8(out).unwrap()))
        .await
        .unwrap();
    loop {
        let text = next_text(ws, Duration::from_secs(20))
            .await
            .expect("an OK in time");
        if let Ok(RelayMessage::Ok {
            event_id,
            accepted,
            message,
        }) = RelayMessage::parse(text.as_bytes())
        {
            if event_id == event.id {
                return Answer {
                    accepted,
                    message: message.to_string(),
                };
            }
        }
    }
}

/// The ids of the stored events a REQ returns, sorted.
pub async fn query(ws: &mut Socket, filter: Filter) -> Vec<EventId> {
    let mut out = Vec::new();
    write::req(&mut out, "q", &[filter]);
    ws.send(Message::text(String::from_utf8(out).unwrap()))
        .await
        .unwrap();
    let mut found = Vec::new();
    loop {
        let text = next_text(ws, Duration::from_secs(20))
            .await
            .expect("EOSE in time");
        match RelayMessage::parse(text.as_bytes()).unwrap() {
            RelayMessage::Event { event, .. } => {
                event.verify().expect("a valid stored event");
                found.push(*event.id());
            }
            RelayMessage::Eose(_) => break,
            _ => {}
        }
    }
    let mut close = Vec::new();
    write::close(&mut close, "q");
    ws.send(Message::text(String::from_utf8(close).unwrap()))
        .await
        .unwrap();
    found.sort();
    found
}

/// Signs an event of `kind` by author `author`, created `age` seconds ago.
pub fn event(author: u64, kind: u16, tags: &[&[&str]], content: &str, age: u64) -> Event {
    let keys = Keys::derive(7, author);
    UnsignedEvent::new(
        &keys,
        Timestamp::new(nostrwire_relay::now() - age).unwrap(),
        Kind(kind),
        tags.iter().map(|t| Tag::from_strs(t)).collect(),
        content,
    )
    .sign(&keys)
}
