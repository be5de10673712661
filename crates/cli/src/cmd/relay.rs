//! `nostrwire relay`: run the relay until SIGINT/SIGTERM; SIGHUP reloads
//! the configuration file's reloadable settings.

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
    /// Read and check the configuration (the file, with --listen and
    /// --data applied), print what would change from the defaults, and
    /// exit: non-zero when it does not read or check out. Run it before
    /// sending a running relay SIGHUP.
    #[arg(long)]
    pub check_config: bool,
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
    let overrides = Overrides {
        file: args.config,
        listen: args.listen,
        data: args.data,
    };
    if args.check_config {
        let config = overrides.load()?;
        config.validate()?;
        let changed = Config::default().differences(&config);
        println!("configuration ok");
        for name in changed {
            println!("  {name} (not the default)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NOSTRWIRE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = overrides.load()?;
    let relay = nostrwire_relay::start(config.clone())?;
    tracing::info!(
        "listening on ws://{} (data: {}, durability: {:?})",
        relay.local_addr(),
        config.relay.data.display(),
        config.storage.durability
    );
    let stop = relay.stop_handle();
    let reloader = relay.reloader();
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        signals.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            let mut hangup = signal(SignalKind::hangup()).expect("SIGHUP handler");
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => break,
                    _ = term.recv() => break,
                    _ = hangup.recv() => overrides.reload(&reloader),
                }
            }
            tracing::info!("stopping");
            stop.stop();
        });
    });
    relay.wait();
    Ok(ExitCode::SUCCESS)
}

/// The configuration file and the flags that override it.
struct Overrides {
    file: Option<PathBuf>,
    listen: Option<String>,
    data: Option<PathBuf>,
}

impl Overrides {
    fn load(&self) -> anyhow::Result<Config> {
        let mut config = load_config(self.file.as_ref(), self.data.clone())?;
        if let Some(listen) = &self.listen {
            config.relay.listen = listen.clone();
        }
        Ok(config)
    }

    /// SIGHUP: reads the file again and applies its reloadable settings;
    /// a file that does not read or check out changes nothing.
    fn reload(&self, reloader: &nostrwire_relay::Reloader) {
        let Some(file) = &self.file else {
            tracing::warn!("SIGHUP: the relay was started without --config; nothing to reload");
            return;
        };
        match self.load().and_then(|config| reloader.reload(&config)) {
            Ok(need_restart) => {
                tracing::info!("configuration reloaded from {}", file.display());
                if !need_restart.is_empty() {
                    tracing::warn!(
                        "changed settings that take a restart, kept as they were: {}",
                        need_restart.join(", ")
                    );
                }
            }
            Err(e) => tracing::error!("configuration not reloaded, nothing changed: {e:#}"),
        }
    }
}
