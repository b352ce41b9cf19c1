//! What both SVG charts share: escaping, a "nice" axis, an estimate of how wide a text is drawn,
//! and a legend that wraps instead of running off the canvas.
//!
//! The width estimate follows DejaVu Sans, the widest of the sans-serif faces a viewer is likely
//! to fall back on (Helvetica and Arial are narrower), so a layout that fits by this estimate
//! fits on screen too. The tests of both charts check their committed renderings with it
//! (`cargo test -p autobatch-bench chart`).

use std::fmt::Write;

/// `s` with the characters XML reserves escaped.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" axis maximum and tick step covering `max`.
pub fn nice_axis(max: f64) -> (f64, f64) {
    let max = max.max(1.0);
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// The advance width of `c` in DejaVu Sans, in ems, rounded up to a hundredth.
fn glyph_em(c: char) -> f64 {
    match c {
        'i' | 'j' | 'l' | '\'' | 'I' | 'J' => 0.30,
        ' ' | '.' | ',' | ':' | ';' | '·' | '!' | '|' | '/' => 0.34,
        'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' => 0.42,
        '`' | '_' | '–' | '"' => 0.50,
        'c' | 's' | 'z' | 'k' | 'v' | 'x' | 'y' | 'L' | 'F' => 0.60,
        'm' | 'M' | 'w' | '+' | '÷' | '%' | '×' => 0.98,
        '0'..='9' | 'a'..='z' | 'P' | 'S' | 'T' | 'Y' | 'E' => 0.64,
        'W' | '—' | '@' => 1.00,
        _ => 0.79,
    }
}

/// About how wide `s` is drawn at `size` px; bold faces are a tenth wider.
pub fn text_width(s: &str, size: f64, bold: bool) -> f64 {
    let em: f64 = s.chars().map(glyph_em).sum();
    em * size * if bold { 1.1 } else { 1.0 }
}

/// A legend: a swatch and a label per item, in rows centred on the canvas, a row ending where
/// the next item would pass the margins.
pub struct Legend<'a> {
    /// `(fill colour, label)` of every item, in order.
    pub items: &'a [(&'static str, String)],
    /// Font size of the labels, px.
    pub size: f64,
    /// Width of the canvas.
    pub canvas: f64,
    /// Room kept free at either side.
    pub margin: f64,
}

impl Legend<'_> {
    fn item_width(&self, label: &str) -> f64 {
        self.size * 1.6 + text_width(label, self.size, false) + self.size * 1.6
    }

    /// The items of each row.
    fn rows(&self) -> Vec<&[(&'static str, String)]> {
        let room = self.canvas - 2.0 * self.margin;
        let mut rows = Vec::new();
        let (mut start, mut width) = (0, 0.0);
        for (i, (_, label)) in self.items.iter().enumerate() {
            let w = self.item_width(label);
            if i > start && width + w > room {
                rows.push(&self.items[start..i]);
                (start, width) = (i, 0.0);
            }
            width += w;
        }
        if start < self.items.len() {
            rows.push(&self.items[start..]);
        }
        rows
    }

    /// Draws the legend with its first row's swatches at `top`; returns where it ends.
    pub fn draw(&self, svg: &mut String, top: f64) -> f64 {
        let line = self.size * 1.6;
        let mut y = top;
        for row in self.rows() {
            let total: f64 = row.iter().map(|(_, l)| self.item_width(l)).sum();
            let mut x = (self.canvas - total) / 2.0;
            for (fill, label) in row {
                let _ = writeln!(
                    svg,
                    r##"<rect x="{x:.1}" y="{y:.1}" width="{s:.0}" height="{s:.0}" fill="{fill}"/><text x="{:.1}" y="{:.1}" font-size="{}" fill="#333">{}</text>"##,
                    x + self.size * 1.6,
                    y + self.size,
                    self.size,
                    esc(label),
                    s = self.size * 1.15,
                );
                x += self.item_width(label);
            }
            y += line;
        }
        y
    }
}

#[cfg(test)]
pub mod check {
    //! Reading the text of a rendered chart back, and finding text that collides or leaves the
    //! canvas.

    use super::text_width;

    /// A text's estimated box on the canvas.
    #[derive(Debug, Clone)]
    #[allow(dead_code)] // `text` is read through `Debug`, in the messages of failing checks.
    pub struct TextBox {
        pub text: String,
        pub x0: f64,
        pub y0: f64,
        pub x1: f64,
        pub y1: f64,
    }

    fn attr(tag: &str, name: &str) -> Option<String> {
        let key = format!(" {name}=\"");
        let at = tag.find(&key)? + key.len();
        Some(tag[at..].split('"').next()?.to_owned())
    }

    fn num(tag: &str, name: &str) -> Option<f64> {
        attr(tag, name)?.parse().ok()
    }

    fn unescape(s: &str) -> String {
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
    }

    /// `(x, y)` of `translate(x,y)` in a `transform`, and whether it rotates by a quarter turn.
    fn translate(tag: &str) -> Option<(f64, f64, bool)> {
        let t = attr(tag, "transform")?;
        let inner = t.strip_prefix("translate(")?.split(')').next()?;
        let (x, y) = inner.split_once(',')?;
        let turned = t.contains("rotate(-90)") || t.contains("rotate(90)");
        Some((x.trim().parse().ok()?, y.trim().parse().ok()?, turned))
    }

    /// The canvas size and every `<text>`'s box, its font size taken from the root when the
    /// text names none; the box spans ascent and descent above and below the baseline.
    pub fn text_boxes(svg: &str) -> ((f64, f64), Vec<TextBox>) {
        let root = svg.split('>').next().expect("an <svg> root");
        let canvas = (num(root, "width").unwrap(), num(root, "height").unwrap());
        let root_size = num(root, "font-size").unwrap_or(16.0);
        let mut boxes = Vec::new();
        for piece in svg.split("<text").skip(1) {
            let (tag, rest) = piece.split_once('>').expect("a closed <text> tag");
            let text = unescape(rest.split("</text>").next().unwrap());
            let size = num(tag, "font-size").unwrap_or(root_size);
            let bold = attr(tag, "font-weight").as_deref() == Some("bold");
            let w = text_width(&text, size, bold);
            let (along, across, turned) = match translate(tag) {
                Some((x, y, turned)) => (
                    if turned { y } else { x },
                    if turned { x } else { y },
                    turned,
                ),
                None => (num(tag, "x").unwrap(), num(tag, "y").unwrap(), false),
            };
            let start = match attr(tag, "text-anchor").as_deref() {
                Some("middle") => along - w / 2.0,
                Some("end") => along - w,
                _ => along,
            };
            let (a0, a1, c0, c1) = (start, start + w, across - 0.8 * size, across + 0.2 * size);
            boxes.push(if turned {
                TextBox {
                    text,
                    x0: c0,
                    x1: c1,
                    y0: a0,
                    y1: a1,
                }
            } else {
                TextBox {
                    text,
                    x0: a0,
                    x1: a1,
                    y0: c0,
                    y1: c1,
                }
            });
        }
        (canvas, boxes)
    }

    /// Every text box outside the canvas and every pair of boxes that overlap, in words.
    pub fn collisions(svg: &str) -> Vec<String> {
        let ((w, h), boxes) = text_boxes(svg);
        let mut found = Vec::new();
        for b in &boxes {
            if b.x0 < 0.0 || b.y0 < 0.0 || b.x1 > w || b.y1 > h {
                found.push(format!("{b:?} leaves the {w}×{h} canvas"));
            }
        }
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                if a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 {
                    found.push(format!("{a:?} overlaps {b:?}"));
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::check::collisions;
    use super::*;

    #[test]
    fn axis_is_nice() {
        assert_eq!(nice_axis(145_000.0), (150_000.0, 50_000.0));
        assert_eq!(nice_axis(9_000.0), (10_000.0, 2_000.0));
    }

    #[test]
    fn the_width_estimate_grows_with_size_text_and_weight() {
        assert!(text_width("mmm", 12.0, false) > text_width("iii", 12.0, false));
        assert!(text_width("abc", 14.0, false) > text_width("abc", 12.0, false));
        assert!(text_width("abc", 12.0, true) > text_width("abc", 12.0, false));
    }

    #[test]
    fn a_legend_too_wide_for_one_row_wraps_and_stays_on_the_canvas() {
        let items: Vec<(&'static str, String)> = (0..8)
            .map(|i| ("#000", format!("a rather long legend label {i}")))
            .collect();
        let legend = Legend {
            items: &items,
            size: 12.0,
            canvas: 600.0,
            margin: 20.0,
        };
        let mut svg = String::from(r#"<svg width="600" height="400">"#);
        let end = legend.draw(&mut svg, 10.0);
        assert!(
            end > 10.0 + 12.0 * 1.6 * 2.0,
            "eight long items take several rows"
        );
        assert_eq!(collisions(&svg), Vec::<String>::new());
    }

    #[test]
    fn committed_charts_keep_their_text_apart_and_on_the_canvas() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/results");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "svg") {
                let svg = std::fs::read_to_string(&path).unwrap();
                assert_eq!(collisions(&svg), Vec::<String>::new(), "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen > 0, "no chart under {dir}");
    }

    #[test]
    fn overlapping_or_outlying_text_is_found() {
        let svg = r#"<svg width="100" height="50" font-size="10"><text x="10" y="20">abc</text><text x="12" y="22">def</text><text x="95" y="40">far too long</text></svg>"#;
        assert_eq!(collisions(svg).len(), 2, "{:?}", collisions(svg));
    }
}
