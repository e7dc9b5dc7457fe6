//! `/metrics`: valid Prometheus text format holding kiln's series.

use super::*;

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let base = server();
    still_answers(base).await;
    let text = get_text(base, "/metrics").await;
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut p = rest.splitn(3, ' ');
            let (kw, name, tail) = (
                p.next().unwrap(),
                p.next().unwrap_or(""),
                p.next().unwrap_or(""),
            );
            assert!(valid_name(name), "{line}");
            match kw {
                "HELP" => assert!(!tail.is_empty(), "{line}"),
                "TYPE" => assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&tail),
                    "{line}"
                ),
                _ => panic!("bad comment line {line}"),
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        assert!(
            value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
            "{line}"
        );
        let name = match series.split_once('{') {
            Some((n, labels)) => {
                let labels = labels.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                for l in labels.split(',') {
                    let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{line}"));
                    assert!(
                        valid_name(k) && v.starts_with('"') && v.ends_with('"') && v.len() >= 2,
                        "{line}"
                    );
                }
                n
            }
            None => series,
        };
        assert!(valid_name(name), "{line}");
    }
    for name in [
        "kiln_num_requests_running",
        "kiln_num_requests_waiting",
        "kiln_kv_blocks_used",
        "kiln_kv_blocks_free",
        "kiln_kv_blocks_cached",
        "kiln_prefix_cache_queries_total",
        "kiln_prefix_cache_hits_total",
        "kiln_num_preemptions_total",
        "kiln_kv_blocks_window_released_total",
        "kiln_spec_decode_num_draft_tokens_total",
        "kiln_spec_decode_num_accepted_tokens_total",
        "kiln_cpu_blocks_stored_total",
        "kiln_cpu_blocks_restored_total",
        "kiln_generation_tokens_total",
        "kiln_time_to_first_token_seconds_count",
        "kiln_time_per_output_token_seconds_count",
    ] {
        metric(&text, name);
    }
    assert!(metric(&text, "kiln_generation_tokens_total") > 0.0);
    assert!(metric(&text, "kiln_time_to_first_token_seconds_count") > 0.0);
    assert!(text.contains("kiln_request_success_total{finished_reason=\"length\"}"));
}
