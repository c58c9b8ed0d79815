//! `ferry explain --live`: what the kernel holds for a traced destination, compared with what
//! Ferry would program. Each mode reads its own objects back (see the mode table).

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
