//! Projection time against conversation length: 1k, 3k, 10k, 30k and 100k turns at 8 KiB,
//! 128 KiB and 1 MiB byte windows, with a warm size cache (the long-lived `Store` case) and a
//! cold one (a fresh process), beside the naive rule (serialize every candidate suffix) up to
//! 10k turns, where it still finishes in seconds. Every naive body is checked to equal ours.
//! Prints a Markdown table and the slope of log(time) against log(turns) from 1k to 100k, and
//! draws a log-log PNG.
//!
//! ```text
//! cargo run --release -p ctxlog-bench --bin projection_scaling [-- OUT.png]
//! ```
//!
//! The plot's labels use DejaVu Sans (`/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf`,
//! Debian's `fonts-dejavu-core`, or `CTXLOG_PLOT_FONT`); without it the plot is drawn
//! without text.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use ctxlog_bench::{conversation, with_peak_rss};
use ctxlog_projection::naive::project_naive;
use ctxlog_projection::{ProjectionRequest, SizeCache, SliceHistory, project};
use plotters::prelude::*;

const TURNS: [usize; 5] = [1_000, 3_000, 10_000, 30_000, 100_000];
const WINDOWS: [(u64, &str); 3] = [
    (8 * 1024, "8 KiB"),
    (128 * 1024, "128 KiB"),
    (1024 * 1024, "1 MiB"),
];
const NAIVE_MAX_TURNS: usize = 10_000;

fn request(max_bytes: u64) -> Result<ProjectionRequest> {
    let mut b = ProjectionRequest::builder();
    b.model("gpt-4o-mini")
        .system("You are a helpful assistant.")
        .input("What is the deployment window now?")
        .notice(true)
        .max_bytes(max_bytes);
    Ok(b.build()?)
}

/// Median of `reps` timed calls.
fn median_of(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
        .get(samples.len() / 2)
        .copied()
        .ok_or_else(|| anyhow!("no repetitions"))
}

struct Point {
    turns: usize,
    window: usize,
    kept: u64,
    warm: f64,
    cold: f64,
    naive: Option<f64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Least-squares slope of ln(time) against ln(turns).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x.ln(), b + y.ln()));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        let dx = x.ln() - mx;
        (a + dx * (y.ln() - my), b + dx * dx)
    });
    num / den
}

fn main() -> Result<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "docs/img/projection_scaling.png".to_owned());
    let mut points = Vec::new();
    println!(
        "projection_scaling: openai-chat, turns policy, notice on, byte budgets; medians of 21 warm \
         and 5 cold calls, 1 naive call (ms); peak RSS: the process while ctxlog's calls of the \
         row ran (the generated conversation included)"
    );
    println!();
    println!(
        "| turns | window | kept turns | warm cache | cold cache | naive | naive/cold | equal | peak RSS (ctxlog) |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---|---:|");
    for turns in TURNS {
        let events = conversation(turns);
        let history = SliceHistory::new(&events);
        let mut warm_cache = SizeCache::new();
        for (window, (budget, label)) in WINDOWS.iter().enumerate() {
            let req = request(*budget)?;
            // Peak RSS while ctxlog projects (the conversation already in memory counts).
            let (timed, rss) = with_peak_rss(|| -> Result<_> {
                let ours = project(&history, &req, &mut warm_cache)?;
                let warm = median_of(21, || {
                    project(&history, &req, &mut warm_cache)?;
                    Ok(())
                })?;
                let cold = median_of(5, || {
                    project(&history, &req, &mut SizeCache::new())?;
                    Ok(())
                })?;
                Ok((ours, warm, cold))
            });
            let (ours, warm, cold) = timed?;
            let naive = if turns <= NAIVE_MAX_TURNS {
                let start = Instant::now();
                let body = project_naive(&history, &req)?;
                let took = start.elapsed();
                ensure!(
                    body == ours.body,
                    "naive and projector differ at {turns} turns, {label}"
                );
                Some(ms(took))
            } else {
                None
            };
            let point = Point {
                turns,
                window,
                kept: ours.report.turns.kept as u64,
                warm: ms(warm),
                cold: ms(cold),
                naive,
            };
            println!(
                "| {turns} | {label} | {} | {:.3} | {:.3} | {} | {} | {} | {rss:.1} MiB |",
                point.kept,
                point.warm,
                point.cold,
                naive.map_or("not run".to_owned(), |n| format!("{n:.1}")),
                naive.map_or("-".to_owned(), |n| format!("{:.0}×", n / point.cold)),
                if naive.is_some() { "yes" } else { "-" },
            );
            points.push(point);
        }
    }
    println!();
    println!("slope of log(time) against log(turns), 1k to 100k turns (0 = flat, 1 = linear):");
    for (window, (_, label)) in WINDOWS.iter().enumerate() {
        let series = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<(f64, f64)> {
            points
                .iter()
                .filter(|p| p.window == window)
                .filter_map(|p| f(p).map(|t| (p.turns as f64, t)))
                .collect()
        };
        let warm = series(&|p| Some(p.warm));
        let cold = series(&|p| Some(p.cold));
        let naive = series(&|p| p.naive);
        let ratio = |s: &[(f64, f64)]| match (s.first(), s.last()) {
            (Some(a), Some(b)) => b.1 / a.1,
            _ => f64::NAN,
        };
        println!(
            "  {label}: warm {:.2} (100k/1k = {:.2}×), cold {:.2} (100k/1k = {:.2}×), naive {:.2} (1k to 10k)",
            slope(&warm),
            ratio(&warm),
            slope(&cold),
            ratio(&cold),
            slope(&naive),
        );
    }
    draw(&out, &points)?;
    println!();
    println!("plot: {out}");
    Ok(())
}

fn draw(path: &str, points: &[Point]) -> Result<()> {
    let text = ctxlog_bench::plot_font()?;
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let root = BitMapBackend::new(path, (1000, 680)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let all = points
        .iter()
        .flat_map(|p| [Some(p.warm), Some(p.cold), p.naive])
        .flatten();
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(a, b), t| (a.min(t), b.max(t)));
    let mut chart = ChartBuilder::on(&root);
    chart.margin(20);
    if text {
        chart
            .caption(
                "ctxlog projection time vs conversation length (log-log)",
                ("sans-serif", 24),
            )
            .x_label_area_size(50)
            .y_label_area_size(70);
    }
    let mut chart = chart
        .build_cartesian_2d(
            (800f64..130_000f64).log_scale(),
            (lo / 2.0..hi * 2.0).log_scale(),
        )
        .map_err(|e| anyhow!("{e}"))?;
    if text {
        chart
            .configure_mesh()
            .x_desc("turns in the conversation")
            .y_desc("ms per projection")
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    } else {
        chart
            .configure_mesh()
            .disable_x_mesh()
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    }
    let colors = [BLUE, GREEN, RED];
    for (window, (_, label)) in WINDOWS.iter().enumerate() {
        let color = colors[window % colors.len()];
        let series = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<(f64, f64)> {
            points
                .iter()
                .filter(|p| p.window == window)
                .filter_map(|p| f(p).map(|t| (p.turns as f64, t)))
                .collect()
        };
        for (name, data, style) in [
            (
                "warm cache",
                series(&|p| Some(p.warm)),
                color.stroke_width(3),
            ),
            (
                "cold cache",
                series(&|p| Some(p.cold)),
                color.stroke_width(1),
            ),
            (
                "naive rule",
                series(&|p| p.naive),
                color.mix(0.4).stroke_width(6),
            ),
        ] {
            let drawn = chart
                .draw_series(LineSeries::new(data.clone(), style))
                .map_err(|e| anyhow!("{e}"))?;
            if text {
                drawn
                    .label(format!("{label}, {name}"))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            }
            chart
                .draw_series(
                    data.iter()
                        .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
                )
                .map_err(|e| anyhow!("{e}"))?;
        }
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
