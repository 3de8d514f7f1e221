//! An [`Evaluation`] as people and scripts read it: a text table, JSON, and a self-contained HTML
//! page with a chart of score against compression and, per probe, what each strategy kept.

use std::fmt::Write as _;

use super::{Evaluation, Judged, ProbeKind, Scores, Verdict};

/// A share as a percentage, or `-` when there is none.
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_owned(), |s| format!("{:.0}%", s * 100.0))
}

/// A judge's overall mean grade (or `-`), and how many probes it could not grade.
fn grade(judged: Option<Judged>) -> String {
    let Some(judged) = judged else { return "-".to_owned() };
    let mut text = judged.scores.overall.map_or_else(|| "-".to_owned(), |g| format!("{g:.2}/5"));
    if judged.unfit > 0 {
        let _ = write!(text, " ({} did not fit)", judged.unfit);
    }
    if judged.no_grade > 0 {
        let _ = write!(text, " ({} without a grade)", judged.no_grade);
    }
    text
}

/// The text table: one row per strategy (with a judge, also its overall mean grade).
pub fn table(evaluation: &Evaluation) -> String {
    let probes = evaluation.probes.len();
    let mut out = format!(
        "{} transcript(s), {probes} probes, window {} tokens, summarizer {}\n",
        evaluation.transcripts.len(),
        evaluation.window,
        evaluation.summarizer
    );
    let judged = evaluation.strategies.iter().any(|s| s.judged.is_some());
    let _ = write!(
        out,
        "{:<20} {:>9} {:>9} {:>6} {:>4} {:>8} {:>8} {:>6} {:>6} {:>12} {:>7}",
        "strategy",
        "tokens",
        "after",
        "ratio",
        "fits",
        "seconds",
        "artifact",
        "recall",
        "intent",
        "continuation",
        "overall"
    );
    out.push_str(if judged { "  judged\n" } else { "\n" });
    for s in &evaluation.strategies {
        let Scores { artifact, recall, intent, continuation, overall } = s.scores;
        let _ = writeln!(
            out,
            "{:<20} {:>9} {:>9} {:>5.2}x {:>4} {:>8.1} {:>8} {:>6} {:>6} {:>12} {:>7}",
            s.name,
            s.tokens_before,
            s.tokens_after,
            s.compression,
            if s.fits_window { "yes" } else { "no" },
            s.seconds,
            percent(artifact),
            percent(recall),
            percent(intent),
            percent(continuation),
            percent(overall)
        );
        if judged {
            out.pop();
            let _ = writeln!(out, "  {}", grade(s.judged));
        }
    }
    out
}

/// The JSON object of `phosphor eval --json` (pretty-printed).
pub fn json(evaluation: &Evaluation) -> String {
    serde_json::to_string_pretty(evaluation).unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"))
}

/// `text` safe inside HTML text and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Colours of the strategies' points, in order (repeating).
const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#ff7f0e", "#9467bd", "#2ca02c", "#8c564b"];

const CHART_WIDTH: f64 = 640.0;
const CHART_HEIGHT: f64 = 360.0;
const MARGIN: f64 = 48.0;

/// The chart: overall score (y, 0 to 100%) against compression (x, from 1x), one point per strategy.
fn chart(evaluation: &Evaluation) -> String {
    let max_x = evaluation.strategies.iter().map(|s| s.compression).fold(1.0_f64, f64::max).ceil().max(2.0);
    let x = |ratio: f64| MARGIN + (ratio - 1.0) / (max_x - 1.0) * (CHART_WIDTH - 2.0 * MARGIN);
    let y = |share: f64| CHART_HEIGHT - MARGIN - share * (CHART_HEIGHT - 2.0 * MARGIN);
    let mut svg = format!(
        "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{CHART_WIDTH}\" height=\"{CHART_HEIGHT}\" \
         viewBox=\"0 0 {CHART_WIDTH} {CHART_HEIGHT}\" role=\"img\" aria-label=\"overall score against compression\">\n"
    );
    let (left, right, top, bottom) = (MARGIN, CHART_WIDTH - MARGIN, MARGIN, CHART_HEIGHT - MARGIN);
    let _ =
        writeln!(svg, "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"#444\"/>");
    let _ = writeln!(svg, "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#444\"/>");
    for tick in 0..=4 {
        let share = f64::from(tick) / 4.0;
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{:.0}%</text>",
            left - 6.0,
            y(share) + 4.0,
            share * 100.0
        );
    }
    let steps = max_x as u32 - 1;
    for tick in 0..=steps {
        let ratio = 1.0 + f64::from(tick);
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{ratio:.0}x</text>",
            x(ratio),
            bottom + 16.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">compression (tokens before / after)</text>",
        (left + right) / 2.0,
        CHART_HEIGHT - 8.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"14\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 {:.1})\">overall score</text>",
        (top + bottom) / 2.0,
        (top + bottom) / 2.0
    );
    for (index, s) in evaluation.strategies.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let (cx, cy) = (x(s.compression), y(s.scores.overall.unwrap_or(0.0)));
        let _ = writeln!(
            svg,
            "<g class=\"point\" data-strategy=\"{name}\"><circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"6\" fill=\"{colour}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" fill=\"{colour}\">{name}</text></g>",
            cx + 9.0,
            cy - 8.0 - 12.0 * (index % 2) as f64,
            name = escape(s.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The self-contained HTML report.
pub fn html(evaluation: &Evaluation) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>phosphor eval</title>\n<style>\n\
         body{font-family:system-ui,sans-serif;margin:2em;max-width:80em;color:#222}\n\
         table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:right}\n\
         td.text,th.text{text-align:left}td.kept{background:#d8f0d8}td.partial{background:#fff2c4}td.lost{background:#f6d2d2}\n\
         code{font-size:90%}\n</style>\n</head>\n<body>\n<h1>What each compaction strategy keeps</h1>\n",
    );
    let _ = writeln!(
        out,
        "<p>{} transcript(s), {} probes, window {} tokens, summarizer <code>{}</code>. A probe's score is the share \
         of its key strings the context holds after the strategy ran.</p>",
        evaluation.transcripts.len(),
        evaluation.probes.len(),
        evaluation.window,
        escape(&evaluation.summarizer)
    );
    out.push_str(&chart(evaluation));
    out.push_str("<h2>Strategies</h2>\n<table id=\"strategies\">\n<tr><th class=\"text\">strategy</th><th>tokens before</th>\
                  <th>after</th><th>compression</th><th>fits</th><th>seconds</th>");
    for kind in ProbeKind::ALL {
        let _ = write!(out, "<th>{}</th>", kind.as_str());
    }
    let judged = evaluation.strategies.iter().any(|s| s.judged.is_some());
    out.push_str(if judged {
        "<th>overall</th><th>judged (0-5)</th></tr>\n"
    } else {
        "<th>overall</th></tr>\n"
    });
    for s in &evaluation.strategies {
        let _ = write!(
            out,
            "<tr data-strategy=\"{name}\"><td class=\"text\">{name}</td><td>{}</td><td>{}</td><td>{:.2}x</td><td>{}</td><td>{:.1}</td>",
            s.tokens_before,
            s.tokens_after,
            s.compression,
            if s.fits_window { "yes" } else { "no" },
            s.seconds,
            name = escape(s.name)
        );
        for kind in ProbeKind::ALL {
            let _ = write!(out, "<td>{}</td>", percent(s.scores.get(kind)));
        }
        let _ = write!(out, "<td>{}</td>", percent(s.scores.overall));
        if judged {
            let _ = write!(out, "<td>{}</td>", grade(s.judged));
        }
        out.push_str("</tr>\n");
    }
    out.push_str(
        "</table>\n<h2>Transcripts</h2>\n<table id=\"transcripts\">\n<tr><th class=\"text\">transcript</th>\
                  <th>messages</th><th>tokens</th><th>probes</th></tr>\n",
    );
    for t in &evaluation.transcripts {
        let _ = writeln!(
            out,
            "<tr><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&t.source),
            t.messages,
            t.tokens,
            t.probes
        );
    }
    out.push_str("</table>\n<h2>Probes: what each strategy kept</h2>\n<table id=\"probes\">\n<tr><th class=\"text\">transcript</th>\
                  <th class=\"text\">kind</th><th class=\"text\">question</th><th class=\"text\">key strings</th>");
    for s in &evaluation.strategies {
        let _ = write!(out, "<th>{}</th>", escape(s.name));
    }
    out.push_str("</tr>\n");
    for p in &evaluation.probes {
        let source = evaluation.transcripts.get(p.transcript).map_or("", |t| t.source.as_str());
        let keys: Vec<String> = p.probe.keys.iter().map(|k| format!("<code>{}</code>", escape(k))).collect();
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td>",
            escape(source),
            p.probe.kind.as_str(),
            escape(&p.probe.question),
            keys.join(" ")
        );
        for s in &evaluation.strategies {
            let share = p.kept.get(s.name).copied();
            let class = match share {
                Some(v) if v >= 1.0 => "kept",
                Some(v) if v > 0.0 => "partial",
                _ => "lost",
            };
            let verdict = match p.judged.get(s.name) {
                Some(Verdict::Grade(g)) => format!(" · {g}/5"),
                Some(Verdict::Unfit) => " · did not fit".to_owned(),
                Some(Verdict::NoGrade(_)) => " · no grade".to_owned(),
                None => String::new(),
            };
            let _ = write!(out, "<td class=\"{class}\">{}{}</td>", percent(share), escape(&verdict));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n</body>\n</html>\n");
    out
}
