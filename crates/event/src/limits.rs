//! Configurable parser limits, checked before any allocation they bound.

/// Limits applied while parsing events, filters and messages.
///
/// The defaults admit every event seen in real traffic with headroom: follow
/// lists of 450 KB with 6,165 tags, 350 KB contents and 41 KB tag values exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted event JSON, in bytes (checked before parsing).
    pub max_event_bytes: usize,
    /// Largest accepted client or relay message, in bytes (checked before parsing).
    pub max_message_bytes: usize,
    /// Largest single string (content, tag element) in source bytes.
    pub max_string_bytes: usize,
    /// Most tags in one event.
    pub max_tags: usize,
    /// Most elements in one tag, name included.
    pub max_tag_elements: usize,
    /// Deepest nesting inside ignored unknown fields.
    pub max_depth: usize,
    /// Most filters in one REQ or COUNT.
    pub max_filters: usize,
    /// Most values in one filter list (`ids`, `authors`, `kinds`, `#x`).
    pub max_filter_values: usize,
}

impl Limits {
    /// The defaults (see the type docs).
    pub const DEFAULT: Limits = Limits {
        max_event_bytes: 1 << 20,
        max_message_bytes: (1 << 20) + 4096,
        max_string_bytes: 1 << 20,
        max_tags: 20_000,
        max_tag_elements: 1_000,
        max_depth: 32,
        max_filters: 32,
        max_filter_values: 5_000,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}
