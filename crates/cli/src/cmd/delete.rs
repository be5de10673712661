//! `nostrwire delete`: removes the stored events a NIP-01 filter matches,
//! found as `nostrwire scan` finds them. A dry run unless `--yes`: it
//! prints the events that would go. With `--yes` the removal goes through
//! the database's one writer: this command's own when no relay holds the
//! database (it takes the writer lock, as `import` does), else the running
//! relay's, asked over its NIP-86 endpoint (`docs/operations.md`).

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use nostrwire_store::{
    writer_inbox, Admitted, Committed, StoreError, Verdict, Writer, WriterOptions,
};

use crate::status::Status;

/// Arguments of `nostrwire delete`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub database: super::relay::DatabaseArgs,
    /// The NIP-01 filter (JSON) of the events to remove; its `limit`, if
    /// any, caps how many (the newest).
    #[arg(long)]
    pub filter: String,
    /// Remove them. Without it, nothing changes: the events that would go
    /// are printed as JSON Lines, and their count on standard error.
    #[arg(long)]
    pub yes: bool,
    /// While a relay holds the database: a file holding the hex secret key
    /// of one of its `admin.pubkeys`, to ask the relay's writer for the
    /// removal (NIP-86 `deleteevents`, authorized by NIP-98).
    #[arg(long)]
    pub admin_key: Option<std::path::PathBuf>,
    /// The running relay's HTTP URL (default: `http://` and `relay.listen`).
    #[arg(long)]
    pub relay: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let filter = super::scan::parse_filter(&args.filter)?;
    let config = args.database.load()?;
    if !args.yes {
        let store = super::scan::open_for_reading(super::relay::DatabaseArgs {
            config: None,
            data: Some(config.relay.data.clone()),
        })?;
        super::scan::check_search(&store, &filter)?;
        let found = nostrwire_relay::admin::matching(&store, &filter, nostrwire_relay::now())?;
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        super::scan::write_events(&store, &found, &mut out)?;
        out.flush()?;
        eprintln!(
            "{} events would be removed (dry run; --yes removes them)",
            found.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let store = match nostrwire_relay::open_store(&config, true) {
        Ok(store) => store,
        Err(e) if is_busy(&e) => {
            let Some(key) = &args.admin_key else {
                anyhow::bail!(
                    "{e:#}: a running relay holds the database; give --admin-key to remove the \
                     events through its writer (NIP-86, docs/operations.md)"
                )
            };
            let url = args
                .relay
                .clone()
                .unwrap_or_else(|| format!("http://{}/", config.relay.listen));
            return through_relay(&url, key, &filter);
        }
        Err(e) => return Err(e),
    };
    super::scan::check_search(&store, &filter)?;
    let found = nostrwire_relay::admin::matching(&store, &filter, nostrwire_relay::now())?;
    let ids: Vec<_> = found.iter().map(|f| f.id).collect();
    let store: std::sync::Arc<dyn nostrwire_store::EventStore> = std::sync::Arc::new(store);
    let (to_writer, inbox) = writer_inbox::<()>(1);
    let options = WriterOptions {
        max_batch: 1,
        linger: std::time::Duration::ZERO,
    };
    let writer = Writer::spawn(store.clone(), options, inbox, None, NoEvents)?;
    let mut status = Status::stderr();
    let removed = nostrwire_relay::admin::remove(&to_writer, &ids, &mut |n| {
        status.update("removing", &format!("removed {n} of {} events", ids.len()));
    });
    let _ = to_writer.send(nostrwire_store::Write::Shutdown);
    writer.join();
    let removed = removed?;
    // The indexes that trail the removals are brought up to date (the
    // search index first, as `import` does).
    while store.index_search(10_000, 0)? {}
    while store.index_pending(10_000)? {}
    store.sync()?;
    status.done(&format!(
        "removed {removed} events ({} matched the filter)",
        ids.len()
    ));
    Ok(ExitCode::SUCCESS)
}

/// Asks the relay at `url` to remove what `filter` matches (NIP-86
/// `deleteevents`), signed with the admin key in `key_file`.
fn through_relay(
    url: &str,
    key_file: &std::path::Path,
    filter: &nostrwire_event::Filter,
) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    use std::io::Read;
    let hex = std::fs::read_to_string(key_file)
        .with_context(|| format!("cannot read {}", key_file.display()))?;
    let secret = nostrwire_event::hex::decode_array::<32>(hex.trim().as_bytes())
        .ok()
        .and_then(nostrwire_event::Keys::from_secret_bytes)
        .with_context(|| format!("{} does not hold a hex secret key", key_file.display()))?;
    let (host, path) = url
        .strip_prefix("http://")
        .map(|rest| rest.split_at(rest.find('/').unwrap_or(rest.len())))
        .context("--relay: give the relay's plain http:// URL (its listen address)")?;
    let path = if path.is_empty() { "/" } else { path };
    let body = format!(
        r#"{{"method":"deleteevents","params":[{}]}}"#,
        filter.to_json()
    );
    let authorization = nostrwire_relay::admin::nip98::authorization(
        &secret,
        &format!("http://{host}{path}"),
        "POST",
        body.as_bytes(),
        nostrwire_relay::now(),
    );
    let mut stream = std::net::TcpStream::connect(host)
        .with_context(|| format!("cannot reach the relay at {host}"))?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {}\r\n\
         Authorization: {authorization}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        nostrwire_relay::admin::nip86::CONTENT_TYPE,
        body.len()
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let (head, answer) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    let answer: serde_json::Value = serde_json::from_str(answer)
        .with_context(|| format!("the relay answered {}", head.lines().next().unwrap_or("")))?;
    if let Some(error) = answer.get("error").and_then(|e| e.as_str()) {
        anyhow::bail!("the relay refused: {error}");
    }
    let result = &answer["result"];
    eprintln!(
        "removed {} events through the relay ({} matched the filter)",
        result["removed"], result["matched"]
    );
    Ok(ExitCode::SUCCESS)
}

/// Whether opening failed because another process holds the writer lock.
pub(crate) fn is_busy(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| matches!(c.downcast_ref::<StoreError>(), Some(StoreError::Busy(_))))
}

/// The command's writer stores no events: it only runs the removals.
struct NoEvents;

impl Committed<()> for NoEvents {
    fn committed(&mut self, _batch: Vec<(Admitted, (), Verdict)>) {}

    fn failed(&mut self, _batch: Vec<(Admitted, ())>, _error: &StoreError) {}
}
