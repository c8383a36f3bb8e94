//! Properties files as the Java client reads them (`client.properties`,
//! kcat's `-F`): `#` and `!` comments, `=`, `:` or a space between name
//! and value, `\` at the end of a line to continue it, and Java's escapes.

use std::path::Path;

use super::ConfigError;

/// The properties in `text`, a Java properties file's contents, in the
/// order given (a name given twice appears twice; the later wins when
/// they are set in turn).
///
/// ```
/// let props = courier_kafka::config::read_properties(
///     "# Confluent Cloud\nbootstrap.servers=pkc-1.example.com:9092\n\
///      sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n  \
///      required username='KEY' password='SECRET';\n",
/// )
/// .unwrap();
/// assert_eq!(props[0], ("bootstrap.servers".into(), "pkc-1.example.com:9092".into()));
/// assert!(props[1].1.ends_with("required username='KEY' password='SECRET';"));
/// ```
pub fn read_properties(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut props = Vec::new();
    java_properties::PropertiesIter::new(text.as_bytes())
        .read_into(|k, v| props.push((k, v)))
        .map_err(|e| ConfigError::Unreadable(format!("a properties file: {e}")))?;
    Ok(props)
}

/// The properties in the file at `path` ([`read_properties`]); an
/// unreadable file is an error naming it.
pub fn read_properties_file(path: impl AsRef<Path>) -> Result<Vec<(String, String)>, ConfigError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::Unreadable(format!("{}: {e}", path.display())))?;
    read_properties(&text).map_err(|e| match e {
        ConfigError::Unreadable(why) => {
            ConfigError::Unreadable(format!("{}: {why}", path.display()))
        }
        other => other,
    })
}
