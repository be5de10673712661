//! Stream framing: each record preceded by its length as a minimal varint
//! ([spec §10](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#10-stream-framing)).

use std::fmt;
use std::io::{self, BufRead, Read, Write};

use crate::error::Error;
use crate::varint;

/// Appends one frame (length, then the record) to `out`.
///
/// Spec: [§10](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#10-stream-framing).
pub fn push_frame(out: &mut Vec<u8>, record: &[u8]) {
    varint::push(out, record.len() as u64);
    out.extend_from_slice(record);
}

/// Writes one frame to `w`.
///
/// Spec: [§10](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#10-stream-framing).
pub fn write_frame<W: Write + ?Sized>(w: &mut W, record: &[u8]) -> io::Result<()> {
    let mut len = [0u8; varint::MAX_LEN];
    let n = varint::write(&mut len, record.len() as u64);
    w.write_all(&len[..n])?;
    w.write_all(record)
}

/// Splits the first frame off `input`: `(record, rest)`. The length is
/// checked against `max_record_bytes` before it is used.
///
/// Spec: [§10](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#10-stream-framing).
pub fn split_frame(input: &[u8], max_record_bytes: usize) -> Result<(&[u8], &[u8]), Error> {
    let mut pos = 0;
    let len = varint::read(input, &mut pos)?;
    if len > max_record_bytes as u64 {
        return Err(Error::RecordTooLarge);
    }
    let end = pos + len as usize;
    if end > input.len() {
        return Err(Error::Truncated);
    }
    Ok((&input[pos..end], &input[end..]))
}

/// Why reading a frame from a stream failed.
#[derive(Debug)]
pub enum ReadError {
    /// The underlying reader failed.
    Io(io::Error),
    /// The stream is malformed (the rest of it cannot be framed).
    Wire(Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "read error: {e}"),
            ReadError::Wire(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads frames from a stream into one reused buffer, never allocating more
/// than the record limit.
#[derive(Debug)]
pub struct FrameReader<R> {
    reader: R,
    buf: Vec<u8>,
    max_record_bytes: usize,
}

impl<R: BufRead> FrameReader<R> {
    /// A frame reader over `reader`.
    pub fn new(reader: R, max_record_bytes: usize) -> Self {
        FrameReader {
            reader,
            buf: Vec::new(),
            max_record_bytes,
        }
    }

    /// The next record, or `None` at a clean end of the stream.
    ///
    /// Spec: [§10](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#10-stream-framing).
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, ReadError> {
        let mut len_bytes = [0u8; varint::MAX_LEN];
        let mut n = 0;
        loop {
            let mut byte = [0u8; 1];
            match self.reader.read(&mut byte) {
                Ok(0) if n == 0 => return Ok(None),
                Ok(0) => return Err(ReadError::Wire(Error::Truncated)),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::Io(e)),
            }
            len_bytes[n] = byte[0];
            n += 1;
            if byte[0] < 0x80 || n == varint::MAX_LEN {
                break;
            }
        }
        let len = varint::read(&len_bytes[..n], &mut 0).map_err(ReadError::Wire)?;
        if len > self.max_record_bytes as u64 {
            return Err(ReadError::Wire(Error::RecordTooLarge));
        }
        // Grow with the data actually read: a short stream claiming a large
        // record costs what it holds, not what it claims.
        self.buf.clear();
        let read = (&mut self.reader)
            .take(len)
            .read_to_end(&mut self.buf)
            .map_err(ReadError::Io)?;
        if read as u64 != len {
            return Err(ReadError::Wire(Error::Truncated));
        }
        Ok(Some(&self.buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_reject_bad_lengths() {
        let mut stream = Vec::new();
        let records: [&[u8]; 3] = [b"", b"abc", &[7u8; 300]];
        for r in records {
            push_frame(&mut stream, r);
        }
        let mut reader = FrameReader::new(&stream[..], 1000);
        for r in records {
            assert_eq!(reader.next_frame().unwrap(), Some(r));
        }
        assert!(reader.next_frame().unwrap().is_none());

        let mut rest = &stream[..];
        for r in records {
            let (got, tail) = split_frame(rest, 1000).unwrap();
            assert_eq!(got, r);
            rest = tail;
        }
        assert_eq!(
            split_frame(&stream[..stream.len() - 1][5..], 1000).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            split_frame(&stream[5..], 100).unwrap_err(),
            Error::RecordTooLarge
        );
        assert_eq!(
            split_frame(&[0x80, 0x00], 100).unwrap_err(),
            Error::OverlongVarint
        );
        let mut cut = FrameReader::new(&stream[..stream.len() - 1], 1000);
        cut.next_frame().unwrap();
        cut.next_frame().unwrap();
        assert!(matches!(
            cut.next_frame(),
            Err(ReadError::Wire(Error::Truncated))
        ));
    }
}
