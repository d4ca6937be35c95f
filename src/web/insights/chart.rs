//! Horizontal bar charts drawn on the server as SVG for the insights page: one row per item, its
//! label on a line of its own above its bar and its value written after the bar, so long names
//! never crowd the bars and the chart reads at 390 px as at desktop width (the SVG scales to
//! its box; `svg.chart` in `app.css` caps its width). No script, no chart library; the rows are
//! also the chart's accessible text.

/// The drawing's width in SVG units (its box scales it).
pub const WIDTH: f64 = 360.0;
/// One row's height: the label line and the bar.
const ROW: f64 = 38.0;
/// The bar's thickness.
const BAR: f64 = 12.0;
/// Room left after the longest bar for its value.
const VALUE_ROOM: f64 = 130.0;

/// One item of a chart as the page gives it: its label, its value in words, its magnitude
/// (any unit, ≥ 0; the longest bar is the largest) and a link.
pub struct Item {
    /// What the row is, e.g. `connection_pool_exhausted (2 services)`.
    pub label: String,
    /// Its value in words, e.g. `3 incidents`, `41 min`.
    pub value: String,
    /// Its magnitude; `None` draws no bar (e.g. a week with no resolved incident).
    pub magnitude: Option<f64>,
    /// Emphasised (drawn in the warning colour), e.g. a recurring dead end.
    pub marked: bool,
}

/// One drawn row.
pub struct Row {
    /// Label text.
    pub label: String,
    /// Value text.
    pub value: String,
    /// Label baseline.
    pub label_y: String,
    /// Bar top.
    pub bar_y: String,
    /// Bar width (0 when there is no bar).
    pub bar_w: String,
    /// Value text x (after the bar) and baseline.
    pub value_x: String,
    /// Value baseline.
    pub value_y: String,
    /// Emphasised.
    pub marked: bool,
}

/// A chart ready for the template.
pub struct Chart {
    /// Element id, e.g. `chart-mttr-trend`.
    pub id: &'static str,
    /// What it shows, read by screen readers (also the SVG's `<title>`).
    pub title: String,
    /// `0 0 WIDTH height`.
    pub view_box: String,
    /// The rows.
    pub rows: Vec<Row>,
}

/// Draws `items` (at most `max_rows`, in the order given) as a chart titled `title`.
pub fn bars(id: &'static str, title: String, items: Vec<Item>, max_rows: usize) -> Chart {
    let items: Vec<Item> = items.into_iter().take(max_rows).collect();
    let largest = items
        .iter()
        .filter_map(|i| i.magnitude)
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let span = WIDTH - VALUE_ROOM;
    let rows = items
        .into_iter()
        .enumerate()
        .map(|(k, i)| {
            let top = k as f64 * ROW;
            let w = i
                .magnitude
                .map_or(0.0, |m| (m.max(0.0) / largest * span).max(2.0));
            Row {
                label: truncate(&i.label, 52),
                value: i.value,
                label_y: format!("{:.1}", top + 14.0),
                bar_y: format!("{:.1}", top + 20.0),
                bar_w: format!("{w:.1}"),
                value_x: format!("{:.1}", w + 6.0),
                value_y: format!("{:.1}", top + 20.0 + BAR - 1.0),
                marked: i.marked,
            }
        })
        .collect::<Vec<_>>();
    let height = (rows.len().max(1) as f64 * ROW + 4.0).round();
    Chart {
        id,
        title,
        view_box: format!("0 0 {WIDTH} {height}"),
        rows,
    }
}

/// `s` cut to `n` characters with an ellipsis.
fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_value_gets_the_longest_bar_and_every_value_stays_inside_the_drawing() {
        let item = |label: &str, m: Option<f64>| Item {
            label: label.into(),
            value: "1 h 30 min".into(),
            magnitude: m,
            marked: false,
        };
        let c = bars(
            "c",
            "t".into(),
            vec![
                item("a", Some(10.0)),
                item("b", Some(40.0)),
                item("c", None),
            ],
            8,
        );
        assert_eq!(c.rows.len(), 3);
        let w: Vec<f64> = c.rows.iter().map(|r| r.bar_w.parse().unwrap()).collect();
        assert_eq!(w[1], WIDTH - VALUE_ROOM);
        assert!(w[0] < w[1] && w[2] == 0.0);
        for r in &c.rows {
            // A value of about 18 characters at 12 units each fits after the longest bar.
            assert!(r.value_x.parse::<f64>().unwrap() + 110.0 <= WIDTH + 1.0);
        }
        assert_eq!(c.view_box, format!("0 0 {WIDTH} {}", 3.0 * ROW + 4.0));
    }
}
