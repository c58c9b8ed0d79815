//! Ferry's restore text without its nfacct matches, for a kernel or a network namespace that
//! has no nfacct counters (`iptables-restore` refuses a rule naming a counter that does not
//! exist): tests that load golden or `ferry rules` output there use it.

/// `rules` without its `-m nfacct --nfacct-name NAME` matches.
pub fn without_nfacct(rules: &str) -> String {
    let mut out = String::new();
    for line in rules.lines() {
        let mut words = line.split(' ').peekable();
        let mut kept: Vec<&str> = Vec::new();
        while let Some(w) = words.next() {
            if w == "-m" && words.peek() == Some(&"nfacct") {
                words.next();
                if words.peek() == Some(&"--nfacct-name") {
                    words.next();
                    words.next();
                }
                continue;
            }
            kept.push(w);
        }
        out.push_str(&kept.join(" "));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::without_nfacct;

    #[test]
    fn the_match_and_its_name_go_the_rest_stays() {
        let rule = "-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP\n";
        assert_eq!(
            without_nfacct(rule),
            "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n"
        );
        assert_eq!(without_nfacct("*nat\nCOMMIT\n"), "*nat\nCOMMIT\n");
    }
}
