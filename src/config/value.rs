//! A property's value and the parsers the property table uses.

use std::time::Duration;

use crate::protocol::record_batch::Compression;

/// A property's value, trimmed, with the parsers the property table's
/// setters use. Each error is the reason alone; `ProducerConfig::set`
/// names the property and the value.
pub(super) struct Value<'a>(pub(super) &'a str);

impl Value<'_> {
    pub(super) fn text(&self) -> String {
        self.0.to_string()
    }

    pub(super) fn int(&self, min: u64, max: u64) -> Result<u64, String> {
        let n: u64 = self
            .0
            .parse()
            .map_err(|_| "expected a non-negative integer".to_string())?;
        if n < min || n > max {
            return Err(format!("must be between {min} and {max}"));
        }
        Ok(n)
    }

    /// Milliseconds, at least `min`, at most `i32::MAX` (Java's int).
    pub(super) fn ms(&self, min: u64) -> Result<Duration, String> {
        self.int(min, i32::MAX as u64).map(Duration::from_millis)
    }

    pub(super) fn boolean(&self) -> Result<bool, String> {
        parse_bool(self.0).ok_or_else(|| "expected true or false".to_string())
    }

    /// A compression level: -1 (the codec's default; not for zstd, whose
    /// levels include negative ones) or within the codec's range.
    pub(super) fn level(&self, codec: Compression) -> Result<Option<i32>, String> {
        let range = codec.levels().expect("a codec with levels");
        let n: i32 = self
            .0
            .parse()
            .map_err(|_| "expected an integer".to_string())?;
        match n {
            -1 if codec != Compression::Zstd => Ok(None),
            n if range.contains(&n) => Ok(Some(n)),
            _ if codec == Compression::Zstd => Err(format!(
                "must be between {} and {}",
                range.start(),
                range.end()
            )),
            _ => Err(format!(
                "must be between {} and {}, or -1 (the codec's default)",
                range.start(),
                range.end()
            )),
        }
    }

    /// `host:port[,host:port...]`.
    pub(super) fn servers(&self) -> Result<Vec<String>, String> {
        let servers: Vec<String> = self
            .0
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if servers.is_empty() {
            return Err("expected host:port[,host:port...]".to_string());
        }
        for s in &servers {
            let ok = s
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                return Err(format!("{s:?} is not host:port"));
            }
        }
        Ok(servers)
    }

    /// One of `choices` (`(spelling, value)`, matched without case), or
    /// `expected`.
    pub(super) fn one_of<T: Copy>(
        &self,
        choices: &[(&str, T)],
        expected: &str,
    ) -> Result<T, String> {
        choices
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(self.0))
            .map(|(_, v)| *v)
            .ok_or_else(|| expected.to_string())
    }
}

/// `true`/`false` as Java spells them, and librdkafka's other spellings.
pub(super) fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "t" | "1" | "yes" | "on" => Some(true),
        "false" | "f" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}
