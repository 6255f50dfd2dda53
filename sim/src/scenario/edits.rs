//! `--set key=value` edits: a dotted path (numeric segments index arrays)
//! changes one field of the TOML text before it is parsed.

/// Applies `key=value` edits (dotted paths, numeric segments index arrays)
/// to TOML text, keeping its layout so line numbers still point at the file.
pub fn apply_edits(text: &str, set: &[String]) -> Result<String, String> {
    if set.is_empty() {
        return Ok(text.to_owned());
    }
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    for edit in set {
        let (key, value) = edit
            .split_once('=')
            .ok_or_else(|| format!("--set `{edit}`: expected key=value"))?;
        let value: toml_edit::Value = value
            .trim()
            .parse()
            .unwrap_or_else(|_| toml_edit::Value::from(value.trim()));
        let parts: Vec<&str> = key.trim().split('.').collect();
        set_in_table(doc.as_table_mut(), &parts, value)
            .ok_or_else(|| format!("--set `{edit}`: no field `{}` in the scenario", key.trim()))?;
    }
    Ok(doc.to_string())
}

fn set_in_table(
    table: &mut dyn toml_edit::TableLike,
    parts: &[&str],
    value: toml_edit::Value,
) -> Option<()> {
    let (head, rest) = parts.split_first()?;
    if rest.is_empty() {
        table.insert(head, toml_edit::Item::Value(value));
        return Some(());
    }
    match table.get_mut(head)? {
        toml_edit::Item::ArrayOfTables(array) => {
            let (index, rest) = rest.split_first()?;
            let inner = array.get_mut(index.parse().ok()?)?;
            set_in_table(inner, rest, value)
        }
        toml_edit::Item::Value(toml_edit::Value::Array(array)) if rest.len() == 1 => {
            let slot = array.get_mut(rest[0].parse().ok()?)?;
            *slot = value;
            Some(())
        }
        item => set_in_table(item.as_table_like_mut()?, rest, value),
    }
}
