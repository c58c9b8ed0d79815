//! What the kernel holds, compared with what Ferry would program: for a traced destination
//! (`ferry explain --live`, [`LiveReport`]) and for every service (`ferry status`,
//! [`KernelReport`]). Each mode reads its own objects back (see the mode table).

use std::collections::BTreeMap;

use ferry_model::ServiceName;

/// What the kernel holds for the traced destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveReport {
    /// Ferry's table exists in this network namespace.
    pub table_present: bool,
    /// Objects compared.
    pub checked: usize,
    /// Where the kernel differs from what Ferry would program.
    pub differences: Vec<String>,
    /// The endpoints the kernel would DNAT this destination to (from its endpoint maps).
    pub endpoints: Vec<String>,
}

impl LiveReport {
    /// The report when the mode's objects are not in this network namespace at all.
    pub fn absent(what: &str) -> Self {
        Self {
            table_present: false,
            checked: 0,
            differences: vec![format!("{what} is not in this network namespace")],
            endpoints: Vec::new(),
        }
    }

    /// The report for people.
    pub fn to_text(&self) -> String {
        let mut out = String::from("kernel (this network namespace):\n");
        if self.differences.is_empty() {
            out.push_str(&format!(
                "   agrees with the compiled rules ({} objects checked)\n",
                self.checked
            ));
        }
        for d in &self.differences {
            out.push_str(&format!("   DIFFERS: {d}\n"));
        }
        if self.table_present {
            let eps = if self.endpoints.is_empty() {
                "none".to_owned()
            } else {
                self.endpoints.join(", ")
            };
            out.push_str(&format!("   endpoints in the kernel's maps: {eps}\n"));
        }
        out
    }
}

/// What the kernel holds for every service of one family (`ferry status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelReport {
    /// The mode's objects are in this network namespace (Ferry's table, the chains).
    pub present: bool,
    /// Every service Ferry would program, with where the kernel differs (empty: programmed as
    /// Ferry would program it).
    pub services: BTreeMap<ServiceName, Vec<String>>,
    /// Objects the kernel holds for services Ferry would not program (a deleted service's
    /// leftovers, someone else's rules in the mode's objects).
    pub stray: Vec<String>,
}

impl KernelReport {
    /// The report when the mode's objects (`what`) are not in this network namespace at all.
    pub fn absent(services: impl IntoIterator<Item = ServiceName>, what: &str) -> Self {
        let why = format!("{what} is not in this network namespace");
        Self {
            present: false,
            services: services
                .into_iter()
                .map(|s| (s, vec![why.clone()]))
                .collect(),
            stray: Vec::new(),
        }
    }
}
