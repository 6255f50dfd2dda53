//! Tables as text and as Markdown, one set of cells for both: the
//! simulator's `compare` and `sweep` and ecnq-perf's demo print through
//! here, so their text and Markdown tables agree cell for cell.
//!
//! ```
//! use ecnq_charts::table::{aligned, markdown};
//!
//! let heads = ["run", "goodput"];
//! let row = vec!["erc".to_owned(), "46.5 Mb/s".to_owned()];
//! assert_eq!(aligned(&row, &[5, 10]), "erc    46.5 Mb/s");
//! assert_eq!(markdown(&heads, &[row]), "| run | goodput |\n| --- | --- |\n| erc | 46.5 Mb/s |\n");
//! ```

/// A Markdown table of `rows` under `heads` (a `|` in a cell is escaped).
pub fn markdown(heads: &[&str], rows: &[Vec<String>]) -> String {
    fn line<S: AsRef<str>>(cells: impl Iterator<Item = S>) -> String {
        let cells: Vec<String> = cells.map(|c| c.as_ref().replace('|', "\\|")).collect();
        format!("| {} |\n", cells.join(" | "))
    }
    let mut out = line(heads.iter());
    out += &line(heads.iter().map(|_| "---"));
    for row in rows {
        out += &line(row.iter());
    }
    out
}

/// A text table's row: each cell padded to its width, one space apart,
/// the first left-aligned and the rest right-aligned (numbers).
pub fn aligned(cells: &[String], widths: &[usize]) -> String {
    let padded: Vec<String> = cells
        .iter()
        .zip(widths)
        .enumerate()
        .map(|(i, (cell, &width))| match i {
            0 => format!("{cell:<width$}"),
            _ => format!("{cell:>width$}"),
        })
        .collect();
    padded.join(" ")
}
