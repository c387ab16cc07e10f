//! The progress bar of a long command: a thread draws the library's
//! [`Progress`] on standard error, with the step, a rate and an estimate,
//! while the command runs; nothing at all when standard error is not a
//! terminal or `--quiet` was given.

use coo_assembler::progress::{Now, Progress, Step};
use coo_assembler::vocab::format_size;
use indicatif::{HumanDuration, ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often the bar is redrawn.
const TICK: Duration = Duration::from_millis(100);

/// Draws a [`Progress`] until dropped.
pub(crate) struct Bar {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bar {
    /// Draw `progress` on a terminal, for work on `what` (a file name);
    /// None when quiet or when standard error is not a terminal.
    pub(crate) fn show(progress: &Progress, what: &str, quiet: bool) -> Option<Bar> {
        if quiet || !std::io::stderr().is_terminal() {
            return None;
        }
        let done = Arc::new(AtomicBool::new(false));
        let (p, d, what) = (progress.clone(), done.clone(), what.to_string());
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || draw(&p, &d, &what))
            .ok()?;
        Some(Bar {
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn draw(p: &Progress, done: &AtomicBool, what: &str) {
    // Made at the first step: nothing is drawn before the work starts.
    let mut bar: Option<ProgressBar> = None;
    let mut shown = None;
    while !done.load(Ordering::Relaxed) {
        let now = p.now();
        if now.step != Step::Idle && shown != Some((now.step, now.round, now.total)) {
            shown = Some((now.step, now.round, now.total));
            // A new bar per step: its rate and estimate start afresh.
            if let Some(old) = bar.take() {
                old.finish_and_clear();
            }
            bar = Some(new_bar(now.step, now.round, now.total, what));
        }
        if let (Some(b), false) = (&bar, now.step == Step::Idle) {
            // An estimated total (verify's) may be passed: the bar stays full.
            let at = if now.total > 0 {
                now.done.min(now.total)
            } else {
                now.done
            };
            b.set_position(at);
            b.set_prefix(rate(&now));
        }
        std::thread::sleep(TICK);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

/// "R/s, ETA T" from the library's rate and estimate; empty while it has
/// none.
fn rate(now: &Now) -> String {
    let Some(per_sec) = now.rate() else {
        return String::new();
    };
    let r = format!("{}/s", format_size(per_sec as u64));
    match now.left() {
        Some(left) => format!("{r}, ETA {}", HumanDuration(left)),
        None => r,
    }
}

/// A bar with the step's total or a spinner; the prefix says the rate.
fn new_bar(step: Step, round: u64, total: u64, what: &str) -> ProgressBar {
    let label = match (step, round) {
        (Step::Merge | Step::Export, r) if r > 1 => format!("{} (pass {r})", step.label()),
        _ => step.label().to_string(),
    };
    let template = if total > 0 {
        "{spinner} {msg} {bytes}/{total_bytes} [{bar:30}] {prefix}"
    } else {
        "{spinner} {msg} {bytes} {prefix}"
    };
    let mut bar = ProgressBar::new(total).with_message(format!("{label} {what}"));
    if let Ok(st) = ProgressStyle::with_template(template) {
        bar = bar.with_style(st.progress_chars("=> "));
    }
    bar.enable_steady_tick(TICK);
    bar
}
