//! The families a program emits, declared once: name, type, labels and help text.
//!
//! A program lists its families with [`crate::metric_families!`] and wraps the list in a [`Catalog`];
//! the [`crate::Exposition`] takes HELP and TYPE from there, and a family's position in the
//! catalog ([`Slot`]) is how a sample names its family on the hot path, without hashing a name.

use std::collections::HashMap;
use std::sync::OnceLock;

/// Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric family.
#[derive(Debug, Clone, Copy)]
pub struct MetricDef {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

/// Declares a `const` per family name and `FAMILIES`, every family in declaration order:
/// `UP = "x_up", Gauge, ["target"], "Help text.";`
#[macro_export]
macro_rules! metric_families {
    ($( $ident:ident = $name:literal, $kind:ident, [$($label:literal),*], $help:literal; )*) => {
        $( pub const $ident: &str = $name; )*
        /// All families, in declaration order.
        pub const FAMILIES: &[$crate::MetricDef] = &[
            $( $crate::MetricDef {
                name: $name,
                kind: $crate::Kind::$kind,
                labels: &[$($label),*],
                help: $help,
            }, )*
        ];
    };
}

/// A family's position in its catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(pub(crate) usize);

/// Series a histogram family exposes besides its name.
const HISTOGRAM_SERIES: [&str; 3] = ["_bucket", "_sum", "_count"];

/// A program's families, indexed by name on first use.
pub struct Catalog {
    defs: &'static [MetricDef],
    index: OnceLock<HashMap<&'static str, usize>>,
}

impl Catalog {
    pub const fn new(defs: &'static [MetricDef]) -> Catalog {
        Catalog {
            defs,
            index: OnceLock::new(),
        }
    }

    /// Every family, in declaration order.
    pub fn defs(&self) -> &'static [MetricDef] {
        self.defs
    }

    /// The index of `name` in the catalog, if it is one of its families.
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        let index = self.index.get_or_init(|| {
            self.defs
                .iter()
                .enumerate()
                .map(|(i, d)| (d.name, i))
                .collect()
        });
        index.get(name).copied()
    }

    /// The slot of `name` (a catalog constant). Panics on a name that is not in the catalog: a
    /// programming error the tests catch at once.
    pub fn slot(&self, name: &str) -> Slot {
        Slot(
            self.position(name)
                .unwrap_or_else(|| panic!("metric family {name} is not in the catalog")),
        )
    }

    /// Look a family up by name.
    pub fn find(&self, name: &str) -> Option<&'static MetricDef> {
        self.position(name).map(|i| &self.defs[i])
    }

    /// The family a series name (as used in PromQL) belongs to: the family itself, or a
    /// histogram's `_bucket` / `_sum` / `_count` series.
    pub fn family_of(&self, series: &str) -> Option<&'static MetricDef> {
        self.find(series).or_else(|| {
            HISTOGRAM_SERIES.iter().find_map(|suffix| {
                series
                    .strip_suffix(suffix)
                    .and_then(|n| self.find(n))
                    .filter(|d| d.kind == Kind::Histogram)
            })
        })
    }
}

#[cfg(test)]
pub(crate) mod test_catalog {
    //! A small catalog for this crate's tests.
    crate::metric_families! {
        UP = "demo_up", Gauge, ["target"], "1 when up.";
        REQUESTS = "demo_requests_total", Counter, ["target", "method"], "Requests.";
        TTL = "demo_ttl_seconds", Gauge, [], "A value in seconds.";
        LATENCY = "demo_latency_seconds", Histogram, ["target"], "Latency.";
    }
    pub static CATALOG: super::Catalog = super::Catalog::new(FAMILIES);
}

#[cfg(test)]
mod tests {
    use super::test_catalog::*;

    #[test]
    fn series_map_to_their_family() {
        assert_eq!(CATALOG.family_of(UP).map(|d| d.name), Some(UP));
        assert_eq!(
            CATALOG
                .family_of("demo_latency_seconds_bucket")
                .map(|d| d.name),
            Some(LATENCY)
        );
        assert!(
            CATALOG.family_of("demo_up_count").is_none(),
            "only histograms have _count series"
        );
        assert!(CATALOG.family_of("demo_nope").is_none());
        assert_eq!(CATALOG.slot(REQUESTS), super::Slot(1));
    }
}
