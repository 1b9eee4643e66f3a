//! `wafer completions SHELL` and `wafer man`, generated from the commands'
//! own definitions.

use std::process::Command;

fn wafer(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_wafer"))
        .args(args)
        .output()
        .expect("wafer runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.success(), text)
}

#[test]
fn completions_know_every_command_and_its_flags() {
    let (ok, bash) = wafer(&["completions", "bash"]);
    assert!(ok && bash.contains("_wafer()"), "{bash}");
    for word in ["reallocate", "priority", "sysconfig", "--json"] {
        assert!(
            bash.contains(word),
            "{word} missing from the bash completions"
        );
    }
    let (ok, zsh) = wafer(&["completions", "zsh"]);
    assert!(ok && zsh.starts_with("#compdef wafer"), "{zsh}");
    assert!(
        !wafer(&["completions", "tcsh"]).0,
        "an unknown shell is refused"
    );
}

#[test]
fn man_pages_cover_every_command() {
    let (ok, page) = wafer(&["man"]);
    assert!(
        ok && page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH wafer 1"),
        "{page}"
    );
    assert!(
        page.contains(".TH wafer 1") && page.contains("reallocate"),
        "{page}"
    );
    let dir = tempfile::tempdir().expect("a directory");
    let (ok, _) = wafer(&["man", "--dir", dir.path().to_str().expect("UTF-8")]);
    assert!(ok);
    let status = std::fs::read_to_string(dir.path().join("wafer-aggr-status.1"))
        .expect("a page for aggr status");
    assert!(
        status.contains("\\-\\-json") && status.contains("RAID groups"),
        "{status}"
    );
    assert!(dir.path().join("wafer-priority-set.1").exists());
}
