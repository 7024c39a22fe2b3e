//! The SVG chart of `docs/benchmarks.md`, drawn with plotters' SVG backend (text is
//! laid out with plotters' built-in estimate: no system fonts needed).
//!
//! Left: the full identity load after a rotation per key type and format, ours next to
//! Go's `tls.X509KeyPair` (log scale). Right: handshakes per second, static and
//! reload, Go next to ours, each side in its default configuration (a hybrid
//! post-quantum key exchange on both). Each bar carries its 95% interval as a whisker.

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::report::Results;
use crate::stats::Estimate;

const OURS: RGBColor = RGBColor(0xd9, 0x5f, 0x02);
const OURS_LIGHT: RGBColor = RGBColor(0xf4, 0xa5, 0x82);
const GO: RGBColor = RGBColor(0x1b, 0x9e, 0x77);
const GO_LIGHT: RGBColor = RGBColor(0x8f, 0xd1, 0xbb);

struct Series {
    label: &'static str,
    color: RGBColor,
    /// One estimate per group (absent: not measured, no bar).
    values: Vec<Option<Estimate>>,
}

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// One panel: a bar per series and group (its median) with its interval as a
/// whisker, on a log scale (`log`) or a linear one from zero.
fn bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    groups: &[String],
    series: &[Series],
    log: bool,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let measured: Vec<Estimate> = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .collect();
    let highest = measured.iter().map(|e| e.upper).fold(1.0_f64, f64::max);
    // Headroom for the legend: a factor on a log scale, a share on a linear one.
    let top = if log { highest * 6.0 } else { highest * 1.35 };
    let bottom = measured.iter().map(|e| e.lower).fold(top, f64::min) / 2.0;
    let x_range = -0.5..(groups.len().max(1) as f64 - 0.5);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(70)
        .y_label_area_size(70);
    if log {
        let base = bottom.max(1e-3);
        let chart = builder.build_cartesian_2d(x_range, (base..top).log_scale())?;
        draw(chart, base, y_desc, groups, series, log)
    } else {
        draw(
            builder.build_cartesian_2d(x_range, 0.0..top)?,
            0.0,
            y_desc,
            groups,
            series,
            log,
        )
    }
}

/// The axes, bars from `base`, whiskers and legend of one panel.
fn draw<'a, DB, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    base: f64,
    y_desc: &str,
    groups: &[String],
    series: &[Series],
    log: bool,
) -> DrawResult<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x_label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            groups.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let whole = |y: &f64| format!("{y:.0}");
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(groups.len().max(1))
        .x_label_formatter(&x_label)
        .y_desc(y_desc);
    if log {
        mesh.x_label_style(("sans-serif", 11));
    } else {
        mesh.y_label_formatter(&whole);
    }
    mesh.draw()?;
    let width = 0.8 / series.len().max(1) as f64;
    for (k, s) in series.iter().enumerate() {
        let color = s.color;
        let x0 = |i: usize| i as f64 - 0.4 + width * k as f64;
        chart
            .draw_series(s.values.iter().enumerate().filter_map(|(i, v)| {
                v.map(|e| {
                    Rectangle::new(
                        [(x0(i), base), (x0(i) + width * 0.9, e.median)],
                        color.filled(),
                    )
                })
            }))?
            .label(s.label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        chart.draw_series(s.values.iter().enumerate().filter_map(|(i, v)| {
            v.map(|e| {
                let x = x0(i) + width * 0.45;
                PathElement::new(vec![(x, e.lower), (x, e.upper)], BLACK.stroke_width(1))
            })
        }))?;
    }
    chart
        .configure_series_labels()
        .position(if log {
            SeriesLabelPosition::UpperLeft
        } else {
            SeriesLabelPosition::UpperRight
        })
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Renders the chart as an SVG document.
pub fn render(results: &Results) -> Result<String, String> {
    let go = results.go.is_ok();
    let get = |id: String| results.get(&id);
    let go_get = |id: String| if go { get(id) } else { None };

    // SPIFFE mode has no Go counterpart; its figures are in the report's own table.
    let cases = results.cases("identity-rotation");
    let to_us = |e: Option<Estimate>| {
        e.map(|e| Estimate {
            median: e.median / 1e3,
            lower: e.lower / 1e3,
            upper: e.upper / 1e3,
        })
    };
    let load_series = vec![
        Series {
            label: "ours: first handshake after a rotation (resolver)",
            color: OURS,
            values: cases
                .iter()
                .map(|c| to_us(get(format!("identity-rotation/{c}"))))
                .collect(),
        },
        Series {
            label: "Go: tls.X509KeyPair (every handshake)",
            color: GO,
            values: cases
                .iter()
                .map(|c| to_us(go_get(format!("go/x509keypair/{c}"))))
                .collect(),
        },
    ];

    let mut groups = Vec::new();
    let mut ids = Vec::new();
    for key in ["p256", "rsa2048"] {
        for clients in [1, 2] {
            groups.push(format!("{key}, {clients} client(s)"));
            ids.push(format!("{key}/{clients}"));
        }
    }
    let rate = |e: Option<Estimate>| e.map(Estimate::per_second);
    let handshake_series = vec![
        Series {
            label: "Go static",
            color: GO_LIGHT,
            values: ids
                .iter()
                .map(|id| rate(go_get(format!("go/handshake/static/{id}"))))
                .collect(),
        },
        Series {
            label: "Go reload (X509KeyPair)",
            color: GO,
            values: ids
                .iter()
                .map(|id| rate(go_get(format!("go/handshake/reload/{id}"))))
                .collect(),
        },
        Series {
            label: "ours static",
            color: OURS_LIGHT,
            values: ids
                .iter()
                .map(|id| rate(get(format!("handshake/static/{id}"))))
                .collect(),
        },
        Series {
            label: "ours reload (resolver)",
            color: OURS,
            values: ids
                .iter()
                .map(|id| rate(get(format!("handshake/reload/{id}"))))
                .collect(),
        },
    ];

    let go_note = if go { "" } else { " (Go: not measured)" };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1280, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (left, right) = root.split_horizontally(700);
        let labels: Vec<String> = cases.iter().map(|case| short_label(case)).collect();
        bars(
            &left,
            &format!("Identity load per key (p8 PKCS#8, p1 PKCS#1){go_note}"),
            "microseconds (log scale)",
            &labels,
            &load_series,
            true,
        )
        .map_err(|e| format!("chart: {e}"))?;
        bars(
            &right,
            &format!(
                "Whole stack (each side its own server): handshakes/s, default configs{go_note}"
            ),
            "handshakes per second",
            &groups,
            &handshake_series,
            false,
        )
        .map_err(|e| format!("chart: {e}"))?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// A case name short enough for a horizontal axis label: `rsa2048-pkcs1` -> `RSA2k p1`.
fn short_label(case: &str) -> String {
    let (key, format) = case.split_once('-').unwrap_or((case, ""));
    let key = match key {
        "rsa2048" => "RSA2k",
        "rsa3072" => "RSA3k",
        "rsa4096" => "RSA4k",
        "p256" => "P256",
        "p384" => "P384",
        "ed25519" => "Ed25519",
        other => other,
    };
    let format = match format {
        "pkcs8" => "p8",
        "pkcs1" => "p1",
        other => other,
    };
    format!("{key} {format}").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bars_labels_and_text_without_fonts() {
        let mut results = Results {
            go: Ok("go1.23".into()),
            ..Default::default()
        };
        let e = |m: f64| Estimate {
            median: m,
            lower: m * 0.9,
            upper: m * 1.1,
        };
        results
            .estimates
            .insert("identity-rotation/p256-pkcs8".into(), e(30_000.0));
        results
            .estimates
            .insert("go/x509keypair/p256-pkcs8".into(), e(60_000.0));
        results
            .estimates
            .insert("handshake/static/p256/1".into(), e(1_000_000.0));
        results
            .estimates
            .insert("handshake/reload/p256/1".into(), e(1_010_000.0));
        let svg = render(&results).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("P256 p8"));
        assert!(svg.contains("Go: tls.X509KeyPair"));
        assert!(svg.contains("ours reload (resolver)"));
        assert!(svg.contains("<rect"));
        assert!(!svg.contains("not measured"));
    }

    #[test]
    fn short_labels() {
        assert_eq!(short_label("rsa2048-pkcs1"), "RSA2k p1");
        assert_eq!(short_label("p384-sec1"), "P384 sec1");
        assert_eq!(short_label("ed25519-pkcs8"), "Ed25519 p8");
    }

    #[test]
    fn without_go_says_so_and_draws_no_go_bar() {
        let mut results = Results {
            go: Err("no Go".into()),
            ..Default::default()
        };
        let e = Estimate {
            median: 30_000.0,
            lower: 29_000.0,
            upper: 31_000.0,
        };
        results
            .estimates
            .insert("identity-rotation/p256-pkcs8".into(), e);
        results
            .estimates
            .insert("go/x509keypair/p256-pkcs8".into(), e);
        let svg = render(&results).unwrap();
        assert!(svg.contains("Go: not measured"));
    }
}
