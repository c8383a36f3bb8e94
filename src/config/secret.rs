//! [`Secret`]: a setting that is never printed (in `config/` so that
//! `config/oauthbearer.rs` can hold one without importing `config.rs`).

/// A secret setting (a password, a private key): its `Debug` never shows
/// it, so it cannot reach a log line, an error or a panic message.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(pub(crate) String);

impl Secret {
    /// The secret itself, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(redacted)")
    }
}
