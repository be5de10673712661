//! Progress on standard error. On a terminal one line is rewritten in place
//! (`\r`); otherwise (a log file, CI) each phase gets one plain line when it
//! starts and updates within it print nothing, as cargo does, so a log never
//! holds one unbroken line of carriage returns.

use std::io::{IsTerminal, Write};

/// A progress display for one command.
pub struct Status<W: Write> {
    out: W,
    /// Rewrite one line in place (a terminal) or print a line per phase.
    in_place: bool,
    /// The phase of the last line shown.
    phase: String,
    /// Length of the line on screen (in place), to blank what a shorter
    /// one leaves.
    shown: usize,
}

impl Status<std::io::Stderr> {
    /// Progress on standard error, in place only if it is a terminal.
    pub fn stderr() -> Self {
        let out = std::io::stderr();
        let in_place = out.is_terminal();
        Status::new(out, in_place)
    }
}

impl<W: Write> Status<W> {
    /// Progress on `out`, rewritten in place if `in_place`.
    pub fn new(out: W, in_place: bool) -> Self {
        Status {
            out,
            in_place,
            phase: String::new(),
            shown: 0,
        }
    }

    /// Shows `line` as the state of `phase`: in place on a terminal;
    /// elsewhere `phase` alone, once, when it differs from the last one.
    pub fn update(&mut self, phase: &str, line: &str) {
        // Progress output failing (a closed pipe) never fails the command.
        if self.in_place {
            let pad = self.shown.saturating_sub(line.chars().count());
            let _ = write!(self.out, "\r{line}{:pad$}", "");
            self.shown = line.chars().count();
            let _ = self.out.flush();
        } else if phase != self.phase {
            let _ = writeln!(self.out, "{phase}");
        }
        if phase != self.phase {
            self.phase = phase.to_string();
        }
    }

    /// Ends the line being rewritten, so other output starts on its own line.
    pub fn finish(&mut self) {
        if self.in_place && self.shown > 0 {
            let _ = writeln!(self.out);
            self.shown = 0;
        }
    }

    /// Prints a closing `line` (a phase's result) on a line of its own.
    pub fn done(&mut self, line: &str) {
        if self.in_place && self.shown > 0 {
            let pad = self.shown.saturating_sub(line.chars().count());
            let _ = writeln!(self.out, "\r{line}{:pad$}", "");
        } else {
            let _ = writeln!(self.out, "{line}");
        }
        self.shown = 0;
        self.phase.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::Status;

    fn run(in_place: bool) -> String {
        let mut out = Vec::new();
        let mut status = Status::new(&mut out, in_place);
        for n in [1_000, 2_000] {
            status.update("importing", &format!("imported {n} events"));
        }
        status.finish();
        for (table, entries) in [("events", 10), ("events", 20), ("search/meta", 3)] {
            status.update(
                &format!("compacting: {table}"),
                &format!("compacting: {table}, {entries} entries"),
            );
        }
        status.done("compacted");
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn without_a_terminal_each_phase_is_one_plain_line() {
        assert_eq!(
            run(false),
            "importing\ncompacting: events\ncompacting: search/meta\ncompacted\n"
        );
    }

    #[test]
    fn on_a_terminal_the_line_is_rewritten_in_place() {
        // The last line is padded to blank the longer one it replaces.
        let last = "compacting: search/meta, 3 entries";
        let pad = " ".repeat(last.len() - "compacted".len());
        assert_eq!(
            run(true),
            format!(
                "\rimported 1000 events\rimported 2000 events\n\
                 \rcompacting: events, 10 entries\rcompacting: events, 20 entries\
                 \r{last}\rcompacted{pad}\n"
            )
        );
    }
}
