//! Compressed sizes: framed streams, per-event zstd, and per-event zstd with
//! dictionaries trained on the training split only.
//!
//! Every per-event frame uses the same zstd settings for every format:
//! magicless, no checksum, no dictionary id, no content size (a container
//! carries those out of band, as nwb's compressed records do).

use std::io::Write;
use std::time::Instant;

use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};
use zstd::zstd_safe::{CParameter, DParameter, FrameFormat};

/// A zstd level.
pub type Level = i32;

fn lean(c: &mut Compressor<'_>) -> std::io::Result<()> {
    c.set_parameter(CParameter::Format(FrameFormat::Magicless))?;
    c.set_parameter(CParameter::ChecksumFlag(false))?;
    c.set_parameter(CParameter::DictIdFlag(false))?;
    c.set_parameter(CParameter::ContentSizeFlag(false))
}

/// Records behind 4-byte big-endian lengths, concatenated (binostr's stream).
#[allow(clippy::big_endian_bytes)] // binostr's framing is big-endian; kept for comparability.
pub fn framed(records: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        out.extend_from_slice(&(r.len() as u32).to_be_bytes());
        out.extend_from_slice(r);
    }
    out
}

/// zstd size of a whole stream (standard frame).
pub fn zstd_stream(stream: &[u8], level: Level) -> anyhow::Result<usize> {
    Ok(zstd::bulk::compress(stream, level)?.len())
}

/// gzip size of a whole stream (level 6, as binostr).
pub fn gzip_stream(stream: &[u8]) -> anyhow::Result<usize> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    enc.write_all(stream)?;
    Ok(enc.finish()?.len())
}

/// A trained dictionary, prepared once for compression and decompression.
pub struct Dict {
    /// The dictionary bytes.
    pub raw: Vec<u8>,
    /// Time to prepare the compression side (CDict), µs.
    pub encoder_load_us: f64,
    /// Time to prepare the decompression side (DDict), µs.
    pub decoder_load_us: f64,
    encoder: EncoderDictionary<'static>,
    decoder: DecoderDictionary<'static>,
}

impl std::fmt::Debug for Dict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dict")
            .field("bytes", &self.raw.len())
            .finish()
    }
}

impl std::fmt::Debug for PerEvent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PerEvent")
    }
}

impl Dict {
    /// Trains a dictionary of at most `max_bytes` on `samples`.
    pub fn train(samples: &[&[u8]], max_bytes: usize, level: Level) -> anyhow::Result<Dict> {
        let raw = zstd::dict::from_samples(samples, max_bytes)?;
        let start = Instant::now();
        let encoder = EncoderDictionary::copy(&raw, level);
        let encoder_load_us = start.elapsed().as_nanos() as f64 / 1e3;
        let start = Instant::now();
        let decoder = DecoderDictionary::copy(&raw);
        let decoder_load_us = start.elapsed().as_nanos() as f64 / 1e3;
        Ok(Dict {
            raw,
            encoder_load_us,
            decoder_load_us,
            encoder,
            decoder,
        })
    }
}

/// Compresses records one by one (with a prepared dictionary, or none) and
/// checks that each decompresses back; returns the compressed sizes.
pub struct PerEvent<'d> {
    c: Compressor<'d>,
    d: Decompressor<'d>,
}

impl<'d> PerEvent<'d> {
    /// A compressor at `level`, with `dict` if given.
    pub fn new(dict: Option<&'d Dict>, level: Level) -> anyhow::Result<Self> {
        let (mut c, mut d) = match dict {
            Some(dict) => (
                Compressor::with_prepared_dictionary(&dict.encoder)?,
                Decompressor::with_prepared_dictionary(&dict.decoder)?,
            ),
            None => (Compressor::new(level)?, Decompressor::new()?),
        };
        lean(&mut c)?;
        d.set_parameter(DParameter::Format(FrameFormat::Magicless))?;
        Ok(PerEvent { c, d })
    }

    /// Compressed size of one record (verified by decompressing it).
    pub fn size(&mut self, record: &[u8]) -> anyhow::Result<usize> {
        let packed = self.c.compress(record)?;
        let back = self.d.decompress(&packed, record.len())?;
        anyhow::ensure!(back == record, "zstd round trip differs");
        Ok(packed.len())
    }
}
