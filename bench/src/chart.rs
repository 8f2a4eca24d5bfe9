//! SVG charts drawn with plotters' SVG backend only (text becomes SVG `<text>`: no font library).

use std::path::Path;

use plotters::prelude::*;

use crate::server::Res;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(127, 127, 127),
];

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("chart: {e:?}")
}

/// A line chart of named series of (x, y) points; `log` puts both axes on a log scale.
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log: bool,
) -> Res<()> {
    let pts: Vec<(f64, f64)> =
        series.iter().flat_map(|s| s.1.iter().copied()).filter(|p| p.1.is_finite() && p.1 > 0.0).collect();
    if pts.is_empty() {
        return Ok(());
    }
    let (xmin, xmax) = pts.iter().fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let (ymin, ymax) = pts.iter().fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    let root = SVGBackend::new(path, (760, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 20)).margin(12).x_label_area_size(42).y_label_area_size(70);
    if log {
        let mut c = b
            .build_cartesian_2d((xmin * 0.8..xmax * 1.25).log_scale(), (ymin * 0.5..ymax * 2.0).log_scale())
            .map_err(err)?;
        c.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(err)?;
        draw_series(&mut c, series)?;
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
    } else {
        let mut c = b.build_cartesian_2d(0.0..xmax * 1.05, 0.0..ymax * 1.15).map_err(err)?;
        c.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(err)?;
        draw_series(&mut c, series)?;
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

fn draw_series<'a, DB, X, Y>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[(String, Vec<(f64, f64)>)],
) -> Res<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (name, p)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let p: Vec<(f64, f64)> = p.iter().copied().filter(|x| x.1.is_finite() && x.1 > 0.0).collect();
        c.draw_series(LineSeries::new(p.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        c.draw_series(p.iter().map(|&xy| Circle::new(xy, 3, color.filled()))).map_err(err)?;
    }
    Ok(())
}
