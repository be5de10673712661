//! `nostrwire._nostrwire`: the native half of the `nostrwire` Python package.
//!
//! A thin layer over the workspace's crates (no second codec): stage 3–4
//! (`nostrwire-event`: strict JSON, ids, BIP-340) and stage 2–3
//! (`nostrwire-wire`: nwb records, stream framing, `nostrwire.v1` frames).
//! Work that takes longer than a Python call (signatures, batches, file
//! scans) runs with the GIL released, on as many threads as the caller
//! allows ([`par`]). The pure-Python modules in `python/nostrwire/` hold
//! the asyncio relay client and the argument conveniences.

mod errors;
mod event;
mod input;
mod nwb;
mod par;
mod relay;
mod scan;

use pyo3::prelude::*;

#[pymodule]
fn _nostrwire(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    event::register(m)?;
    nwb::register(m)?;
    scan::register(m)?;
    relay::register(m)?;
    Ok(())
}
