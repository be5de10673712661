//! `nostrwire relay`: run the relay until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nostrwire_relay::Config;

/// Arguments of `nostrwire relay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// TOML configuration file (see `--print-config`).
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// Address to listen on (overrides the file).
    #[arg(long)]
    pub listen: Option<String>,
    /// Database directory (overrides the file).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Print the fully commented default configuration and exit.
    #[arg(long)]
    pub print_config: bool,
}

/// Where a command finds the relay database: the configuration file's
/// `relay.data` (and storage settings), or `--data`.
#[derive(Debug, clap::Args)]
pub struct DatabaseArgs {
    /// Relay configuration file (for the database location and its settings).
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// Database directory (overrides the file).
    #[arg(long)]
    pub data: Option<PathBuf>,
}

impl DatabaseArgs {
    /// The configuration these arguments name.
    pub fn load(self) -> anyhow::Result<Config> {
        load_config(self.config.as_ref(), self.data)
    }
}

/// Reads the config file (if any) and applies command-line overrides.
pub fn load_config(file: Option<&PathBuf>, data: Option<PathBuf>) -> anyhow::Result<Config> {
    let mut config = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Config::from_toml(&text)
                .with_context(|| format!("invalid config {}", path.display()))?
        }
        None => Config::default(),
    };
    if let Some(data) = data {
        config.relay.data = data;
    }
    Ok(config)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.print_config {
        print!("{}", Config::default_toml());
        return Ok(ExitCode::SUCCESS);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NOSTRWIRE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut config = load_config(args.config.as_ref(), args.data)?;
    if let Some(listen) = args.listen {
        config.relay.listen = listen;
    }
    let relay = nostrwire_relay::start(config.clone())?;
    tracing::info!(
        "listening on ws://{} (data: {}, durability: {:?})",
        relay.local_addr(),
        config.relay.data.display(),
        config.storage.durability
    );
    let stop = relay.stop_handle();
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        signals.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            tracing::info!("stopping");
            let _ = stop.send(true);
        });
    });
    relay.wait();
    Ok(ExitCode::SUCCESS)
}
