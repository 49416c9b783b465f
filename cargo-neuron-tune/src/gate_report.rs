//! The gate's reports: a Markdown summary a reviewer reads in ten seconds (CI step
//! summary), and JUnit XML for CI's test view (each model at a shape on a chip a test
//! case; a regression a `<failure>` with the numbers). Pure functions of a [`Report`].

use crate::gate::{
    call_params, call_times, dims, moved_kernel, pct, tokens, Report, Verdict, MOVED_FOOTNOTE,
    TOP_MOVED,
};
use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;

fn verdict_cell(v: Verdict) -> &'static str {
    match v {
        Verdict::Regression => "❌ regression",
        Verdict::Improvement => "🚀 improvement",
        Verdict::Unchanged => "✅ unchanged",
        Verdict::New => "🆕 new (no baseline)",
        Verdict::NotComparable => "⚠️ not comparable",
        Verdict::Failed => "💥 failed",
    }
}

/// The first line: the outcome in words.
pub fn headline(r: &Report) -> String {
    let c = &r.counts;
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    // An item is a model at a shape on a chip: say "models" only when each is its own model.
    let mut names: Vec<&str> = r.comparisons.iter().map(|c| c.model.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let items = |n: usize| match names.len() {
        m if m == c.models => plural(n, "model", "models"),
        m => format!("{} ({})", plural(n, "model run", "model runs"), plural(m, "model", "models")),
    };
    if c.failed > 0 {
        format!("💥 {} could not be evaluated", plural(c.failed, "model", "models"))
    } else if c.regressions > 0 {
        format!("❌ {} of {}", plural(c.regressions, "regression", "regressions"), items(c.models))
    } else if r.config.strict && c.stale > 0 {
        format!("❌ {} (--strict)", plural(c.stale, "stale tuned entry", "stale tuned entries"))
    } else if r.nothing_compared.is_some() {
        // Against a baseline file, every row new: a wrong --chip, --shape or baseline file,
        // which fails the gate (exit 2); the notes say what the file holds.
        format!("❌ nothing compared: {}", crate::gate::not_compared(c))
    } else if c.models > 0 && c.regressions + c.improvements + c.unchanged == 0 {
        // Every row new or not comparable (against a base revision, or some rows not
        // comparable): the headline must not read as a comparison.
        format!(
            "⚠️ nothing compared: {} (`cargo neuron-tune baseline save` records a baseline)",
            crate::gate::not_compared(c)
        )
    } else {
        let mut s = format!("✅ no regression in {}", items(c.models));
        if c.improvements > 0 {
            s.push_str(&format!(", {}", plural(c.improvements, "improvement", "improvements")));
        }
        s
    }
}

/// Markdown: the headline, a table (model, shape, chip, baseline, current, change,
/// verdict), the calls that moved most with the models they moved, notes and stale entries.
pub fn markdown(r: &Report) -> String {
    let mut s = format!("## neuron-tune gate: {}\n\n", headline(r));
    s.push_str(&format!(
        "Against {}, threshold {} %. Throughput in tokens/s, simulated end to end.\n\n",
        r.config.against, r.config.threshold_pct
    ));
    s.push_str(
        "| model | shape | chip | baseline tok/s | current tok/s | change | verdict |\n\
         |---|---|---|---:|---:|---:|---|\n",
    );
    let num = |v: Option<f64>| v.map_or("-".to_string(), tokens);
    for c in &r.comparisons {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            cell(&c.model),
            cell(&c.shape),
            cell(&c.chip),
            num(c.baseline_tokens_per_s),
            num(c.tokens_per_s),
            c.change_pct.map_or("-".to_string(), pct),
            verdict_cell(c.verdict)
        ));
    }
    if !r.moved.is_empty() {
        s.push_str(&format!(
            "\n**Kernel calls whose time moved most** (of {})\n\n\
             | kernel | call shape | params | µs per call | Δ µs, all calls | models |\n\
             |---|---|---|---:|---:|---|\n",
            r.moved.len()
        ));
        for m in r.moved.iter().take(TOP_MOVED) {
            s.push_str(&format!(
                "| `{}` | {} | {} | {} | {:+.1} | {} |\n",
                cell(&moved_kernel(m)),
                cell(&dims(&m.shape)),
                cell(&call_params(m)),
                call_times(m),
                m.delta_total_us,
                cell(&m.models.join(", "))
            ));
        }
        s.push_str(&format!("\n{MOVED_FOOTNOTE}.\n"));
    }
    let notes = r.all_notes();
    if !notes.is_empty() {
        s.push_str("\n**Notes**\n\n");
        for n in notes {
            s.push_str(&format!("- {n}\n"));
        }
    }
    if !r.stale.is_empty() {
        s.push_str(&format!(
            "\n**Stale tuned entries** ({}): the kernel changed since it was tuned{}\n\n",
            r.stale.len(),
            if r.config.strict { "; --strict fails on them" } else { "" }
        ));
        for n in &r.stale {
            s.push_str(&format!("- {n}\n"));
        }
    }
    without_control_chars(&s)
}

/// The failure message of a regression: the numbers.
pub fn failure_message(r: &Report, c: &crate::gate::Comparison) -> String {
    format!(
        "{} at {} on {}: {} → {} tokens/s ({}, threshold {} %)",
        c.model,
        c.shape,
        c.chip,
        c.baseline_tokens_per_s.map_or("-".into(), tokens),
        c.tokens_per_s.map_or("-".into(), tokens),
        c.change_pct.map_or("-".into(), pct),
        r.config.threshold_pct
    )
}

/// JUnit XML: a testsuite `neuron-tune gate`, a testcase per model, shape and chip; a
/// regression (or, with --strict, a stale tuned entry) a `<failure>`, a model that could not
/// be evaluated an `<error>`, one without a comparable baseline `<skipped>`. Each test case
/// has the `time` JUnit readers show (GitHub, Jenkins, nextest's own reports): the seconds
/// its model took to measure; the suite's and the report's are their sum (a merged run's
/// partitions ran apart, so the sum is the one figure they share).
pub fn junit(r: &Report) -> String {
    // The suite's counts are of the elements the test cases get, one each.
    let count = |kind: CaseKind| r.comparisons.iter().filter(|c| case_kind(r, c) == kind).count();
    let (failures, errors, skipped) =
        (count(CaseKind::Failure), count(CaseKind::Error), count(CaseKind::Skipped));
    let n = r.comparisons.len().to_string();
    let (failures, errors, skipped) =
        (failures.to_string(), errors.to_string(), skipped.to_string());
    let total = junit_time(r.comparisons.iter().map(|c| c.seconds).sum());
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    let io = |e: std::io::Error| e;
    let result: std::io::Result<()> = (|| {
        w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
        w.create_element("testsuites")
            .with_attribute(("name", "cargo neuron-tune gate"))
            .with_attribute(("tests", n.as_str()))
            .with_attribute(("failures", failures.as_str()))
            .with_attribute(("errors", errors.as_str()))
            .with_attribute(("time", total.as_str()))
            .write_inner_content(|w| {
                w.create_element("testsuite")
                    .with_attribute(("name", "neuron-tune gate"))
                    .with_attribute(("tests", n.as_str()))
                    .with_attribute(("failures", failures.as_str()))
                    .with_attribute(("errors", errors.as_str()))
                    .with_attribute(("skipped", skipped.as_str()))
                    .with_attribute(("time", total.as_str()))
                    .write_inner_content(|w| {
                        for c in &r.comparisons {
                            testcase(w, r, c).map_err(io)?;
                        }
                        Ok(())
                    })?;
                Ok(())
            })?;
        Ok(())
    })();
    result.expect("writing XML to memory cannot fail");
    let s = String::from_utf8(w.into_inner()).expect("UTF-8 in, UTF-8 out");
    // Messages carry kernel and model text; XML 1.0 allows no control character but tab and
    // line breaks, escaped or not, and a reporter refuses the whole file over one.
    let mut s = without_control_chars(&s);
    s.push('\n');
    s
}

/// Seconds as JUnit's `time` attribute has them: a decimal, to the millisecond (a negative
/// or not finite figure, which no clock gives, as 0).
fn junit_time(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 { seconds } else { 0.0 };
    format!("{s:.3}")
}

/// What a gate comparison is in JUnit terms: the one element its test case holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CaseKind {
    Failure,
    Error,
    Skipped,
    Passed,
}

fn case_kind(r: &Report, c: &crate::gate::Comparison) -> CaseKind {
    match c.verdict {
        Verdict::Regression => CaseKind::Failure,
        Verdict::Failed => CaseKind::Error,
        _ if r.config.strict && !c.stale.is_empty() => CaseKind::Failure,
        Verdict::New | Verdict::NotComparable => CaseKind::Skipped,
        Verdict::Improvement | Verdict::Unchanged => CaseKind::Passed,
    }
}

/// `s` with every control character but tab and line feed written as `\u{..}`: escape
/// sequences in a kernel's error message must not colour a CI page or break its XML.
fn without_control_chars(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\t' | '\n' => out.push(ch),
            c if c.is_control() || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// A Markdown table cell: `|` escaped (GitHub's tables split on it, inside code spans
/// too) and line breaks as spaces.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\r', '\n'], " ")
}

fn testcase(
    w: &mut Writer<Vec<u8>>,
    r: &Report,
    c: &crate::gate::Comparison,
) -> std::io::Result<()> {
    let name = format!("{} at {} on {}", c.model, c.shape, c.chip);
    let class = format!("neuron-tune.gate.{}", c.model);
    let moved: Vec<String> = c
        .moved
        .iter()
        .take(TOP_MOVED)
        .map(|m| {
            format!(
                "{} at {} ({}): {} µs per call, {:+.1} µs in total",
                moved_kernel(m),
                dims(&m.shape),
                call_params(m),
                call_times(m),
                m.delta_total_us
            )
        })
        .collect();
    let numbers = failure_message(r, c);
    let detail = if moved.is_empty() {
        numbers.clone()
    } else {
        format!("{numbers}\nkernel calls whose time moved most:\n  {}", moved.join("\n  "))
    };
    let time = junit_time(c.seconds);
    let el = w
        .create_element("testcase")
        .with_attribute(("classname", class.as_str()))
        .with_attribute(("name", name.as_str()))
        .with_attribute(("time", time.as_str()));
    match case_kind(r, c) {
        CaseKind::Failure if c.verdict == Verdict::Regression => {
            el.write_inner_content(|w| {
                w.create_element("failure")
                    .with_attribute(("message", numbers.as_str()))
                    .with_attribute(("type", "regression"))
                    .write_text_content(BytesText::new(&detail))?;
                Ok(())
            })?;
        }
        CaseKind::Error => {
            let msg = c.note.clone().unwrap_or_default();
            el.write_inner_content(|w| {
                w.create_element("error")
                    .with_attribute(("message", msg.as_str()))
                    .with_attribute(("type", "evaluation"))
                    .write_empty()?;
                Ok(())
            })?;
        }
        CaseKind::Failure => {
            let msg = format!("{} stale tuned entries (--strict)", c.stale.len());
            let text = c.stale.join("\n");
            el.write_inner_content(|w| {
                w.create_element("failure")
                    .with_attribute(("message", msg.as_str()))
                    .with_attribute(("type", "stale"))
                    .write_text_content(BytesText::new(&text))?;
                Ok(())
            })?;
        }
        CaseKind::Skipped => {
            let msg = c.note.clone().unwrap_or_else(|| c.verdict.as_str().into());
            el.write_inner_content(|w| {
                w.create_element("skipped")
                    .with_attribute(("message", msg.as_str()))
                    .write_empty()?;
                Ok(())
            })?;
        }
        CaseKind::Passed => {
            let text = format!("{}: {detail}", c.verdict.as_str());
            el.write_inner_content(|w| {
                w.create_element("system-out").write_text_content(BytesText::new(&text))?;
                Ok(())
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::judge;
    use crate::gate::tests::{cfg, item, with_crates};
    use quick_xml::events::Event as X;
    use quick_xml::Reader;

    #[test]
    fn a_gate_that_compared_nothing_does_not_read_as_a_pass() {
        // No baseline entry for either model (a wrong --chip or --shape looks like this).
        let r = judge(&[item("qwen3", None, 18.6), item("qwen3_naive", None, 18.6)], &cfg(0.0));
        assert_eq!(
            headline(&r),
            "⚠️ nothing compared: 2 models without a baseline entry (`cargo neuron-tune \
             baseline save` records a baseline)"
        );
        // Against a baseline file that fails the gate (exit 2), and the Markdown says why.
        let file = crate::gate::Config { baseline_hint: Some("b.toml holds".into()), ..cfg(0.0) };
        let r = judge(&[item("qwen3", None, 18.6), item("qwen3_naive", None, 18.6)], &file);
        assert_eq!(headline(&r), "❌ nothing compared: 2 models without a baseline entry");
        let md = markdown(&r);
        assert!(
            md.contains("- nothing compared: 2 models without a baseline entry; b.toml holds\n"),
            "{md}"
        );
        // One compared model is a comparison.
        let r =
            judge(&[item("qwen3", Some(18.6), 18.6), item("qwen3_naive", None, 18.6)], &cfg(0.0));
        assert_eq!(headline(&r), "✅ no regression in 2 models");
        // One model at two shapes is two runs of one model.
        let mut other_shape = item("qwen3", Some(18.6), 18.6);
        other_shape.shape = "small".into();
        let r = judge(&[item("qwen3", Some(18.6), 18.6), other_shape], &cfg(0.0));
        assert_eq!(headline(&r), "✅ no regression in 2 model runs (1 model)");
    }

    #[test]
    fn markdown_lists_each_model_with_baseline_current_change_and_the_moved_call() {
        let r =
            judge(&[item("qwen3", Some(17.6), 18.6), item("qwen3_naive", None, 18.6)], &cfg(0.0));
        let md = markdown(&r);
        assert!(md.starts_with("## neuron-tune gate: ❌ 1 regression of 2 models"), "{md}");
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| qwen3")).collect();
        assert_eq!(rows.len(), 2, "{md}");
        let cells: Vec<&str> = rows[0].split('|').map(str::trim).collect();
        assert_eq!(&cells[1..4], ["qwen3", "tiny", "trn2"]);
        let c = &r.comparisons[0];
        assert_eq!(cells[4], tokens(c.baseline_tokens_per_s.unwrap()));
        assert_eq!(cells[5], tokens(c.tokens_per_s.unwrap()));
        assert_eq!(cells[6], pct(c.change_pct.unwrap()));
        assert!(cells[7].contains("regression"));
        assert!(rows[1].contains("new"), "{md}");
        // Per call with the run's 1 µs launch overhead; the footnote says what is summed.
        assert!(
            md.contains("| `rope` | heads=8, tokens=256 | bufs=2 → bufs=1 | 18.6 → 19.6 |"),
            "{md}"
        );
        assert!(md.contains("summed over the models listed."), "{md}");
    }

    /// The `testsuite` element's count attributes of a JUnit report.
    fn suite_counts(xml: &str) -> [String; 4] {
        let mut reader = Reader::from_str(xml);
        loop {
            match reader.read_event().unwrap() {
                X::Start(e) if e.name().0 == "testsuite" => {
                    return ["tests", "failures", "errors", "skipped"].map(|k| {
                        let a = e.try_get_attribute(k).unwrap().unwrap();
                        a.value.into_owned()
                    });
                }
                X::Eof => panic!("no testsuite in {xml}"),
                _ => {}
            }
        }
    }

    #[test]
    fn junit_counts_each_test_case_by_the_one_element_it_holds() {
        // Under --strict a new model with stale entries is a failure, not also a skip; a
        // failed evaluation is an error.
        let mut failed = item("broken", Some(17.6), 17.6);
        failed.current = None;
        failed.error = Some("could not build".into());
        let items = [item("stale_new", None, 18.6), item("new", None, 18.6), failed];
        let mut r = judge(&items, &crate::gate::Config { strict: true, ..cfg(0.0) });
        r.comparisons[0].stale = vec!["rope bufs=2 at qwen3_q".into()];
        let xml = junit(&r);
        assert_eq!(suite_counts(&xml), ["3", "1", "1", "1"], "{xml}");
        assert_eq!(xml.matches("<failure").count(), 1, "{xml}");
        assert_eq!(xml.matches("<error").count(), 1, "{xml}");
        assert_eq!(xml.matches("<skipped").count(), 1, "{xml}");
    }

    /// Every test case has a `time` in seconds (a non-negative decimal) and the suite, and
    /// the report, the sum of theirs; a model not measured (its evaluation failed before
    /// any time was taken, a results file without times) takes 0.
    #[test]
    fn junit_gives_each_test_case_its_time_and_the_suite_their_sum() {
        let mut timed = item("qwen3", Some(17.6), 18.6);
        timed.seconds = Some(1.25);
        let mut other = item("qwen3_naive", Some(17.6), 17.6);
        other.seconds = Some(0.5004);
        let untimed = item("new", None, 18.6);
        let xml = junit(&judge(&[timed, other, untimed], &cfg(0.0)));
        let mut reader = Reader::from_str(&xml);
        let mut times: Vec<(String, String)> = Vec::new();
        loop {
            match reader.read_event().unwrap() {
                X::Eof => break,
                X::Start(e) | X::Empty(e) => {
                    let name = e.name().0.to_string();
                    if ["testsuites", "testsuite", "testcase"].contains(&name.as_str()) {
                        let a = e.try_get_attribute("time").unwrap();
                        let a = a.unwrap_or_else(|| panic!("no time on <{name}> in {xml}"));
                        times.push((name, a.value.into_owned()));
                    }
                }
                _ => {}
            }
        }
        let expected = [
            ("testsuites", "1.750"),
            ("testsuite", "1.750"),
            ("testcase", "1.250"),
            ("testcase", "0.500"),
            ("testcase", "0.000"),
        ];
        let expected: Vec<(String, String)> =
            expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        assert_eq!(times, expected, "{xml}");
        for (_, t) in &times {
            assert!(t.parse::<f64>().is_ok_and(|t| t >= 0.0), "{t}");
        }
        assert_eq!(junit_time(-1.0), "0.000");
        assert_eq!(junit_time(f64::NAN), "0.000");
    }

    #[test]
    fn control_characters_of_kernel_text_are_escaped_in_junit_and_markdown() {
        // XML 1.0 has no escape for ESC or U+0001: a reporter refuses the file over one.
        let mut failed = item("broken", Some(17.6), 17.6);
        failed.current = None;
        failed.error = Some("weird \u{1b}[31mred\u{1b}[0m \u{1} <x>".into());
        let r = judge(&[failed], &cfg(0.0));
        for text in [junit(&r), markdown(&r)] {
            assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
            assert!(text.contains("weird \\u{1b}[31mred\\u{1b}[0m \\u{1}"), "{text}");
        }
    }

    /// A model calling two crates' `rope`: the one that moved is named by its package in
    /// the Markdown table and in the JUnit failure, where its name alone could be either.
    #[test]
    fn a_moved_kernel_whose_name_another_crate_shares_is_named_by_its_package() {
        let mut i = item("qwen3", Some(17.6), 17.6);
        i.base = i.base.map(|b| with_crates(b, Some(5.0)));
        i.current = i.current.map(|c| with_crates(c, Some(9.0)));
        let r = judge(&[i], &cfg(0.0));
        assert_eq!(r.comparisons[0].verdict, Verdict::Regression);
        let md = markdown(&r);
        assert!(md.contains("| `rope (other-kernels)` | heads=8, tokens=256 |"), "{md}");
        assert!(!md.contains("fixture-kernels"), "the other `rope` did not move: {md}");
        let xml = junit(&r);
        assert!(xml.contains("rope (other-kernels) at heads=8, tokens=256 (bufs=2)"), "{xml}");
    }

    #[test]
    fn a_pipe_in_a_name_stays_inside_its_markdown_cell() {
        let mut odd = item("qwen3", None, 18.6);
        odd.shape = "t|x".into();
        let md = markdown(&judge(&[odd], &cfg(0.0)));
        let row = md.lines().find(|l| l.starts_with("| qwen3")).unwrap();
        // Seven cells: eight pipes that are not escaped.
        let unescaped = row.match_indices('|').filter(|(i, _)| !row[..*i].ends_with('\\')).count();
        assert_eq!(unescaped, 8, "{row}");
        assert!(row.contains("| t\\|x |"), "{row}");
    }

    #[test]
    fn junit_parses_and_a_regression_is_a_failure_with_the_numbers() {
        let mut failed = item("broken", Some(17.6), 17.6);
        failed.current = None;
        failed.error = Some("call <rope> & co failed".into());
        let items =
            [item("qwen3", Some(17.6), 18.6), item("qwen3_naive", Some(17.6), 17.6), failed];
        let r = judge(&items, &cfg(0.0));
        let xml = junit(&r);
        let mut reader = Reader::from_str(&xml);
        let (mut cases, mut failures, mut errors) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            match reader.read_event().unwrap() {
                X::Eof => break,
                X::Start(e) | X::Empty(e) => {
                    let attr = |k: &str| {
                        e.try_get_attribute(k).unwrap().map(|a| {
                            a.normalized_value(quick_xml::XmlVersion::Explicit1_0)
                                .unwrap()
                                .into_owned()
                        })
                    };
                    match e.name().0 {
                        "testcase" => cases.push(attr("name").unwrap()),
                        "failure" => failures.push(attr("message").unwrap()),
                        "error" => errors.push(attr("message").unwrap()),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        assert_eq!(
            cases,
            ["qwen3 at tiny on trn2", "qwen3_naive at tiny on trn2", "broken at tiny on trn2"]
        );
        assert_eq!(failures.len(), 1);
        let c = &r.comparisons[0];
        assert!(failures[0].contains(&tokens(c.baseline_tokens_per_s.unwrap())), "{}", failures[0]);
        assert!(failures[0].contains(&tokens(c.tokens_per_s.unwrap())), "{}", failures[0]);
        assert_eq!(errors, ["call <rope> & co failed"]);
    }
}
