//! Properties files as the Java client reads them (`client.properties`,
//! kcat's `-F`): `#` and `!` comments, `=`, `:` or a space between name
//! and value, `\` at the end of a line to continue it, and Java's escapes.
//! The public face is `config::read_properties` and
//! `config::read_properties_file`; errors here are the reason alone.

use std::path::Path;

/// The properties in `text`, in the order given.
pub(super) fn read(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut props = Vec::new();
    java_properties::PropertiesIter::new(text.as_bytes())
        .read_into(|k, v| props.push((k, v)))
        .map_err(|e| format!("a properties file: {e}"))?;
    Ok(props)
}

/// The properties in the file at `path`; an error names it.
pub(super) fn read_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    read(&text).map_err(|why| format!("{}: {why}", path.display()))
}
