//! The cumulative plot: bugs found against schedules run, one line per
//! strategy (and one for the native loop, against runs).

use plotters::prelude::*;

use super::results::BenchReport;

/// Colours for the lines, in column order (readable on white).
const COLOURS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// A step line through (x, y): `y` found by the time `x` schedules ran.
pub type Steps = Vec<(f64, f64)>;

/// For each strategy, the mean number of harnesses (over seeds)
/// whose bug was found within x schedules, as a step line from 1 to `end`
/// (the budget: the line stops where the trials stopped).
pub fn strategy_lines(r: &BenchReport, end: f64) -> Vec<(String, Steps)> {
    let seeds = r.seeds.max(1) as f64;
    r.strategies
        .iter()
        .map(|s| {
            let hits: Vec<u64> = r
                .trials
                .iter()
                .filter(|t| &t.strategy == s)
                .filter_map(|t| t.schedules_to_bug)
                .collect();
            (s.clone(), steps(hits, 1.0 / seeds, end))
        })
        .collect()
}

/// Harnesses whose native loop failed within x runs.
pub fn native_line(r: &BenchReport, end: f64) -> Option<Steps> {
    let loops = r.native.as_ref()?;
    let hits = loops.iter().filter_map(|l| l.first_failure_run).collect();
    Some(steps(hits, 1.0, end))
}

fn steps(mut hits: Vec<u64>, weight: f64, end: f64) -> Steps {
    hits.sort_unstable();
    let mut pts = vec![(1.0, 0.0)];
    let mut y = 0.0;
    for x in hits {
        let x = x as f64;
        pts.push((x, y));
        y += weight;
        pts.push((x, y));
    }
    pts.push((end.max(1.0), y));
    pts
}

/// The plotting library could not draw the plot: its words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlotError(String);

/// Draws the plot as an SVG document.
pub fn svg(r: &BenchReport) -> Result<String, PlotError> {
    let native_end = r.native.iter().flatten().map(|l| l.runs).max().unwrap_or(0);
    let span = r.schedule_span();
    let end = (span.max(native_end).max(2)) as f64;
    let lines = strategy_lines(r, span.max(1) as f64);
    let native = native_line(r, native_end.max(1) as f64);
    let top = r.harnesses.len().max(1) as f64;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, 560)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| PlotError(e.to_string());
        root.fill(&WHITE).map_err(e)?;
        let caption = format!(
            "Bugs found vs schedules ({} harnesses, mean over {} seeds)",
            r.harnesses.len(),
            r.seeds
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 20))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(52)
            .build_cartesian_2d((1.0..end).log_scale(), 0.0..top + 0.5)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("schedules per trial (runs, for native), log scale")
            .y_desc("bugs found")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_labels(r.harnesses.len() + 2)
            .y_label_formatter(&|y| format!("{}", y.round()))
            .draw()
            .map_err(e)?;
        for (i, (name, pts)) in lines.into_iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
                .map_err(e)?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        if let Some(pts) = native {
            let style = BLACK.stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(pts, 6, 4, style))
                .map_err(e)?
                .label("native stress loop (runs)")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::results::tests::report;

    #[test]
    fn a_line_climbs_by_one_over_seeds_at_each_find() {
        let lines = strategy_lines(&report(), 100.0);
        assert_eq!(lines.len(), 2);
        let (name, random) = &lines[0];
        assert_eq!(name, "random");
        // Found at 2 and 3 (two seeds of abba), never on depth3.
        assert_eq!(
            random,
            &vec![
                (1.0, 0.0),
                (2.0, 0.0),
                (2.0, 0.5),
                (3.0, 0.5),
                (3.0, 1.0),
                (100.0, 1.0)
            ]
        );
        let native = native_line(&report(), 1000.0).unwrap();
        assert_eq!(native.last(), Some(&(1000.0, 1.0)));
    }

    #[test]
    fn the_plot_is_an_svg_with_a_legend_entry_per_line() {
        let s = svg(&report()).unwrap();
        assert!(s.starts_with("<svg"), "{}", &s[..80]);
        for label in ["random", "pct:3", "native stress loop (runs)"] {
            assert!(s.contains(label), "legend has {label}");
        }
        assert!(!s.contains(">\nfuzz\n<"), "no line for fuzz");
    }
}
