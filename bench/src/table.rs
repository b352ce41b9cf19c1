//! Aligned Markdown tables and number formatting for the terminal report.

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Number columns.
    Right,
}

/// A table rendered as aligned Markdown (reads well in a terminal, pastes into a README).
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(header: &[(&str, Align)]) -> Table {
        Table {
            header: header.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Append a row (missing cells are blank).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Render with a trailing newline.
    pub fn render(&self) -> String {
        let cols = self.header.len();
        let cell = |r: &Vec<String>, i: usize| r.get(i).cloned().unwrap_or_default();
        let width = |i: usize| {
            self.rows
                .iter()
                .map(|r| cell(r, i).chars().count())
                .chain([self.header[i].0.chars().count(), 3])
                .max()
                .unwrap_or(3)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        let line = |cells: Vec<String>| {
            let mut s = String::from("|");
            for (i, c) in cells.into_iter().enumerate() {
                let pad = widths[i] - c.chars().count();
                let (l, r) = match self.header[i].1 {
                    Align::Left => (0, pad),
                    Align::Right => (pad, 0),
                };
                s.push_str(&format!(" {}{}{} |", " ".repeat(l), c, " ".repeat(r)));
            }
            s.push('\n');
            s
        };
        let mut out = line(self.header.iter().map(|(h, _)| h.clone()).collect());
        out.push('|');
        for (i, (_, a)) in self.header.iter().enumerate() {
            let dashes = "-".repeat(widths[i]);
            match a {
                Align::Left => out.push_str(&format!(" {dashes} |")),
                Align::Right => out.push_str(&format!(" {}: |", &dashes[1..])),
            }
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line((0..cols).map(|i| cell(r, i)).collect()));
        }
        out
    }
}

/// `1234567.8` → `1,234,568`.
pub fn thousands(x: f64) -> String {
    let n = x.round().max(0.0) as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Compact: `950`, `12.3k`, `145k`, `1.20M`.
pub fn compact(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if a >= 1e5 {
        format!("{:.0}k", x / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// A ratio: `0.97x`, `3.1x`, `12x`.
pub fn ratio(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}x")
    } else if x >= 2.0 {
        format!("{x:.1}x")
    } else {
        format!("{x:.2}x")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(thousands(1234567.8), "1,234,568");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(compact(12_345.0), "12.3k");
        assert_eq!(compact(145_200.0), "145k");
        assert_eq!(ratio(0.966), "0.97x");
        assert_eq!(ratio(12.4), "12x");
    }

    #[test]
    fn aligned() {
        let mut t = Table::new(&[("Pattern", Align::Left), ("ops/s", Align::Right)]);
        t.row(vec!["seq".into(), "1,000".into()]);
        t.row(vec!["join_all(100)".into(), "12".into()]);
        assert_eq!(
            t.render(),
            "| Pattern       | ops/s |\n\
             | ------------- | ----: |\n\
             | seq           | 1,000 |\n\
             | join_all(100) |    12 |\n"
        );
    }
}
