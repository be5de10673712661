//! `nostrwire cluster status`: the cluster's stream and where each relay
//! node stands in it (`docs/cluster.md`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nostrwire_relay::cluster::{read_status, ClusterStatus};

/// Subcommands of `nostrwire cluster`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The stream's last sequence and copies, and each node's applied
    /// sequence, lag and last report.
    Status(StatusArgs),
}

/// Arguments of `nostrwire cluster status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// A node's configuration file (its `[cluster]` section names the NATS
    /// servers and the stream).
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// NATS server URL (repeatable; overrides the file's `cluster.urls`).
    #[arg(long = "nats", value_name = "URL")]
    pub nats: Vec<String>,
    /// Stream name (overrides the file's `cluster.stream`).
    #[arg(long)]
    pub stream: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Status(args) => status(args),
    }
}

fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let mut settings = super::relay::load_config(args.config.as_ref(), None)?.cluster;
    if !args.nats.is_empty() {
        settings.urls = args.nats;
    }
    if let Some(stream) = args.stream {
        settings.stream = stream;
    }
    let status = read_status(&settings)
        .with_context(|| format!("cannot read the cluster at {}", settings.urls.join(", ")))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", table(&status));
    }
    Ok(ExitCode::SUCCESS)
}

fn table(status: &ClusterStatus) -> String {
    let mut out = format!(
        "stream {}: last sequence {}, {} messages, {:.1} MB\n",
        status.stream,
        status.last_sequence,
        status.messages,
        status.bytes as f64 / 1e6
    );
    let peers: Vec<String> = status
        .peers
        .iter()
        .map(|p| {
            let role = match (p.leader, p.current) {
                (true, _) => "leader",
                (false, true) => "current",
                (false, false) => "behind",
            };
            format!("{} ({role})", p.name)
        })
        .collect();
    if !peers.is_empty() {
        out.push_str(&format!("copies: {}\n", peers.join(", ")));
    }
    out.push_str(&format!(
        "\n{:<24} {:<28} {:>12} {:>10} {:>10}\n",
        "node", "url", "applied", "lag", "reported"
    ));
    for node in &status.nodes {
        out.push_str(&format!(
            "{:<24} {:<28} {:>12} {:>10} {:>9}s\n",
            node.name, node.url, node.applied, node.lag, node.reported_seconds_ago
        ));
    }
    if status.nodes.is_empty() {
        out.push_str("(no node has reported)\n");
    }
    out
}
