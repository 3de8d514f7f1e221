//! Server-sent events as an upstream's answer arrives: [`Decoder`] takes the body's bytes in
//! whatever pieces the network delivers and gives back whole events.
//!
//! What the WHATWG rules say and providers use: lines end with `\n`, `\r\n` or `\r`; an empty
//! line ends an event; `event:` names it, each `data:` line adds a line to its data, a line
//! starting with `:` is a comment (keep-alives), other fields (`id:`, `retry:`) are ignored; one
//! space after the colon is dropped. An event with no data is not dispatched.

/// One event: its name (`message` when the stream gave none) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, or `message`.
    pub name: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Splits a byte stream into [`Event`]s.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Bytes of a line not yet ended.
    line: Vec<u8>,
    /// A `\r` ended the last line: a `\n` right after it belongs to it.
    after_cr: bool,
    name: Option<String>,
    data: Option<String>,
}

impl Decoder {
    /// Reads `bytes`; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        for &byte in bytes {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_ended(&String::from_utf8_lossy(&line)) {
                        events.push(event);
                    }
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    /// The event the stream's end completes, when its last line ended without an empty one.
    pub fn finish(&mut self) -> Option<Event> {
        let line = std::mem::take(&mut self.line);
        let mut last = None;
        if !line.is_empty() {
            last = self.line_ended(&String::from_utf8_lossy(&line));
        }
        last.or_else(|| self.line_ended(""))
    }

    fn line_ended(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            let data = self.data.take()?;
            let name = self.name.take().unwrap_or_else(|| "message".to_owned());
            return Some(Event { name, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.name = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STREAM: &str = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive\r\n\r\nevent: ping\r\ndata: {}\r\n\r\ndata: line one\ndata:line two\nid: 7\n\n";

    fn whole() -> Vec<Event> {
        let event = |name: &str, data: &str| Event { name: name.into(), data: data.into() };
        vec![event("message_start", "{\"a\":1}"), event("ping", "{}"), event("message", "line one\nline two")]
    }

    #[test]
    fn reads_names_data_lines_comments_and_every_line_ending() {
        let mut decoder = Decoder::default();
        assert_eq!(decoder.push(STREAM.as_bytes()), whole());
        assert_eq!(decoder.finish(), None);
    }

    #[test]
    fn a_last_event_without_its_empty_line_ends_with_the_stream() {
        let mut decoder = Decoder::default();
        assert_eq!(decoder.push(b"data: [DONE]"), vec![]);
        assert_eq!(decoder.finish(), Some(Event { name: "message".into(), data: "[DONE]".into() }));
    }

    proptest! {
        #[test]
        fn pieces_of_any_size_give_the_same_events(cuts in proptest::collection::vec(0..STREAM.len(), 0..12)) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            let bytes = STREAM.as_bytes();
            let mut decoder = Decoder::default();
            let mut events = Vec::new();
            let mut start = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                events.extend(decoder.push(&bytes[start..cut]));
                start = cut;
            }
            events.extend(decoder.finish());
            prop_assert_eq!(events, whole());
        }
    }
}
