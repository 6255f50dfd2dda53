//! SVG charts with plotters' SVG backend only (no font or image libraries):
//! the simulator's run plots (`ecnq-sim`'s `report::plot`) and ecnq-perf's
//! demo plots draw through here, so both set up the backend, caption, mesh,
//! series and legend one way. A crate of its own so that ecnq-perf draws
//! its plots without depending on the simulator.
//!
//! ```
//! use ecnq_charts::{Chart, Look, Series};
//!
//! let path = std::env::temp_dir().join(format!("ecnq-charts-doc-{}.svg", std::process::id()));
//! let rates = Series {
//!     name: "flow 1".into(),
//!     points: vec![(0.0, 0.0), (1.0, 40.0), (2.0, 48.0)],
//! };
//! let chart = Chart {
//!     path: &path,
//!     look: Look::THIN,
//!     title: "flow rates",
//!     x_label: "time (s)",
//!     y_label: "Mbit/s",
//!     max: (2.0, 50.0),
//! };
//! chart.lines(&[rates], true)?;
//! assert!(std::fs::read_to_string(&path).unwrap().contains("flow 1"));
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), String>(())
//! ```

pub mod table;

use std::path::Path;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// One named line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// `(x, y)` points in x order.
    pub points: Vec<(f64, f64)>,
}

/// One labelled point of a scatter chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Label drawn beside the point.
    pub name: String,
    /// Position.
    pub x: f64,
    /// Position.
    pub y: f64,
}

/// Sizes a chart is drawn with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Look {
    /// Image size in pixels.
    pub size: (u32, u32),
    /// Caption font size.
    pub caption_font: u32,
    /// Margin around the chart.
    pub margin: u32,
    /// Height of the x axis' label area.
    pub x_label_area: u32,
    /// Width of the y axis' label area.
    pub y_label_area: u32,
    /// Stroke width of lines and of their legend swatches.
    pub line_width: u32,
    /// Length of a legend swatch.
    pub swatch: i32,
}

impl Look {
    /// Thin lines, for runs that plot a dozen flows (the simulator).
    pub const THIN: Look = Look {
        size: (900, 420),
        caption_font: 18,
        margin: 10,
        x_label_area: 35,
        y_label_area: 60,
        line_width: 1,
        swatch: 15,
    };
    /// Bold lines with room for long axis labels (ecnq-perf's demo).
    pub const BOLD: Look = Look {
        size: (900, 420),
        caption_font: 20,
        margin: 12,
        x_label_area: 40,
        y_label_area: 70,
        line_width: 2,
        swatch: 18,
    };
}

/// One chart: where it goes, how it looks, what it says and its axes,
/// which run from the origin to `max`.
#[derive(Clone, Copy, Debug)]
pub struct Chart<'a> {
    /// The SVG file written.
    pub path: &'a Path,
    /// Sizes.
    pub look: Look,
    /// Caption.
    pub title: &'a str,
    /// X axis description.
    pub x_label: &'a str,
    /// Y axis description.
    pub y_label: &'a str,
    /// Upper ends of the x and y axes.
    pub max: (f64, f64),
}

/// The chart area every chart here draws on, its x axis `X`.
type Area<'a, 'b, X = RangedCoordf64> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, RangedCoordf64>>;

impl Chart<'_> {
    /// Draws `series` as lines, with a legend if `legend`.
    pub fn lines(&self, series: &[Series], legend: bool) -> Result<(), String> {
        let look = self.look;
        self.draw(0.0..self.max.0, legend, |area| {
            for (i, s) in series.iter().enumerate() {
                let style = Palette99::pick(i).to_rgba().stroke_width(look.line_width);
                area.draw_series(LineSeries::new(s.points.iter().copied(), style))
                    .map_err(|e| e.to_string())?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + look.swatch, y)], style));
            }
            Ok(())
        })
    }

    /// Draws each finite point as a dot with its name beside it.
    pub fn points(&self, points: &[Point]) -> Result<(), String> {
        self.draw(0.0..self.max.0, false, |area| dots(area, points, 0.0))
    }

    /// [`Chart::points`] on a logarithmic x axis from `x_min` (above zero)
    /// to `max.0`, as Pantheon draws delays that span decades; a point
    /// left of `x_min` is drawn on the axis' left end.
    pub fn points_log_x(&self, points: &[Point], x_min: f64) -> Result<(), String> {
        self.draw((x_min..self.max.0).log_scale(), false, |area| {
            dots(area, points, x_min)
        })
    }

    /// Draws `points` on axes fitted to the finite ones, whatever `max`
    /// says, with room for their labels: a tenth above, and a sixth to the
    /// right; on a logarithmic x axis if `log_x` (a factor of two to spare
    /// on either side), as Pantheon draws throughput against delay.
    pub fn scatter(mut self, points: &[Point], log_x: bool) -> Result<(), String> {
        let finite = || points.iter().filter(|p| p.x.is_finite() && p.y.is_finite());
        let x_max = finite().map(|p| p.x).fold(0.0, f64::max).max(1e-3);
        let y_max = finite().map(|p| p.y).fold(0.0, f64::max).max(1e-3) * 1.1;
        if !log_x {
            self.max = (x_max * 1.15, y_max);
            return self.points(points);
        }
        let x_min = finite()
            .map(|p| p.x)
            .filter(|&x| x > 0.0)
            .fold(x_max, f64::min)
            / 2.0;
        self.max = (x_max * 2.0, y_max);
        self.points_log_x(points, x_min)
    }

    /// Sets up the file, caption and labelled mesh on an x axis of `x`,
    /// lets `content` draw on it, then adds a legend of the labelled
    /// elements if `legend`.
    fn draw<X>(
        &self,
        x: X,
        legend: bool,
        content: impl FnOnce(&mut Area<'_, '_, X::CoordDescType>) -> Result<(), String>,
    ) -> Result<(), String>
    where
        X: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
    {
        let fail = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", self.path.display());
        let look = self.look;
        let root = SVGBackend::new(self.path, look.size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let mut area = ChartBuilder::on(&root)
            .caption(self.title, ("sans-serif", look.caption_font))
            .margin(look.margin)
            .x_label_area_size(look.x_label_area)
            .y_label_area_size(look.y_label_area)
            .build_cartesian_2d(x, 0.0..self.max.1)
            .map_err(|e| fail(&e))?;
        area.configure_mesh()
            .x_desc(self.x_label)
            .y_desc(self.y_label)
            .draw()
            .map_err(|e| fail(&e))?;
        content(&mut area).map_err(|e| fail(&e))?;
        if legend {
            area.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| fail(&e))?;
        }
        root.present().map_err(|e| fail(&e))
    }
}

/// Draws each finite point, at least `x_min` along x, as a dot with its
/// name beside it.
fn dots<X>(area: &mut Area<'_, '_, X>, points: &[Point], x_min: f64) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
{
    let finite = points.iter().filter(|p| p.x.is_finite() && p.y.is_finite());
    for (i, p) in finite.enumerate() {
        let at = (p.x.max(x_min), p.y);
        let color = Palette99::pick(i).to_rgba();
        area.draw_series([Circle::new(at, 6, color.filled())])
            .map_err(|e| e.to_string())?;
        let font = ("sans-serif", 16).into_font();
        area.draw_series([Text::new(p.name.clone(), at, font)])
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart<'a>(path: &'a Path, title: &'a str) -> Chart<'a> {
        Chart {
            path,
            look: Look::BOLD,
            title,
            x_label: "s",
            y_label: "Mbit/s",
            max: (1.0, 3.0),
        }
    }

    #[test]
    fn writes_an_svg_with_every_series() {
        let dir = std::env::temp_dir().join(format!("ecnq-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        let series = [
            Series {
                name: "flow 1".into(),
                points: vec![(0.0, 1.0), (1.0, 3.0)],
            },
            Series {
                name: "flow 2".into(),
                points: vec![(0.5, 2.0), (1.0, f64::NAN)],
            },
        ];
        chart(&path, "throughput").lines(&series, true).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("flow 1") && svg.contains("flow 2"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_scatter_chart_names_every_finite_point() {
        let dir = std::env::temp_dir().join(format!("ecnq-scatter-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.svg");
        let point = |name: &str, x: f64, y: f64| Point {
            name: name.into(),
            x,
            y,
        };
        let points = [
            point("erc", 4.7, 45.8),
            point("cubic", 39.5, 46.3),
            point("nan", f64::NAN, 1.0),
        ];
        chart(&path, "goodput").points(&points).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("erc") && svg.contains("cubic") && !svg.contains(">nan<"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Delays from 0.5 to 400 ms: the log axis labels its decades, evenly
    /// spaced, and a point left of its start is drawn at the start.
    #[test]
    fn a_log_x_scatter_spaces_decades_evenly() {
        let dir = std::env::temp_dir().join(format!("ecnq-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("l.svg");
        let point = |name: &str, x: f64| Point {
            name: name.into(),
            x,
            y: 2.0,
        };
        let points = [point("erc", 4.0), point("cubic", 400.0), point("vcp", 0.0)];
        let mut c = chart(&path, "goodput");
        c.max = (1000.0, 3.0);
        c.points_log_x(&points, 0.5).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        // Where the text `label` is drawn along x.
        let x_of = |label: &str| -> f64 {
            // The last: the y axis may carry the same label first.
            let end = svg.rfind(&format!(">\n{label}\n</text>")).unwrap();
            let start = svg[..end].rfind("<text x=\"").unwrap() + 9;
            let x = &svg[start..end];
            x[..x.find('"').unwrap()].parse().unwrap()
        };
        let decades = ["1.0", "10.0", "100.0", "1000.0"].map(x_of);
        let steps: Vec<f64> = decades.windows(2).map(|d| d[1] - d[0]).collect();
        assert!(
            steps.iter().all(|s| (s - steps[0]).abs() <= 2.0),
            "{steps:?}"
        );
        // 4 ms lies six tenths of a decade right of 1 ms.
        assert!((x_of("erc") - decades[0] - 0.6 * steps[0]).abs() <= 2.0);
        assert!(x_of("vcp") < decades[0] && x_of("cubic") > decades[2]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unwritable_path_is_an_error_not_a_panic() {
        let path = Path::new("/nonexistent-dir/x.svg");
        let err = chart(path, "t").lines(&[], true).unwrap_err();
        assert!(err.contains("/nonexistent-dir/x.svg"), "{err}");
    }
}
