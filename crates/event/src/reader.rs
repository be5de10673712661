//! A strict, zero-copy JSON reader over validated UTF-8: the lexical layer
//! under the event, filter and message parsers.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::error::{Error, ErrorKind};
use crate::json::{scan_string, JsonStr};
use crate::limits::Limits;

/// Reads JSON tokens from `src`, tracking the byte position for errors.
///
/// UTF-8 is validated lazily: outside strings only ASCII bytes are accepted
/// by the grammar, and each string is validated by [`scan_string`] (for free
/// when it is pure ASCII). So any region the reader has accepted is UTF-8.
pub(crate) struct Reader<'a> {
    src: &'a [u8],
    pos: usize,
    pub(crate) limits: Limits,
    /// Set whenever whitespace is skipped; lets callers prove a region compact.
    pub(crate) saw_ws: bool,
}

impl<'a> Reader<'a> {
    /// A reader over `input` after the size and UTF-8 checks.
    pub(crate) fn new(input: &'a [u8], max_bytes: usize, limits: &Limits) -> Result<Self, Error> {
        // Size is checked before anything else looks at the bytes.
        if input.len() > max_bytes {
            return Err(Error::at(ErrorKind::TooLarge, max_bytes));
        }
        Ok(Reader {
            src: input,
            pos: 0,
            limits: *limits,
            saw_ws: false,
        })
    }

    /// The text of an accepted region `start..end` of the input.
    pub(crate) fn accepted_str(&self, start: usize, end: usize) -> &'a str {
        let bytes = &self.src[start..end];
        debug_assert!(core::str::from_utf8(bytes).is_ok());
        // SAFETY: the caller passes a region the reader accepted; accepted
        // regions are UTF-8 (see the type docs).
        unsafe { core::str::from_utf8_unchecked(bytes) }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Consumes one byte already seen with [`Reader::peek`].
    pub(crate) fn bump(&mut self) {
        self.pos += 1;
    }

    #[inline]
    pub(crate) fn skip_ws(&mut self) {
        let bytes = self.src;
        while let Some(&b) = bytes.get(self.pos) {
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
                self.saw_ws = true;
            } else {
                break;
            }
        }
    }

    /// The next non-whitespace byte, not consumed.
    #[inline]
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.src.get(self.pos).copied()
    }

    pub(crate) fn syntax(&self) -> Error {
        Error::at(ErrorKind::Syntax, self.pos)
    }

    /// Consumes `byte` (after whitespace) or fails with a syntax error.
    #[inline]
    pub(crate) fn expect(&mut self, byte: u8) -> Result<(), Error> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    /// Consumes `byte` if it is next.
    #[inline]
    pub(crate) fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// After an array or object element: `,` (true) or `close` (false).
    #[inline]
    pub(crate) fn comma_or(&mut self, close: u8) -> Result<bool, Error> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(self.syntax()),
        }
    }

    /// The error for a value of the wrong type at the current position.
    pub(crate) fn type_error(&mut self) -> Error {
        match self.peek() {
            Some(b'n') => Error::at(ErrorKind::Null, self.pos),
            Some(b'"' | b'[' | b'{' | b't' | b'f' | b'-' | b'0'..=b'9') => {
                Error::at(ErrorKind::WrongType, self.pos)
            }
            _ => self.syntax(),
        }
    }

    /// Reads a string no longer than `max_len` source bytes.
    #[inline]
    pub(crate) fn string_max(&mut self, max_len: usize) -> Result<JsonStr<'a>, Error> {
        if self.peek() != Some(b'"') {
            return Err(self.type_error());
        }
        let scanned = scan_string(self.src, self.pos, max_len)?;
        self.pos = scanned.end;
        Ok(scanned.value)
    }

    /// Reads a string bounded by the configured string limit.
    #[inline]
    pub(crate) fn string(&mut self) -> Result<JsonStr<'a>, Error> {
        self.string_max(self.limits.max_string_bytes)
    }

    /// Reads a plain non-negative integer: no sign, fraction, exponent or
    /// leading zero. Values above `u64::MAX` report `overflow`.
    pub(crate) fn integer(&mut self, overflow: ErrorKind) -> Result<u64, Error> {
        match self.peek() {
            Some(b'-') => {
                // Say "negative" only for something that is a number.
                let start = self.pos;
                self.pos += 1;
                self.number_tail()?;
                return Err(Error::at(ErrorKind::NegativeNumber, start));
            }
            Some(b'0'..=b'9') => {}
            _ => return Err(self.type_error()),
        }
        let bytes = self.src;
        let start = self.pos;
        let mut value: u64 = 0;
        let mut overflowed = false;
        while let Some(&b) = bytes.get(self.pos) {
            if !b.is_ascii_digit() {
                break;
            }
            match value
                .checked_mul(10)
                .and_then(|v| v.checked_add((b - b'0') as u64))
            {
                Some(v) => value = v,
                None => overflowed = true,
            }
            self.pos += 1;
        }
        let digits = self.pos - start;
        if matches!(bytes.get(self.pos), Some(b'.' | b'e' | b'E'))
            || (digits > 1 && bytes[start] == b'0')
        {
            return Err(Error::at(ErrorKind::InvalidNumber, start));
        }
        if overflowed {
            return Err(Error::at(overflow, start));
        }
        Ok(value)
    }

    /// Validates the rest of a JSON number after an optional minus sign.
    fn number_tail(&mut self) -> Result<(), Error> {
        let bytes = self.src;
        let digits = |pos: &mut usize| {
            let s = *pos;
            while bytes.get(*pos).is_some_and(u8::is_ascii_digit) {
                *pos += 1;
            }
            *pos - s
        };
        let start = self.pos;
        let n = digits(&mut self.pos);
        if n == 0 || (n > 1 && bytes[start] == b'0') {
            return Err(self.syntax());
        }
        if bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if digits(&mut self.pos) == 0 {
                return Err(self.syntax());
            }
        }
        if matches!(bytes.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(bytes.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(&mut self.pos) == 0 {
                return Err(self.syntax());
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Error> {
        if self.src[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    /// Reads `true` or `false`.
    pub(crate) fn boolean(&mut self) -> Result<bool, Error> {
        match self.peek() {
            Some(b't') => self.literal(b"true").map(|_| true),
            Some(b'f') => self.literal(b"false").map(|_| false),
            _ => Err(self.type_error()),
        }
    }

    /// Validates and skips any JSON value (used for unknown fields).
    pub(crate) fn skip_value(&mut self, depth: usize) -> Result<(), Error> {
        if depth > self.limits.max_depth {
            return Err(Error::at(ErrorKind::TooDeep, self.pos));
        }
        match self.peek() {
            Some(b'"') => self.string_max(usize::MAX).map(|_| ()),
            Some(b'{') => {
                self.pos += 1;
                if self.eat(b'}') {
                    return Ok(());
                }
                // Decoded once, and hashed with std's randomly keyed hasher:
                // the duplicate check stays linear whatever the keys are.
                let mut keys: HashSet<Cow<'a, str>> = HashSet::new();
                loop {
                    let key = self.string_max(usize::MAX)?;
                    if !keys.insert(key.value()) {
                        return Err(Error::at(ErrorKind::DuplicateKey, self.pos));
                    }
                    self.expect(b':')?;
                    self.skip_value(depth + 1)?;
                    if !self.comma_or(b'}')? {
                        return Ok(());
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                if self.eat(b']') {
                    return Ok(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    if !self.comma_or(b']')? {
                        return Ok(());
                    }
                }
            }
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-') => {
                self.pos += 1;
                self.number_tail()
            }
            Some(b'0'..=b'9') => self.number_tail(),
            _ => Err(self.syntax()),
        }
    }

    /// Fails unless only whitespace remains.
    pub(crate) fn finish(&mut self) -> Result<(), Error> {
        if self.peek().is_some() {
            Err(Error::at(ErrorKind::TrailingData, self.pos))
        } else {
            Ok(())
        }
    }

    /// Reads an object, calling `field` with each key; `field` must consume the value.
    ///
    /// Detecting duplicate keys is the callback's job, since known fields are
    /// tracked with bit sets; unknown keys are kept in `unknown` for the check.
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, JsonStr<'a>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if self.peek() != Some(b'{') {
            return Err(self.type_error());
        }
        self.pos += 1;
        if self.eat(b'}') {
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.syntax());
            }
            let key = self.string_max(usize::MAX)?;
            self.expect(b':')?;
            field(self, key)?;
            if !self.comma_or(b'}')? {
                return Ok(());
            }
        }
    }
}
