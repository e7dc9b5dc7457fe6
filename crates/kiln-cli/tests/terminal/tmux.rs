//! A real terminal for the chat tests: a tmux session, keys sent to it and its screen read
//! back until it shows what a test waits for.

use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux session running one command, read through `capture-pane`.
pub(super) struct Tmux {
    name: String,
}

impl Tmux {
    pub(super) fn start(tag: &str, command: &str) -> Tmux {
        let name = format!("kiln-test-{tag}-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "60",
                "-s",
                &name,
                command,
            ])
            .status()
            .expect("tmux is needed for this test (scripts/setup.sh installs it)");
        assert!(status.success(), "tmux new-session failed");
        Tmux { name }
    }

    pub(super) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.name];
        args.extend_from_slice(keys);
        assert!(Command::new("tmux").args(&args).status().unwrap().success());
    }

    pub(super) fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-S", "-200", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `text` `count` times.
    pub(super) fn wait_for(&self, text: &str, count: usize) -> String {
        self.wait_until(&format!("{text:?} x{count}"), |s| {
            s.matches(text).count() >= count
        })
    }

    /// Waits until the screen shows `count` chat prompts (`> ` at a line's start; tmux drops
    /// the trailing space of an empty one).
    pub(super) fn wait_prompts(&self, count: usize) -> String {
        self.wait_until(&format!("{count} prompts"), |s| {
            s.lines()
                .filter(|l| *l == ">" || l.starts_with("> "))
                .count()
                >= count
        })
    }

    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "waited for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}
