//! Labels and the equality-based selectors Services use to pick their Pods.

/// `metadata.labels`, sorted by key.
///
/// A boxed slice of pairs rather than a `BTreeMap`: a Pod or Service usually has a handful of
/// labels, and a map would allocate a B-tree node (~500 bytes) for each of them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Labels(Box<[(Box<str>, Box<str>)]>);

impl Labels {
    /// Labels from `(key, value)` pairs; a key given twice keeps its last value, as in a map.
    pub fn new<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        let mut v: Vec<(Box<str>, Box<str>)> = pairs
            .into_iter()
            .map(|(k, v)| (Box::from(k.as_ref()), Box::from(v.as_ref())))
            .collect();
        // Stable sort, then keep the last of equal keys.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Box<str>, Box<str>)> = Vec::with_capacity(v.len());
        for pair in v {
            match out.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => out.push(pair),
            }
        }
        Self(out.into_boxed_slice())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    /// The pairs, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// True when there is no label.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A Service's `spec.selector`: a Pod matches when it carries every one of these labels with
/// the same value (`labels.SelectorFromSet` upstream).
///
/// Only a non-empty selector exists: a Service without one (or with `selector: {}`, which the API
/// server stores as no selector at all, since Go drops empty maps) gets no endpoints from Pods,
/// as upstream's EndpointSlice controller leaves such Services alone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Selector(Labels);

impl Selector {
    /// The selector of `labels`; `None` when there is none.
    pub fn new(labels: Labels) -> Option<Self> {
        (!labels.is_empty()).then_some(Self(labels))
    }

    /// True when `labels` has every pair of the selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// The selector's pairs, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter()
    }
}

impl std::fmt::Display for Selector {
    /// `kubectl`'s spelling: `app=web,tier=front`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (k, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_matches_pods_with_every_pair_and_maybe_more() {
        let selector = Selector::new(Labels::new([("app", "web")])).expect("a selector");
        assert!(selector.matches(&Labels::new([("app", "web"), ("tier", "front")])));
        assert!(!selector.matches(&Labels::new([("app", "db")])));
        assert!(!selector.matches(&Labels::default()));
        assert_eq!(selector.to_string(), "app=web");
    }

    #[test]
    fn an_empty_selector_is_no_selector() {
        assert_eq!(Selector::new(Labels::default()), None);
    }

    #[test]
    fn labels_are_sorted_and_the_last_value_of_a_key_wins() {
        let labels = Labels::new([("b", "1"), ("a", "2"), ("b", "3")]);
        assert_eq!(labels.iter().collect::<Vec<_>>(), [("a", "2"), ("b", "3")]);
        assert_eq!(labels.get("b"), Some("3"));
        assert_eq!(labels.get("c"), None);
    }
}
