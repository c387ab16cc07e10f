//! The one runner of the `coo-assembler` command for tests: a test crate
//! that builds the command makes a [`Cli`] from its path
//! (`Cli::new(env!("CARGO_BIN_EXE_coo-assembler"))`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The command under test.
#[derive(Clone, Debug)]
pub struct Cli {
    exe: PathBuf,
}

/// What a run gave: the exit code (-1 when killed by a signal) and both
/// outputs as text.
#[derive(Clone, Debug)]
pub struct Ran {
    /// The exit code, -1 when a signal ended the process.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Ran {
    fn of(o: Output) -> Ran {
        let r = Ran {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        // Whatever the outcome, the command never panics.
        assert!(!r.stderr.contains("panicked"), "a panic: {}", r.stderr);
        r
    }

    /// Asserts the run exited with `code` and a message holding every
    /// needle, and no panic or backtrace text.
    pub fn fails(&self, code: i32, needles: &[&str]) -> &Ran {
        assert_eq!(
            self.code, code,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        for bad in [
            "panicked",
            "RUST_BACKTRACE",
            "stack backtrace",
            "internal error",
        ] {
            assert!(
                !self.stderr.contains(bad),
                "{bad:?} in stderr: {}",
                self.stderr
            );
        }
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "stderr lacks {n:?}: {}",
                self.stderr
            );
        }
        self
    }
}

impl Cli {
    /// The command at `exe`.
    pub fn new(exe: impl AsRef<Path>) -> Cli {
        Cli {
            exe: exe.as_ref().to_path_buf(),
        }
    }

    /// Its path.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// A `Command` for it with `args`, to add input, environment or a
    /// working directory.
    pub fn command<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Command {
        let mut c = Command::new(&self.exe);
        // Messages as users see them, without a backtrace the caller's
        // environment may ask for.
        c.args(args)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE");
        c
    }

    /// Runs it with `args` (no standard input) and waits.
    pub fn run<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Ran {
        let o = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.exe.display()));
        Ran::of(o)
    }

    /// Runs it with `args` and `stdin` as its standard input.
    pub fn run_with_input<S: AsRef<OsStr>>(
        &self,
        args: impl IntoIterator<Item = S>,
        stdin: &[u8],
    ) -> Ran {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.exe.display()));
        let mut pipe = child.stdin.take().expect("piped stdin");
        let input = stdin.to_vec();
        // A writer thread: the child may fill its output pipes before it
        // has read all of its input.
        let writer = std::thread::spawn(move || {
            // The command may exit before reading everything (an error).
            let _ = pipe.write_all(&input);
        });
        let o = child.wait_with_output().expect("wait for the command");
        writer.join().expect("stdin writer");
        Ran::of(o)
    }

    /// Runs it with `args` and asserts it succeeded.
    pub fn ok<S: AsRef<OsStr>>(&self, args: impl IntoIterator<Item = S>) -> Ran {
        let args: Vec<S> = args.into_iter().collect();
        let r = self.run(&args);
        assert_eq!(
            r.code,
            0,
            "{}\nstdout: {}\nstderr: {}",
            show(&args),
            r.stdout,
            r.stderr
        );
        r
    }
}

/// The arguments as one line, for failure messages.
fn show<S: AsRef<OsStr>>(args: &[S]) -> String {
    args.iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
