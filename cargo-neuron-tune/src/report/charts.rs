//! The report's charts: inline SVG drawn with plotters, one `<figure class="chart">` each.
//!
//! Each chart is a `<figure class="chart" data-chart=KIND data-points=N>` whose SVG draws
//! its N data points as marks (circles for points, rectangles for bars), so a reader (or a
//! test) can tell an empty chart from a full one without parsing the picture.

use super::model::{GateSeries, Shown, Target, TuneRun};
use super::render::escape;
use plotters::prelude::*;
use std::fmt::Write;

const W: u32 = 640;
const H: u32 = 360;
/// Series colours (Okabe–Ito, readable by colour-blind people).
const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
];

/// A chart as SVG text, or the plotting error (never expected with finite data; the
/// caller shows it in place of the chart).
type Svg = Result<String, String>;

fn svg(
    draw: impl FnOnce(&DrawingArea<SVGBackend, plotters::coord::Shift>) -> Result<(), String>,
) -> Svg {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        draw(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(buf)
}

/// The frame every chart shares: its caption, margins and axis label areas, the y one as
/// wide as its tick labels need (`y_labels` pixels).
fn frame<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, plotters::coord::Shift>,
    caption: impl AsRef<str>,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(root);
    b.caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(y_labels);
    b
}

/// The legend every chart with series draws: boxed, at `at`.
fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    c: &mut ChartContext<'a, DB, CT>,
    at: SeriesLabelPosition,
) -> Result<(), String> {
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(at)
        .draw()
        .map_err(err)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A range around `lo..hi` with a margin (and never empty).
fn padded(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let span = (hi - lo).abs().max(hi.abs() * 0.05).max(1e-9);
    (lo - span * 0.08)..(hi + span * 0.08)
}

/// A group of comparable runs' name, its number of seeds, and per evaluation (x, min,
/// median, max).
type Band = (String, usize, Vec<(f64, f64, f64, f64)>);

/// One side of the engine chart: its name, the engines' busy percents, its colour.
type Side<'a> = (&'a str, [(&'static str, f64); 5], RGBColor);

/// Best-so-far per group of comparable runs (strategy, objective and pinned parameters:
/// [`TuneRun::comparable`]): the median over seeds with the min–max band, one circle per
/// evaluation of the median line. Returns the SVG and the number of circles.
pub(super) fn convergence(runs: &[TuneRun]) -> (Svg, usize) {
    let mut groups: Vec<Vec<&TuneRun>> = Vec::new();
    for r in runs {
        match groups.iter_mut().find(|g| g[0].comparable() == r.comparable()) {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    // Per group and evaluation: (n, min, median, max) over the seeds with a value.
    let bands: Vec<Band> = groups
        .into_iter()
        .map(|group| {
            let curves: Vec<Vec<Option<f64>>> = group.iter().map(|r| r.best_so_far()).collect();
            let len = curves.iter().map(Vec::len).max().unwrap_or(0);
            let seeds = curves.len();
            let pts = (0..len)
                .filter_map(|i| {
                    let mut v: Vec<f64> =
                        curves.iter().filter_map(|c| c.get(i).copied().flatten()).collect();
                    if v.is_empty() {
                        return None;
                    }
                    v.sort_by(f64::total_cmp);
                    let median = if v.len() % 2 == 1 {
                        v[v.len() / 2]
                    } else {
                        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
                    };
                    Some(((i + 1) as f64, v[0], median, v[v.len() - 1]))
                })
                .collect();
            (TuneRun::group_name(&group), seeds, pts)
        })
        .collect();
    let n: usize = bands.iter().map(|(_, _, p)| p.len()).sum();
    let all = bands.iter().flat_map(|(_, _, p)| p.iter());
    let (lo, hi) = all.clone().fold((f64::MAX, f64::MIN), |(l, h), p| (l.min(p.1), h.max(p.3)));
    let xmax = all.map(|p| p.0).fold(1.0, f64::max);
    let chart = svg(|root| {
        if n == 0 {
            return Ok(());
        }
        let mut c = frame(root, "best so far vs evaluations", 60)
            .build_cartesian_2d(0.0..xmax + 1.0, padded(lo, hi))
            .map_err(err)?;
        c.configure_mesh().x_desc("evaluations").y_desc("best time (µs)").draw().map_err(err)?;
        for (i, (s, seeds, pts)) in bands.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            if *seeds > 1 {
                let band: Vec<(f64, f64)> = pts
                    .iter()
                    .map(|p| (p.0, p.1))
                    .chain(pts.iter().rev().map(|p| (p.0, p.3)))
                    .collect();
                c.draw_series(std::iter::once(Polygon::new(band, color.mix(0.2)))).map_err(err)?;
            }
            let label =
                format!("{s}: median of {seeds} seed{}", if *seeds == 1 { "" } else { "s" });
            c.draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.2)), color.stroke_width(2)))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            c.draw_series(pts.iter().map(|p| Circle::new((p.0, p.2), 2, color.filled())))
                .map_err(err)?;
        }
        legend(&mut c, SeriesLabelPosition::UpperRight)
    });
    (chart, n)
}

/// The Pareto front: time against estimated energy, one circle per front variant.
pub(super) fn pareto(front: &[crate::commands::tune::ParetoPoint]) -> (Svg, usize) {
    let (tl, th) =
        front.iter().fold((f64::MAX, f64::MIN), |(l, h), p| (l.min(p.time_us), h.max(p.time_us)));
    let (el, eh) = front.iter().fold((f64::MAX, f64::MIN), |(l, h), p| {
        (l.min(p.energy_uj_estimate), h.max(p.energy_uj_estimate))
    });
    let chart = svg(|root| {
        let mut c = frame(root, "Pareto front (time, SBUF, estimated energy)", 60)
            .build_cartesian_2d(padded(tl, th), padded(el, eh))
            .map_err(err)?;
        c.configure_mesh()
            .x_desc("time (µs)")
            .y_desc("energy (µJ, estimate)")
            .draw()
            .map_err(err)?;
        c.draw_series(
            front
                .iter()
                .map(|p| Circle::new((p.time_us, p.energy_uj_estimate), 5, PALETTE[0].filled())),
        )
        .map_err(err)?;
        Ok(())
    });
    (chart, front.len())
}

/// Busy percent per engine, default and best side by side: one bar per engine and variant.
pub(super) fn utilization(default: Option<&Shown>, best: Option<&Shown>) -> (Svg, usize) {
    let sides: Vec<Side> = [("default", default, PALETTE[1]), ("best", best, PALETTE[0])]
        .into_iter()
        .filter_map(|(name, s, color)| Some((name, s?.engines()?, color)))
        .collect();
    let names: Vec<&str> =
        sides.first().map(|s| s.1.iter().map(|e| e.0).collect()).unwrap_or_default();
    let bars = sides.len() * names.len();
    let chart = svg(|root| {
        if bars == 0 {
            return Ok(());
        }
        let mut c = frame(root, "engine busy time: default vs best", 50)
            .build_cartesian_2d(0.0..names.len() as f64, 0.0..105.0)
            .map_err(err)?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(names.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = (*x - 0.5).round();
                if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                    names.get(i as usize).map_or(String::new(), |s| s.to_string())
                } else {
                    String::new()
                }
            })
            .y_desc("busy (% of kernel time)")
            .draw()
            .map_err(err)?;
        let w = 0.8 / sides.len() as f64;
        for (j, (name, engines, color)) in sides.iter().enumerate() {
            let color = *color;
            c.draw_series(engines.iter().enumerate().map(|(i, (_, pct))| {
                let x0 = i as f64 + 0.1 + j as f64 * w;
                Rectangle::new([(x0, 0.0), (x0 + w * 0.9, *pct)], color.filled())
            }))
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        }
        legend(&mut c, SeriesLabelPosition::UpperRight)
    });
    (chart, bars)
}

/// Every measured program on the chip's roofline (log-log): one circle each.
pub(super) fn roofline(t: &Target) -> (Svg, usize) {
    let pts = &t.roofline;
    let ridge = if t.hbm_gbps > 0.0 { t.peak_tflops * 1e3 / t.hbm_gbps } else { 1.0 };
    let (il, ih) =
        pts.iter().fold((ridge, ridge), |(l, h), p| (l.min(p.intensity), h.max(p.intensity)));
    let tl = pts.iter().map(|p| p.tflops).fold(t.peak_tflops, f64::min);
    let chart = svg(|root| {
        if pts.is_empty() {
            return Ok(());
        }
        let mut c =
            frame(root, format!("roofline on {} (every evaluated program)", t.chip.name), 60)
                .build_cartesian_2d(
                    (il / 2.0..ih * 2.0).log_scale(),
                    (tl / 2.0..t.peak_tflops * 2.0).log_scale(),
                )
                .map_err(err)?;
        c.configure_mesh().x_desc("FLOP per HBM byte").y_desc("TFLOP/s").draw().map_err(err)?;
        let roof = |i: f64| (t.hbm_gbps * i / 1e3).min(t.peak_tflops);
        let xs = [il / 2.0, ridge, ih * 2.0];
        c.draw_series(LineSeries::new(xs.iter().map(|&i| (i, roof(i))), BLACK.stroke_width(2)))
            .map_err(err)?
            .label(format!("roof: {:.0} TFLOP/s, {:.0} GB/s", t.peak_tflops, t.hbm_gbps))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2)));
        c.draw_series(
            pts.iter().map(|p| Circle::new((p.intensity, p.tflops), 3, PALETTE[0].filled())),
        )
        .map_err(err)?;
        legend(&mut c, SeriesLabelPosition::LowerRight)
    });
    (chart, pts.len())
}

/// A model's tokens/s through the gate runs: a line with a circle per run.
pub(super) fn gate_history(s: &GateSeries) -> (Svg, usize) {
    let (lo, hi) = s.points.iter().fold((f64::MAX, f64::MIN), |(l, h), p| (l.min(p.1), h.max(p.1)));
    let xmax = s.points.iter().map(|p| p.0).max().unwrap_or(1) as f64;
    let chart = svg(|root| {
        let mut c = frame(
            root,
            format!("{} @ {} on {}: tokens/s per gate run", s.model, s.shape, s.chip),
            70,
        )
        .build_cartesian_2d(0.5..xmax + 0.5, padded(lo, hi))
        .map_err(err)?;
        // Runs are whole numbers: a label per run, none between.
        c.configure_mesh()
            .x_labels(xmax as usize + 2)
            .x_label_formatter(&|x| {
                if x.fract() == 0.0 {
                    format!("{x:.0}")
                } else {
                    String::new()
                }
            })
            .x_desc("gate run")
            .y_desc("tokens/s")
            .draw()
            .map_err(err)?;
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(r, v)| (r as f64, v)).collect();
        c.draw_series(LineSeries::new(pts.iter().copied(), PALETTE[2].stroke_width(2)))
            .map_err(err)?;
        c.draw_series(pts.iter().map(|&p| Circle::new(p, 4, PALETTE[2].filled()))).map_err(err)?;
        Ok(())
    });
    (chart, s.points.len())
}

pub(super) fn figure(html: &mut String, kind: &str, (svg, points): (Svg, usize)) {
    let mark = if kind == "utilization" { "bars" } else { "points" };
    let _ = write!(html, "<figure class=\"chart\" data-chart=\"{kind}\" data-marks=\"{mark}\" data-points=\"{points}\">");
    match svg {
        Ok(s) if points > 0 => html.push_str(&s),
        Ok(_) => html.push_str("<p class=\"none\">nothing to draw (no measured variant)</p>"),
        Err(e) => {
            let _ =
                write!(html, "<p class=\"none\">the chart could not be drawn: {}</p>", escape(&e));
        }
    }
    html.push_str("</figure>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_series_draws_one_circle_per_run() {
        let s = GateSeries {
            model: "m".into(),
            shape: "s".into(),
            chip: "trn2".into(),
            points: vec![(1, 10.0), (2, 12.0), (4, 11.0)],
        };
        let (svg, n) = gate_history(&s);
        let svg = svg.unwrap();
        assert_eq!(n, 3);
        assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
        assert!(svg.contains("<polyline"));
    }
}
