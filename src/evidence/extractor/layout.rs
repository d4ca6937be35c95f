//! Header layouts learned from the first lines of a paste (see [`header`]) and applied to
//! every line after.

use super::super::header;
use super::super::logs::{self, LogFormat};
use super::LogExtractor;

impl LogExtractor {
    /// Learn the header layouts from the buffered lines, then process them.
    pub(super) fn end_sample(&mut self) {
        let Some(sample) = self.sample.take() else {
            return;
        };
        let mut lines = Vec::with_capacity(sample.ends.len());
        let mut start = 0;
        for &e in &sample.ends {
            lines.push(&sample.text[start..e]);
            start = e;
        }
        self.learn_layouts(&lines);
        for l in lines {
            self.process_line(l);
        }
    }

    /// Group the sample by fast-path shape and learn header layouts for the content each shape
    /// leaves (the whole line for `plain`).
    fn learn_layouts(&mut self, lines: &[&str]) {
        if !self.learn {
            return;
        }
        let mut parser = self.parser.clone();
        let mut groups: Vec<(LogFormat, usize, Vec<&str>)> = Vec::new();
        for l in lines {
            if l.trim().is_empty() {
                continue;
            }
            let p = if self.fast {
                parser.parse_any(l)
            } else {
                parser.parse(l, Some(LogFormat::Plain))
            };
            let std::borrow::Cow::Borrowed(c) = p.content else {
                continue;
            };
            let timed = usize::from(p.ts.is_some());
            match groups.iter_mut().find(|g| g.0 == p.format) {
                Some(g) => {
                    g.1 += timed;
                    g.2.push(c);
                }
                None => groups.push((p.format, timed, vec![c])),
            }
        }
        for (format, timed, contents) in groups {
            if contents.len() < header::MIN_SUPPORT {
                continue;
            }
            let anchored = timed * 2 > contents.len();
            for layout in header::learn(&contents, anchored) {
                self.layouts.push((format, layout));
            }
        }
    }

    /// The header of one line: a fast-path shape, then the first learned layout of that shape
    /// that fits the content it left. Returns the parsed line (format `learned` when a layout
    /// of `plain` fitted; time and level from the layout when the shape had none) and the byte
    /// offset of the message in its content.
    pub(super) fn read_header<'a>(&mut self, head: &'a str) -> (logs::ParsedLine<'a>, usize) {
        if self.learned_first {
            let mut p = self.parser.parse(head, Some(LogFormat::Plain));
            if let Some(offset) = self.apply_layout(&mut p) {
                return (p, offset);
            }
        }
        let mut p = if self.fast {
            self.parser.parse(head, self.preferred)
        } else {
            self.parser.parse(head, Some(LogFormat::Plain))
        };
        let offset = self.apply_layout(&mut p).unwrap_or(0);
        (p, offset)
    }

    /// Apply the first learned layout of `p`'s shape that fits its content (see
    /// [`LogExtractor::read_header`]); the message offset, `None` when none fits.
    fn apply_layout(&mut self, p: &mut logs::ParsedLine<'_>) -> Option<usize> {
        for (f, layout) in &self.layouts {
            if *f != p.format {
                continue;
            }
            if let Some(a) = layout.apply(&p.content) {
                if p.ts.is_none()
                    && let Some(st) = a.stamp
                {
                    p.ts = self.parser.stamp_ns(st);
                }
                p.level = p.level.or(a.level);
                if p.format == LogFormat::Plain {
                    p.format = LogFormat::Learned;
                }
                return Some(a.content);
            }
        }
        None
    }
}
