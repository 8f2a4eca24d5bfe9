//! The report: tables printed to stdout as they are made, collected into docs/benchmarks.md with
//! the targets list that closes it.

use std::fmt::Write as _;

/// One markdown table.
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table { headers: headers.iter().map(|s| s.to_string()).collect(), rows: vec![] }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn markdown(&self) -> String {
        let mut s = format!("| {} |\n|{}\n", self.headers.join(" | "), "---|".repeat(self.headers.len()));
        for r in &self.rows {
            let _ = writeln!(s, "| {} |", r.join(" | "));
        }
        s
    }
}

/// A part of the run: prose, tables, and the charts it drew.
pub struct Section {
    pub title: String,
    pub text: String,
    pub tables: Vec<Table>,
    pub charts: Vec<(String, String)>,
}

/// One issue-10 target with the figure measured for it.
pub struct Target {
    pub what: String,
    pub target: String,
    pub measured: String,
    pub met: Option<bool>,
}

#[derive(Default)]
pub struct Report {
    pub sections: Vec<Section>,
    pub targets: Vec<Target>,
    pub skipped: Vec<String>,
}

impl Report {
    /// Adds a section and prints its tables on stdout.
    pub fn section(&mut self, title: &str, text: &str, tables: Vec<Table>, charts: Vec<(String, String)>) {
        println!("\n## {title}\n");
        for t in &tables {
            println!("{}", t.markdown());
        }
        self.sections.push(Section { title: title.into(), text: text.into(), tables, charts });
    }

    pub fn target(&mut self, what: &str, target: &str, measured: String, met: Option<bool>) {
        self.targets.push(Target { what: what.into(), target: target.into(), measured, met });
    }

    /// Loudly notes a row that could not run (a command or Lua script not there yet).
    pub fn skip(&mut self, what: String) {
        eprintln!("bench: SKIPPED {what}");
        self.skipped.push(what);
    }

    pub fn markdown(&self, header: &str) -> String {
        let mut s = String::from(header);
        for sec in &self.sections {
            let _ = write!(s, "\n## {}\n\n{}\n\n", sec.title, sec.text.trim());
            for t in &sec.tables {
                let _ = writeln!(s, "{}", t.markdown());
            }
            for (file, alt) in &sec.charts {
                let _ = writeln!(s, "![{alt}](img/{file})\n");
            }
        }
        let _ = writeln!(s, "\n## Targets\n");
        let mut t = Table::new(&["target", "goal", "measured (median, min-max)", "met"]);
        for g in &self.targets {
            let met = match g.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "n/a",
            };
            t.row(vec![g.what.clone(), g.target.clone(), g.measured.clone(), met.into()]);
        }
        s.push_str(&t.markdown());
        println!("\n## Targets\n\n{}", t.markdown());
        if !self.skipped.is_empty() {
            let _ = writeln!(s, "\nNot measured in this run (command or Lua reference not there yet):\n");
            for k in &self.skipped {
                let _ = writeln!(s, "- {k}");
            }
        }
        s
    }
}
