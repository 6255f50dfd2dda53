//! SVG line charts of a run's time series (plotters, SVG backend only, so
//! no font or image libraries are needed).

use std::path::Path;

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

/// The chart area every plot here draws on.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// An SVG file at `path` of `size` with a titled, labelled mesh from the
/// origin to `max`, on which `draw` puts its elements, then a legend of
/// the labelled ones if `legend`.
fn plot(
    path: &Path,
    size: (u32, u32),
    labels: [&str; 3],
    max: (f64, f64),
    legend: bool,
    draw: impl FnOnce(&mut Chart<'_, '_>) -> Result<(), String>,
) -> Result<(), String> {
    let [title, x_label, y_label] = labels;
    let root = SVGBackend::new(path, size).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max.0, 0.0..max.1)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| fail(&e))?;
    draw(&mut chart).map_err(|e| fail(&e))?;
    if legend {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))
}

/// Draws `series` as lines into an SVG file at `path`.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), String> {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x_max, mut y_max) = (0.0f64, 0.0f64);
    for &(x, y) in all {
        if x.is_finite() && y.is_finite() {
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
    }
    let x_max = if x_max > 0.0 { x_max } else { 1.0 };
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let labels = [title, x_label, y_label];
    plot(path, (900, 420), labels, (x_max, y_max), true, |chart| {
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        Ok(())
    })
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

/// Draws labelled points into an SVG file at `path`.
pub fn scatter_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    points: &[Point],
) -> Result<(), String> {
    let finite = || points.iter().filter(|p| p.x.is_finite() && p.y.is_finite());
    let x_max = finite().map(|p| p.x).fold(0.0, f64::max).max(1e-3) * 1.15;
    let y_max = finite().map(|p| p.y).fold(0.0, f64::max).max(1e-3) * 1.1;
    let labels = [title, x_label, y_label];
    plot(path, (900, 520), labels, (x_max, y_max), false, |chart| {
        for (i, p) in finite().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series([Circle::new((p.x, p.y), 6, color.filled())])
                .map_err(|e| e.to_string())?;
            chart
                .draw_series([Text::new(
                    p.name.clone(),
                    (p.x, p.y),
                    ("sans-serif", 16).into_font(),
                )])
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_series() {
        let dir = std::env::temp_dir().join(format!("ecnq-plot-{}", std::process::id()));
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
        line_chart(&path, "throughput", "s", "Mbit/s", &series).unwrap();
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
        scatter_chart(&path, "goodput", "ms", "Mbit/s", &points).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("erc") && svg.contains("cubic") && !svg.contains(">nan<"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unwritable_path_is_an_error_not_a_panic() {
        let err = line_chart(Path::new("/nonexistent-dir/x.svg"), "t", "x", "y", &[]).unwrap_err();
        assert!(err.contains("/nonexistent-dir/x.svg"), "{err}");
    }
}
