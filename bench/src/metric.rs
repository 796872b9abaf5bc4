//! Metrics, their targets, ratios between them, and the two outputs: a
//! table on stdout and a JSON file.

use std::fmt::Write as _;

use serde_json::{Map, Value as Json, json};

use crate::stats::Summary;

/// One reported figure.
pub struct Metric {
    pub name: String,
    pub unit: &'static str,
    pub value: Value,
    /// The goal: the median must be at most this.
    pub target: Option<f64>,
}

pub enum Value {
    /// Repeated runs of ours.
    Summary(Summary),
    /// One figure already reduced elsewhere (the allocator medians).
    Scalar(f64),
    /// An optional measurement that could not be taken, and why.
    NotAvailable(String),
    /// A measurement that should have worked but failed, and why.
    Failed(String),
}

impl Metric {
    pub fn new(name: &str, unit: &'static str, value: Value, target: Option<f64>) -> Self {
        Self {
            name: name.to_owned(),
            unit,
            value,
            target,
        }
    }

    /// The figure compared with the target and used in ratios.
    pub fn median(&self) -> Option<f64> {
        match self.value {
            Value::Summary(s) => Some(s.median),
            Value::Scalar(x) => Some(x),
            Value::NotAvailable(_) | Value::Failed(_) => None,
        }
    }

    pub fn status(&self) -> &'static str {
        match (&self.value, self.median(), self.target) {
            (Value::Failed(_), _, _) => "ERROR",
            (Value::NotAvailable(_), _, _) => "n/a",
            (_, Some(m), Some(t)) if m <= t => "PASS",
            (_, Some(_), Some(_)) => "MISS",
            _ => "",
        }
    }
}

/// `numerator / denominator` of two metrics' medians.
pub struct Ratio {
    pub name: String,
    pub numerator: String,
    pub denominator: String,
    pub value: Option<f64>,
    /// The most the ratio may be.
    pub target: Option<f64>,
}

impl Ratio {
    pub fn of(metrics: &[Metric], name: &str, numerator: &str, denominator: &str) -> Self {
        let median = |n: &str| metrics.iter().find(|m| m.name == n)?.median();
        let value = match (median(numerator), median(denominator)) {
            (Some(a), Some(b)) if b != 0.0 => Some(a / b),
            _ => None,
        };
        Self {
            name: name.to_owned(),
            numerator: numerator.to_owned(),
            denominator: denominator.to_owned(),
            value,
            target: None,
        }
    }

    /// The same ratio with a target (the most it may be).
    pub fn at_most(mut self, target: f64) -> Self {
        self.target = Some(target);
        self
    }

    /// `PASS`, `MISS` or `n/a` against the target; empty without one.
    pub fn status(&self) -> &'static str {
        match (self.value, self.target) {
            (_, None) => "",
            (None, Some(_)) => "n/a",
            (Some(v), Some(t)) if v <= t => "PASS",
            (Some(_), Some(_)) => "MISS",
        }
    }
}

/// A number in at most 9 characters with about 4 significant digits.
fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{x:.3e}")
    } else if a >= 1000.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 0.1 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

/// The human-readable report.
pub fn table(metrics: &[Metric], ratios: &[Ratio]) -> String {
    let w = metrics
        .iter()
        .map(|m| m.name.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:w$}  {:>6}  {:>9}  {:>9}  {:>9}  {:>9}  {:>3}  {:>9}  status",
        "metric", "unit", "median", "min", "p90", "max", "n", "target"
    );
    for m in metrics {
        let target = m.target.map_or(String::new(), |t| format!("<= {}", num(t)));
        let _ = match &m.value {
            Value::Summary(s) => writeln!(
                out,
                "{:w$}  {:>6}  {:>9}  {:>9}  {:>9}  {:>9}  {:>3}  {:>9}  {}",
                m.name,
                m.unit,
                num(s.median),
                num(s.min),
                num(s.p90),
                num(s.max),
                s.n,
                target,
                m.status()
            ),
            Value::Scalar(x) => writeln!(
                out,
                "{:w$}  {:>6}  {:>9}  {:>9}  {:>9}  {:>9}  {:>3}  {:>9}  {}",
                m.name,
                m.unit,
                num(*x),
                "",
                "",
                "",
                "",
                target,
                m.status()
            ),
            Value::NotAvailable(why) | Value::Failed(why) => writeln!(
                out,
                "{:w$}  {:>6}  {:>9}  {:>9}  {:>9}  {:>9}  {:>3}  {:>9}  {}: {why}",
                m.name,
                m.unit,
                "-",
                "",
                "",
                "",
                "",
                target,
                m.status()
            ),
        };
    }
    if !ratios.is_empty() {
        let rw = ratios.iter().map(|r| r.name.len()).max().unwrap_or(0);
        let _ = writeln!(out, "\n{:rw$}  {:>9}", "ratio", "value");
        for r in ratios {
            let v = r.value.map_or("n/a".to_owned(), |v| format!("{}x", num(v)));
            let target = r.target.map_or(String::new(), |t| {
                format!("  <= {}x {}", num(t), r.status())
            });
            let _ = writeln!(
                out,
                "{:rw$}  {v:>9}  ({} / {}){target}",
                r.name, r.numerator, r.denominator
            );
        }
    }
    out
}

/// The machine-readable report:
/// `{"schema": 1, "quick", "qrun", "unix_time", "metrics": {NAME: {...}},
/// "ratios": {NAME: {...}}}`. A metric holds `unit`, `target_max` and
/// `status` (`PASS`, `MISS`, `n/a`, `ERROR`; both null without a target),
/// then either `median`, `min`, `p90`, `max`, `n`, or `value`, or `reason`
/// when it could not be measured.
pub fn json(metrics: &[Metric], ratios: &[Ratio], quick: bool, qrun: &str) -> Json {
    let unix_time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut ms = Map::new();
    for m in metrics {
        let mut o = match &m.value {
            Value::Summary(s) => serde_json::to_value(s)
                .expect("a summary of finite numbers serializes")
                .as_object()
                .cloned()
                .expect("a struct serializes to an object"),
            Value::Scalar(x) => Map::from_iter([("value".to_owned(), json!(x))]),
            Value::NotAvailable(why) | Value::Failed(why) => {
                Map::from_iter([("reason".to_owned(), json!(why))])
            }
        };
        o.insert("unit".to_owned(), json!(m.unit));
        o.insert("target_max".to_owned(), json!(m.target));
        let status = Some(m.status()).filter(|s| !s.is_empty());
        o.insert("status".to_owned(), json!(status));
        ms.insert(m.name.clone(), Json::Object(o));
    }
    let rs: Map<String, Json> = ratios
        .iter()
        .map(|r| {
            (
                r.name.clone(),
                json!({
                    "value": r.value,
                    "numerator": r.numerator,
                    "denominator": r.denominator,
                    "target_max": r.target,
                    "status": Some(r.status()).filter(|s| !s.is_empty()),
                }),
            )
        })
        .collect();
    json!({
        "schema": 1,
        "quick": quick,
        "qrun": qrun,
        "unix_time": unix_time,
        "metrics": ms,
        "ratios": rs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(x: f64) -> Value {
        Value::Summary(Summary::of(&[x]).expect("one sample"))
    }

    #[test]
    fn status_follows_target() {
        assert_eq!(
            Metric::new("a", "ms", summary(5.0), Some(10.0)).status(),
            "PASS"
        );
        assert_eq!(
            Metric::new("a", "ms", summary(11.0), Some(10.0)).status(),
            "MISS"
        );
        assert_eq!(
            Metric::new("a", "ms", Value::Scalar(1.0), None).status(),
            ""
        );
        let na = Metric::new("a", "ms", Value::NotAvailable("x".into()), Some(1.0));
        assert_eq!(na.status(), "n/a");
        let failed = Metric::new("a", "ms", Value::Failed("x".into()), Some(1.0));
        assert_eq!(failed.status(), "ERROR");
    }

    #[test]
    fn ratios_need_both_sides() {
        let ms = [
            Metric::new("a", "ms", summary(6.0), None),
            Metric::new("b", "ms", Value::Scalar(2.0), None),
            Metric::new("c", "ms", Value::NotAvailable("x".into()), None),
        ];
        assert_eq!(Ratio::of(&ms, "r", "a", "b").value, Some(3.0));
        assert_eq!(Ratio::of(&ms, "r", "a", "c").value, None);
        assert_eq!(Ratio::of(&ms, "r", "a", "missing").value, None);
    }

    #[test]
    fn json_has_every_metric() {
        let ms = [
            Metric::new("a", "ms", summary(6.0), Some(10.0)),
            Metric::new("c", "ms", Value::NotAvailable("why".into()), None),
        ];
        let j = json(&ms, &[Ratio::of(&ms, "r", "a", "a")], true, "qrun");
        assert_eq!(j["metrics"]["a"]["median"], json!(6.0));
        assert_eq!(j["metrics"]["a"]["status"], json!("PASS"));
        assert_eq!(j["metrics"]["c"]["reason"], json!("why"));
        assert_eq!(j["ratios"]["r"]["value"], json!(1.0));
    }
}
