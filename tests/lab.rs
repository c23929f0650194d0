//! `fwdscope lab`: built, idempotent, forwarding, and always removed (a guard runs `down`
//! even when an assertion fails). Needs root and network namespaces; skips, saying why,
//! without them.

use std::process::Command;

fn fwdscope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fwdscope")).args(args).output().expect("run fwdscope")
}

fn can_make_namespaces() -> bool {
    let probe = format!("fsprobe{}", std::process::id() % 100_000);
    match Command::new("ip").args(["netns", "add", &probe]).output() {
        Ok(o) if o.status.success() => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).output();
            true
        }
        Ok(o) => {
            println!("SKIP: cannot create network namespaces: {}", String::from_utf8_lossy(&o.stderr).trim());
            false
        }
        Err(e) => {
            println!("SKIP: iproute2 `ip` is not available: {e}");
            false
        }
    }
}

struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = fwdscope(&["lab", "down", "--name", &self.0]);
    }
}

/// IP ForwDatagrams of a namespace (/proc/net/snmp).
fn forwarded(ns: &str) -> u64 {
    let out = Command::new("ip").args(["netns", "exec", ns, "cat", "/proc/net/snmp"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut ip = text.lines().filter(|l| l.starts_with("Ip:"));
    let (head, vals) = (ip.next().unwrap(), ip.next().unwrap());
    let i = head.split_whitespace().position(|h| h == "ForwDatagrams").unwrap();
    vals.split_whitespace().nth(i).unwrap().parse().unwrap()
}

#[test]
fn lab_up_forwards_and_down_cleans_up() {
    if !can_make_namespaces() {
        return;
    }
    let name = format!("t{}", std::process::id() % 100_000);
    let _guard = Down(name.clone());
    let out = fwdscope(&["lab", "up", "--name", &name, "--routes", "300"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("300 routes"));
    // Idempotent.
    let out = fwdscope(&["lab", "up", "--name", &name]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("already up"), "{out:?}");
    let status = String::from_utf8_lossy(&fwdscope(&["lab", "status", "--name", &name]).stdout).into_owned();
    assert!(status.starts_with(&format!("lab {name}: up")), "{status}");
    assert!(status.contains("300 routes via the sink"), "{status}");

    // 50 UDP datagrams from the sender to lab destinations: the kernel forwards each.
    let fwd = format!("{name}-fwd");
    let before = forwarded(&fwd);
    let send = Command::new("ip")
        .args(["netns", "exec", &format!("{name}-snd"), "bash", "-c"])
        .arg("for i in $(seq 50); do echo x > /dev/udp/198.19.$((i % 4)).7/9; done")
        .output()
        .unwrap();
    assert!(send.status.success(), "{}", String::from_utf8_lossy(&send.stderr));
    assert_eq!(forwarded(&fwd) - before, 50);

    let out = fwdscope(&["lab", "down", "--name", &name]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 namespaces removed"), "{out:?}");
    let list =
        String::from_utf8_lossy(&Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).into_owned();
    assert!(!list.contains(&format!("{name}-")), "{list}");
    // A second down is fine.
    assert!(fwdscope(&["lab", "down", "--name", &name]).status.success());
}
