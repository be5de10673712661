//! SVG charts: size against decode speed, and per-kind sizes.

use std::path::Path;

use plotters::prelude::*;

use crate::run::Results;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("chart: {e}")
}

/// Raw bytes/event against decode-to-owned ns/event, one labelled point per format.
pub fn size_vs_decode(r: &Results, path: &Path) -> anyhow::Result<()> {
    let points: Vec<(f64, f64, &str)> = r
        .formats
        .iter()
        .filter_map(|f| f.median("decode").map(|d| (d, f.sizes.raw_mean, f.name)))
        .collect();
    let max_x = points.iter().map(|p| p.0).fold(0.0, f64::max) * 1.15;
    let max_y = points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Size vs decode speed (lower left is better)",
            ("sans-serif", 22),
        )
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_x, 0.0..max_y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("decode to owned, ns/event (median)")
        .y_desc("raw bytes/event")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(points.iter().map(|&(x, y, name)| {
            let color = if name == "nwb" { RED } else { BLUE };
            EmptyElement::at((x, y))
                + Circle::new((0, 0), 5, color.filled())
                + Text::new(name.to_string(), (7, -12), ("sans-serif", 13))
        }))
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Raw bytes/event per kind as a percentage of the first format (JSON),
/// grouped bars per kind.
pub fn per_kind_sizes(r: &Results, path: &Path) -> anyhow::Result<()> {
    let kinds: Vec<_> = r.kinds.iter().filter(|k| !k.cells.is_empty()).collect();
    let nf = r.formats.len();
    let root = SVGBackend::new(path, (1200, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Raw size per kind, % of JSON (nostrwire)",
            ("sans-serif", 22),
        )
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .right_y_label_area_size(0)
        .build_cartesian_2d(0.0..kinds.len() as f64, 0.0..130.0)
        .map_err(err)?;
    let labels: Vec<String> = kinds.iter().map(|k| format!("kind {}", k.kind)).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(kinds.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-6 && i < labels.len() {
                labels[i].clone()
            } else {
                String::new()
            }
        })
        .y_desc("% of JSON bytes")
        .draw()
        .map_err(err)?;
    let width = 0.9 / nf as f64;
    for (fi, f) in r.formats.iter().enumerate() {
        let color = if f.name == "nwb" {
            RED.to_rgba()
        } else {
            Palette99::pick(fi).to_rgba()
        };
        chart
            .draw_series(kinds.iter().enumerate().map(|(ki, k)| {
                let base = k.cells[0].raw_mean.max(1.0);
                let pct = 100.0 * k.cells[fi].raw_mean / base;
                let x0 = ki as f64 + 0.05 + fi as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.9, pct)], color.filled())
            }))
            .map_err(err)?
            .label(f.name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
