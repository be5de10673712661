//! Compressed records: zstd with trained dictionaries, chosen per kind and
//! named by id in the record header
//! ([spec §11](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#11-compressed-records)).
//!
//! Dictionaries are prepared once ([`DictSet`] holds zstd's CDict and DDict);
//! compressing or decompressing a record never loads a dictionary.

use std::collections::HashMap;
use std::fmt;
use std::io;

use nostrwire_event::Kind;
use zstd::dict::{DecoderDictionary, EncoderDictionary};
use zstd::zstd_safe::{CParameter, DParameter, FrameFormat};

use crate::error::{Error, Result};
use crate::layout::{COMPRESSED_V1, EVENT_V1};
use crate::limits::Limits;
use crate::varint;

/// Magic bytes of a dictionary set file.
pub const DICT_SET_MAGIC: &[u8; 4] = b"NWBD";
/// Version of the dictionary set file format.
pub const DICT_SET_VERSION: u8 = 1;
/// Largest dictionary a set file may hold.
pub const MAX_DICT_BYTES: usize = 1 << 24;

/// One trained dictionary.
pub struct Dictionary {
    id: u32,
    kind: Option<Kind>,
    raw: Vec<u8>,
    encoder: EncoderDictionary<'static>,
    decoder: DecoderDictionary<'static>,
}

impl fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dictionary")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("bytes", &self.raw.len())
            .finish()
    }
}

impl Dictionary {
    /// The id stored in compressed records (never 0).
    pub fn id(&self) -> u32 {
        self.id
    }
    /// The kind it serves, or `None` for the fallback dictionary.
    pub fn kind(&self) -> Option<Kind> {
        self.kind
    }
    /// The zstd dictionary bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.raw
    }
}

/// A set of dictionaries: at most one per kind plus an optional fallback.
#[derive(Debug)]
pub struct DictSet {
    level: i32,
    dicts: Vec<Dictionary>,
    by_id: HashMap<u32, usize>,
    by_kind: HashMap<u16, usize>,
    fallback: Option<usize>,
}

/// How [`DictSet::train`] builds dictionaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainOptions {
    /// Train one dictionary per kind (for kinds with enough samples) besides the fallback.
    pub per_kind: bool,
    /// Largest dictionary, in bytes.
    pub max_dict_bytes: usize,
    /// Fewest samples a kind needs to get its own dictionary.
    pub min_kind_samples: usize,
    /// zstd compression level.
    pub level: i32,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            per_kind: true,
            max_dict_bytes: 64 * 1024,
            min_kind_samples: 16,
            level: 19,
        }
    }
}

impl DictSet {
    /// Builds a set from `(id, kind, dictionary bytes)`; ids must be unique and
    /// non-zero, kinds unique, at most one fallback (`None`).
    ///
    /// Spec: [§11.1](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#111-dictionaries).
    pub fn new(level: i32, entries: Vec<(u32, Option<Kind>, Vec<u8>)>) -> Result<DictSet> {
        let mut set = DictSet {
            level,
            dicts: Vec::with_capacity(entries.len()),
            by_id: HashMap::new(),
            by_kind: HashMap::new(),
            fallback: None,
        };
        for (id, kind, raw) in entries {
            let index = set.dicts.len();
            if id == 0 || set.by_id.insert(id, index).is_some() || raw.len() > MAX_DICT_BYTES {
                return Err(Error::BadDictionarySet);
            }
            let duplicate = match kind {
                Some(k) => set.by_kind.insert(k.as_u16(), index).is_some(),
                None => set.fallback.replace(index).is_some(),
            };
            if duplicate {
                return Err(Error::BadDictionarySet);
            }
            // zstd refuses a dictionary with malformed entropy tables by
            // returning no dictionary, which `EncoderDictionary::copy` and
            // `DecoderDictionary::copy` would turn into a panic: tried first.
            if zstd::zstd_safe::CDict::try_create(&raw, level).is_none()
                || zstd::zstd_safe::DDict::try_create(&raw).is_none()
            {
                return Err(Error::BadDictionarySet);
            }
            set.dicts.push(Dictionary {
                id,
                kind,
                encoder: EncoderDictionary::copy(&raw, level),
                decoder: DecoderDictionary::copy(&raw),
                raw,
            });
        }
        Ok(set)
    }

    /// Trains a fallback dictionary on all samples and, with
    /// [`TrainOptions::per_kind`], one per kind with enough samples. Kinds
    /// whose training fails (too little data) use the fallback.
    ///
    /// Spec: [§11.1](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#111-dictionaries).
    pub fn train(samples: &[(Kind, &[u8])], options: &TrainOptions) -> io::Result<DictSet> {
        // The fallback (kind `None`, on every sample) and, per kind with
        // enough samples, its own: independent trainings, spread over the
        // cores. Ids follow this order, whatever finishes first.
        let mut jobs: Vec<(Option<u16>, Vec<&[u8]>)> =
            vec![(None, samples.iter().map(|(_, s)| *s).collect())];
        if options.per_kind {
            let mut kinds: Vec<u16> = samples.iter().map(|(k, _)| k.as_u16()).collect();
            kinds.sort_unstable();
            kinds.dedup();
            for kind in kinds {
                let of_kind: Vec<&[u8]> = samples
                    .iter()
                    .filter(|(k, _)| k.as_u16() == kind)
                    .map(|(_, s)| *s)
                    .collect();
                if of_kind.len() >= options.min_kind_samples {
                    jobs.push((Some(kind), of_kind));
                }
            }
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(jobs.len());
        let mut trained: Vec<Option<io::Result<Vec<u8>>>> = (0..jobs.len()).map(|_| None).collect();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let jobs = &jobs;
                    scope.spawn(move || {
                        (t..jobs.len())
                            .step_by(threads)
                            .map(|i| (i, train_dictionary(&jobs[i].1, options.max_dict_bytes)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for worker in workers {
                for (i, result) in worker.join().expect("dictionary training panicked") {
                    trained[i] = Some(result);
                }
            }
        });
        let mut entries = Vec::with_capacity(jobs.len());
        for ((kind, _), result) in jobs.iter().zip(trained) {
            match (kind, result.expect("every job trained")) {
                // Without a fallback there is no set.
                (None, result) => entries.push((1, None, result?)),
                // A kind whose training fails (too little data) uses the
                // fallback.
                (Some(kind), Ok(dict)) => {
                    let id = entries.len() as u32 + 1;
                    entries.push((id, Some(Kind(*kind)), dict));
                }
                (Some(_), Err(_)) => {}
            }
        }
        DictSet::new(options.level, entries)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The compression level.
    pub fn level(&self) -> i32 {
        self.level
    }

    /// The dictionaries, in id order of creation.
    pub fn dictionaries(&self) -> &[Dictionary] {
        &self.dicts
    }

    /// The dictionary used for `kind`: its own, else the fallback.
    pub fn for_kind(&self, kind: Kind) -> Option<&Dictionary> {
        self.by_kind
            .get(&kind.as_u16())
            .or(self.fallback.as_ref())
            .map(|&i| &self.dicts[i])
    }

    /// The dictionary with this id.
    pub fn by_id(&self, id: u32) -> Option<&Dictionary> {
        self.by_id.get(&id).map(|&i| &self.dicts[i])
    }

    /// Serializes the set.
    ///
    /// Spec: [§11.2](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#112-dictionary-set-files).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(DICT_SET_MAGIC);
        out.push(DICT_SET_VERSION);
        out.push(self.level as i8 as u8);
        varint::push(&mut out, self.dicts.len() as u64);
        for d in &self.dicts {
            varint::push(&mut out, d.id as u64);
            varint::push(&mut out, d.kind.map_or(0, |k| k.as_u16() as u64 + 1));
            varint::push(&mut out, d.raw.len() as u64);
            out.extend_from_slice(&d.raw);
        }
        out
    }

    /// Parses a set file.
    ///
    /// Spec: [§11.2](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#112-dictionary-set-files).
    pub fn from_bytes(bytes: &[u8]) -> Result<DictSet> {
        let (level, entries) = parse_set(bytes)?;
        DictSet::new(level, entries)
    }

    /// Parses a set file but compresses at `level` instead of the level the
    /// file names (a relay's configured level; records decode the same at
    /// any level, since the level only steers the compressor's search).
    ///
    /// Spec: [§11.2](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#112-dictionary-set-files).
    pub fn from_bytes_at_level(bytes: &[u8], level: i32) -> Result<DictSet> {
        let (_, entries) = parse_set(bytes)?;
        DictSet::new(level, entries)
    }
}

/// Highest level a dictionary set file may name.
pub const MAX_SET_LEVEL: i32 = 19;

/// A dictionary set file's level and entries.
#[allow(clippy::type_complexity)]
fn parse_set(bytes: &[u8]) -> Result<(i32, Vec<(u32, Option<Kind>, Vec<u8>)>)> {
    let bad = |_| Error::BadDictionarySet;
    if bytes.len() < 6 || &bytes[..4] != DICT_SET_MAGIC || bytes[4] != DICT_SET_VERSION {
        return Err(Error::BadDictionarySet);
    }
    let level = bytes[5] as i8 as i32;
    // zstd's ultra levels (20-22) and past them prepare dictionaries of
    // hundreds of megabytes each: a set file never names them.
    if !(1..=MAX_SET_LEVEL).contains(&level) {
        return Err(Error::BadDictionarySet);
    }
    let mut pos = 6;
    let count = varint::read(bytes, &mut pos).map_err(bad)?;
    // Each entry takes at least three bytes.
    if count > (bytes.len() - pos) as u64 / 3 {
        return Err(Error::BadDictionarySet);
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let id = varint::read(bytes, &mut pos).map_err(bad)?;
        let selector = varint::read(bytes, &mut pos).map_err(bad)?;
        let len = varint::read(bytes, &mut pos).map_err(bad)?;
        if id == 0 || id > u32::MAX as u64 || selector > 65_536 || len > (bytes.len() - pos) as u64
        {
            return Err(Error::BadDictionarySet);
        }
        let kind = (selector > 0).then(|| Kind((selector - 1) as u16));
        entries.push((id as u32, kind, bytes[pos..pos + len as usize].to_vec()));
        pos += len as usize;
    }
    if pos != bytes.len() {
        return Err(Error::BadDictionarySet);
    }
    Ok((level, entries))
}

/// Most sample bytes one dictionary is trained on, per byte of dictionary.
/// zstd's guidance is about a hundred; training time grows with the
/// samples, and past that the dictionaries hardly improve.
const SAMPLE_BYTES_PER_DICT_BYTE: usize = 100;

/// FastCover segment size (`k`) and d-mer size (`d`). zstd's default trainer
/// tries several `k` and keeps the one whose dictionary compresses a held-back
/// quarter of the samples best, which trains about five dictionaries for one.
/// A fixed `k` of 200 took a quarter of the time on 30,000 generated events
/// for records 0.3% larger, and on the bundled real events (trained on one
/// half, measured on the other) gave records 1.2% smaller: with few samples
/// the search picks a `k` that fits the held-back quarter, not the rest.
const FASTCOVER_K: u32 = 200;
const FASTCOVER_D: u32 = 8;
/// log2 of FastCover's frequency table (6 × 2^f bytes of memory).
const FASTCOVER_F: u32 = 20;

/// Trains one zstd dictionary of at most `max_dict_bytes` on `samples`, the
/// way [`DictSet::train`] trains each of its dictionaries: for comparisons
/// that must train other data the same way.
pub fn train_dictionary(samples: &[&[u8]], max_dict_bytes: usize) -> io::Result<Vec<u8>> {
    use zstd::zstd_safe::zstd_sys;

    let total: usize = samples.iter().map(|s| s.len()).sum();
    // Evenly spaced samples when there are more than needed: the newest
    // and the oldest alike.
    let budget = max_dict_bytes.saturating_mul(SAMPLE_BYTES_PER_DICT_BYTE);
    let stride = total.div_ceil(budget.max(1)).max(1);
    let picked: Vec<&[u8]> = samples.iter().step_by(stride).copied().collect();
    let total: usize = picked.iter().map(|s| s.len()).sum();
    // A dictionary much larger than its training data only stores noise.
    let size = max_dict_bytes.min(total / 2).max(1024);

    let mut flat = Vec::with_capacity(total);
    let mut sizes = Vec::with_capacity(picked.len());
    for sample in &picked {
        flat.extend_from_slice(sample);
        sizes.push(sample.len());
    }
    let count = u32::try_from(sizes.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many samples"))?;
    // Zero means "default" for every other field (no shrinking, level 3 for
    // the entropy tables, dictionary id from the content's hash).
    let params = zstd_sys::ZDICT_fastCover_params_t {
        k: FASTCOVER_K,
        d: FASTCOVER_D,
        f: FASTCOVER_F,
        steps: 0,
        nbThreads: 0,
        splitPoint: 0.0,
        accel: 1,
        shrinkDict: 0,
        shrinkDictMaxRegression: 0,
        zParams: zstd_sys::ZDICT_params_t {
            compressionLevel: 0,
            notificationLevel: 0,
            dictID: 0,
        },
    };
    let mut dict = vec![0u8; size];
    // SAFETY: `dict` is writable for `size` bytes; `flat` holds exactly the
    // sum of `sizes` bytes, and `sizes` has `count` entries. zstd reads and
    // writes only within those bounds and keeps no pointer after returning.
    let written = unsafe {
        zstd_sys::ZDICT_trainFromBuffer_fastCover(
            dict.as_mut_ptr().cast(),
            dict.len(),
            flat.as_ptr().cast(),
            sizes.as_ptr(),
            count,
            params,
        )
    };
    // SAFETY: ZDICT_isError only inspects the value.
    if unsafe { zstd_sys::ZDICT_isError(written) } != 0 {
        return Err(io::Error::other("dictionary training failed"));
    }
    dict.truncate(written);
    Ok(dict)
}

fn io_to_wire(_: io::Error) -> Error {
    Error::Decompress
}

/// Compresses event records into their stored form.
pub struct RecordCompressor<'d> {
    set: &'d DictSet,
    with_dict: zstd::bulk::Compressor<'d>,
    plain: zstd::bulk::Compressor<'static>,
}

impl fmt::Debug for RecordCompressor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordCompressor")
            .field("set", &self.set)
            .finish()
    }
}

/// Frame parameters shared by every compressed record: no magic, no
/// checksum, no dictionary id and no content size (the record header has them).
fn configure(c: &mut zstd::bulk::Compressor<'_>) -> io::Result<()> {
    c.set_parameter(CParameter::Format(FrameFormat::Magicless))?;
    c.set_parameter(CParameter::ChecksumFlag(false))?;
    c.set_parameter(CParameter::DictIdFlag(false))?;
    c.set_parameter(CParameter::ContentSizeFlag(false))
}

impl<'d> RecordCompressor<'d> {
    /// A compressor for the dictionaries of `set`.
    pub fn new(set: &'d DictSet) -> io::Result<Self> {
        let mut with_dict = zstd::bulk::Compressor::default();
        configure(&mut with_dict)?;
        let mut plain = zstd::bulk::Compressor::new(set.level)?;
        configure(&mut plain)?;
        Ok(RecordCompressor {
            set,
            with_dict,
            plain,
        })
    }

    /// Appends the stored form of an event record to `out`: a compressed
    /// record when that is smaller, else the record itself.
    ///
    /// The caller passes a record from the encoder (or a verified one); its
    /// kind selects the dictionary.
    ///
    /// Spec: [§11](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#11-compressed-records).
    pub fn compress_into(&mut self, record: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let kind = crate::layout::peek_kind(record)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let start = out.len();
        let dict = self.set.for_kind(kind);
        out.push(COMPRESSED_V1);
        varint::push(out, dict.map_or(0, |d| d.id as u64));
        varint::push(out, record.len() as u64);
        let header = out.len();
        // A compressed record only pays if it is smaller than the raw one.
        let budget = record.len().saturating_sub(header - start);
        out.resize(header + zstd::zstd_safe::compress_bound(record.len()), 0);
        let result = match dict {
            Some(d) => self
                .with_dict
                .set_prepared_dictionary(&d.encoder)
                .and_then(|_| {
                    self.with_dict
                        .compress_to_buffer(record, &mut out[header..])
                }),
            None => self.plain.compress_to_buffer(record, &mut out[header..]),
        };
        match result {
            Ok(n) if n < budget => {
                out.truncate(header + n);
            }
            Ok(_) => {
                out.truncate(start);
                out.extend_from_slice(record);
            }
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Turns stored records (raw or compressed) back into event records.
pub struct RecordDecompressor<'d> {
    set: Option<&'d DictSet>,
    context: zstd::bulk::Decompressor<'d>,
    buf: Vec<u8>,
}

impl fmt::Debug for RecordDecompressor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordDecompressor")
            .field("set", &self.set)
            .finish()
    }
}

impl<'d> RecordDecompressor<'d> {
    /// A decompressor; without a set, only records compressed without a
    /// dictionary (id 0) can be read.
    pub fn new(set: Option<&'d DictSet>) -> io::Result<Self> {
        let mut context = zstd::bulk::Decompressor::new()?;
        context.set_parameter(DParameter::Format(FrameFormat::Magicless))?;
        Ok(RecordDecompressor {
            set,
            context,
            buf: Vec::new(),
        })
    }

    /// The event record held by `stored`: `stored` itself for a raw record,
    /// else the decompressed record (in an internal buffer). The announced
    /// size is checked against the limit before allocating. The result still
    /// has to be decoded.
    ///
    /// Spec: [§11](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#11-compressed-records).
    pub fn record<'s>(&'s mut self, stored: &'s [u8], limits: &Limits) -> Result<&'s [u8]> {
        match stored.first() {
            Some(&COMPRESSED_V1) => {}
            _ => return Ok(stored),
        }
        let mut pos = 1;
        let id = varint::read(stored, &mut pos)?;
        let len = varint::read(stored, &mut pos)?;
        if len > limits.max_record_bytes as u64 {
            return Err(Error::RecordTooLarge);
        }
        // §11: the frame has no checksum. libzstd would check one, while other
        // decoders may skip it; refusing the flag (bit 2 of the frame header
        // descriptor) keeps every reader accepting exactly the same bytes.
        if stored
            .get(pos)
            .is_some_and(|descriptor| descriptor & 0x04 != 0)
        {
            return Err(Error::Decompress);
        }
        if id == 0 {
            self.context.set_dictionary(&[]).map_err(io_to_wire)?;
        } else {
            let dict = self
                .set
                .and_then(|s| s.by_id(id.min(u32::MAX as u64) as u32));
            let dict = dict.ok_or(Error::UnknownDictionary)?;
            self.context
                .set_prepared_dictionary(&dict.decoder)
                .map_err(io_to_wire)?;
        }
        self.buf.clear();
        self.buf.reserve_exact(len as usize);
        let n = self
            .context
            .decompress_to_buffer(&stored[pos..], &mut self.buf)
            .map_err(io_to_wire)?;
        if n != len as usize {
            return Err(Error::Decompress);
        }
        // A compressed record holds an event record, never another envelope.
        if self.buf.first() != Some(&EVENT_V1) {
            return Err(Error::BadVersion);
        }
        Ok(&self.buf)
    }
}
