//! Output directories and files fwdscope writes: `--force` replaces only a directory
//! fwdscope made (its marker), and only once every argument is valid; a directory another
//! fwdscope is writing is refused; run as root, another user's directory is refused unless
//! `--share`, and what its owner planted there is never written through; exports are as
//! private as recordings. The refusals come before any sampling, so most of these need no
//! perf; those that record skip without it, saying why.

mod common;

use collector::outdir::{Claim, OutputDir, MARKER};
use common::{fwdscope, tmpdir};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `sweep -o DIR --force` with a short list, extra `args` at the end.
fn sweep_force(dir: &Path, args: &[&str]) -> std::process::Output {
    fwdscope()
        .args(["sweep", "--force", "--repeat", "1", "--duration", "0.2", "--spin-ns", "0", "-o"])
        .arg(dir)
        .args(args)
        .output()
        .expect("sweep")
}

#[test]
fn sweep_force_never_removes_a_directory_fwdscope_did_not_make() {
    let base = tmpdir("canary");
    let canary = base.join("canary");
    std::fs::create_dir_all(canary.join("sub")).expect("mkdir");
    std::fs::write(canary.join("precious.txt"), b"keep me").expect("write");
    let o = sweep_force(&canary, &[]);
    let err = stderr_of(&o);
    assert!(!o.status.success(), "the sweep ran into someone else's directory: {err}");
    assert!(err.contains("did not make") && err.contains(&canary.display().to_string()), "{err}");
    assert_eq!(std::fs::read(canary.join("precious.txt")).expect("precious.txt kept"), b"keep me");
    assert!(canary.join("sub").is_dir(), "sub/ kept");
    // The same for record and a live comparison.
    let o = fwdscope().args(["record", "--force", "-o"]).arg(&canary).args(["--", "--duration", "0.2"]).output();
    let err = stderr_of(&o.expect("record"));
    assert!(err.contains("did not make"), "{err}");
    assert!(canary.join("precious.txt").exists());
    std::fs::remove_dir_all(&base).expect("cleanup");
}

#[test]
fn bad_forwarder_flags_leave_the_previous_results_in_place() {
    let base = tmpdir("bogus");
    let out = base.join("sweep");
    // A directory an earlier sweep made: marked, with its results.
    drop(OutputDir::claim(&out, Claim::default()).expect("claim"));
    std::fs::write(out.join("results.parquet"), b"earlier results").expect("write");
    let o = sweep_force(&out, &["--", "--bogus"]);
    let err = stderr_of(&o);
    assert!(!o.status.success());
    // clap's own words name the flag.
    assert!(err.contains("--bogus"), "{err}");
    assert_eq!(std::fs::read(out.join("results.parquet")).expect("kept"), b"earlier results");
    std::fs::remove_dir_all(&base).expect("cleanup");
}

#[test]
fn a_second_writer_is_refused_while_the_first_runs() {
    let base = tmpdir("twowriters");
    let out = base.join("out");
    // The first writer: holds the directory (its marker locked) as a running sweep does.
    let first = OutputDir::claim(&out, Claim::default()).expect("first writer");
    std::fs::write(out.join("table.txt"), b"the first run's table").expect("write");
    for args in [
        vec!["sweep", "--force", "--repeat", "1", "--duration", "0.2", "--spin-ns", "0", "-o"],
        vec!["sweep", "--live", "--force", "--duration", "0.2", "--spin-ns", "0,20", "-o"],
        vec!["record", "--force", "-o"],
    ] {
        let o = fwdscope().args(&args).arg(&out).args(["--", "--duration", "0.2"]).output().expect("run");
        let err = stderr_of(&o);
        assert!(!o.status.success(), "{args:?} ran beside the first writer");
        assert!(err.contains("another fwdscope is writing it"), "{args:?}: {err}");
        assert!(out.join("table.txt").exists(), "{args:?} removed the first writer's files");
    }
    drop(first);
    std::fs::remove_dir_all(&base).expect("cleanup");
}

#[test]
fn an_old_unmarked_recording_is_refused_saying_how_to_proceed() {
    let base = tmpdir("oldrec");
    let out = base.join("rec");
    std::fs::create_dir_all(out.join("samples.parquet")).expect("mkdir");
    std::fs::write(out.join("meta.json"), b"{}").expect("write");
    let o = fwdscope().args(["record", "--force", "-o"]).arg(&out).args(["--", "--duration", "0.2"]).output();
    let err = stderr_of(&o.expect("record"));
    assert!(err.contains("older fwdscope") && err.contains("rm -r"), "{err}");
    assert!(out.join("meta.json").exists());
    std::fs::remove_dir_all(&base).expect("cleanup");
}

/// A hand-made recording (no perf needed): a few kernel samples, kallsyms naming them.
fn hand_recording(dir: &Path) {
    use collector::recording::{Meta, RecordingWriter, SamplingInfo, FORMAT_VERSION};
    let mut w = RecordingWriter::create(dir, false).expect("writer");
    for i in 0..10u64 {
        w.push_sample(collector::records::Sample {
            time: i,
            pid: 7,
            tid: 7,
            cpu: 0,
            ip: 0xffff_ffff_8100_0010,
            period: 1000,
            kernel: true,
            callchain: Vec::new(),
        });
    }
    w.flush().expect("part");
    w.write_maps_and_tasks().expect("maps");
    std::fs::write(dir.join("kallsyms"), "ffffffff81000000 T _text\n").expect("kallsyms");
    let meta = Meta {
        format: "fwdscope-recording".into(),
        version: FORMAT_VERSION,
        sampling: SamplingInfo { requested: "cycles".into(), used: "cycles".into(), ..Default::default() },
        status: "complete".into(),
        ..Default::default()
    };
    w.write_meta(&meta).expect("meta");
}

#[test]
fn exports_are_private_unless_shared() {
    let base = tmpdir("exportmode");
    let rec = base.join("rec");
    hand_recording(&rec);
    for (share, want) in [(false, 0o600), (true, 0o644)] {
        let out = base.join(format!("stacks-{share}.txt"));
        // A permissive umask must not make a private export readable.
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c").arg("umask 000; exec \"$0\" \"$@\"").arg(common::BIN);
        cmd.args(["export", "-f", "folded", "-i"]).arg(&rec).arg("-o").arg(&out);
        if share {
            cmd.arg("--share");
        }
        let o = cmd.output().expect("export");
        assert!(o.status.success(), "{}", stderr_of(&o));
        let mode = std::fs::metadata(&out).expect("export written").permissions().mode() & 0o777;
        assert_eq!(mode, want, "share {share}: mode {mode:o}");
    }
    // A page is as private as its input: the recording is 0700, its page 0600; once the
    // recording is made readable, so is the page.
    for (dir_mode, want) in [(0o700, 0o600), (0o755, 0o644)] {
        std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(dir_mode)).expect("chmod");
        let page = base.join(format!("page-{dir_mode:o}.html"));
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c").arg("umask 000; exec \"$0\" \"$@\"").arg(common::BIN);
        let o = cmd.args(["report", "-i"]).arg(&rec).arg("--html").arg(&page).output().expect("report");
        assert!(o.status.success(), "{}", stderr_of(&o));
        let mode = std::fs::metadata(&page).expect("page written").permissions().mode() & 0o777;
        assert_eq!(mode, want, "input {dir_mode:o}: page mode {mode:o}");
    }
    std::fs::remove_dir_all(&base).expect("cleanup");
}

/// `--kallsyms` names the kernel of a recording too (one whose snapshot is missing, or
/// taken without the right to see addresses), and the report says the file it used.
#[test]
fn report_kallsyms_stands_in_for_a_recordings_snapshot() {
    let base = tmpdir("kallsyms-given");
    let rec = base.join("rec");
    hand_recording(&rec);
    std::fs::remove_file(rec.join("kallsyms")).expect("snapshot");
    let ks = base.join("kallsyms.txt");
    std::fs::write(&ks, "ffffffff81000000 T _text\nffffffff81000008 T given_kernel_fn\nffffffff81000100 T after\n")
        .expect("kallsyms");
    let report = |extra: &[&std::ffi::OsStr]| {
        let o = fwdscope().args(["report", "-i"]).arg(&rec).args(extra).output().expect("report");
        assert!(o.status.success(), "{}", stderr_of(&o));
        String::from_utf8_lossy(&o.stdout).into_owned() + &stderr_of(&o)
    };
    let without = report(&[]);
    assert!(!without.contains("given_kernel_fn") && without.contains("no kallsyms snapshot"), "{without}");
    let with = report(&["--kallsyms".as_ref(), ks.as_os_str()]);
    assert!(with.contains("given_kernel_fn") && with.contains("--kallsyms"), "{with}");
    std::fs::remove_dir_all(&base).expect("cleanup");
}

/// The unprivileged user of the permission tests (root only: created if missing).
fn other_user() -> Option<(&'static str, u32)> {
    const USER: &str = "fwdscope-permtest";
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP: needs root (to act as another user)");
        return None;
    }
    let id = |u: &str| std::process::Command::new("id").args(["-u", u]).output().ok().filter(|o| o.status.success());
    if id(USER).is_none() {
        let ok = std::process::Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("SKIP: useradd {USER} failed");
            return None;
        }
    }
    let uid = String::from_utf8_lossy(&id(USER)?.stdout).trim().parse().ok()?;
    Some((USER, uid))
}

/// Run `sh -c SCRIPT` as `user` in `dir`.
fn as_user(user: &str, dir: &Path, script: &str) {
    let ok = std::process::Command::new("runuser")
        .args(["-u", user, "--", "sh", "-c", script])
        .current_dir(dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "as {user}: {script}");
}

#[test]
fn root_does_not_write_through_symlinks_a_user_planted() {
    let Some((user, uid)) = other_user() else { return };
    let base = tmpdir("planted");
    std::fs::create_dir_all(&base).expect("base");
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Root's files the user would like written or read.
    let victim = base.join("root-only.txt");
    std::fs::write(&victim, b"root's own").expect("victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // The user's directory, as an earlier fwdscope run of theirs left it (marked), with
    // symlinks planted where root would write.
    let dir = base.join("userdir");
    std::fs::create_dir(&dir).expect("mkdir");
    std::os::unix::fs::chown(&dir, Some(uid), None).expect("chown");
    let v = victim.display().to_string();
    as_user(
        user,
        &dir,
        &format!("touch {MARKER} && ln -s {v} target.log && ln -s /tmp/fwdscope-stolen-kallsyms kallsyms.tmp && ln -s {v} meta.json"),
    );
    // As root, without --share: refused for the owner alone, nothing touched.
    let o = fwdscope().args(["record", "--force", "-o"]).arg(&dir).args(["--", "--duration", "0.3"]).output();
    let err = stderr_of(&o.expect("record"));
    assert!(err.contains("owned by user") && err.contains("--share"), "{err}");
    assert!(std::fs::symlink_metadata(dir.join("target.log")).expect("link kept").is_symlink());
    // With --share the directory is replaced, the links removed, never followed.
    if common::perf_allows(common::Need::Sample) {
        let o = fwdscope()
            .args(["record", "--force", "--share", "-F", "200", "-o"])
            .arg(&dir)
            .args(["--", "--duration", "0.3", "--routes", "2000", "--no-pin"])
            .output()
            .expect("record");
        assert!(o.status.success(), "{}", stderr_of(&o));
        for f in ["target.log", "meta.json"] {
            assert!(std::fs::symlink_metadata(dir.join(f)).expect(f).is_file(), "{f} is a file of its own");
        }
        assert!(std::fs::symlink_metadata(dir.join("kallsyms.tmp")).is_err(), "no kallsyms.tmp left");
    }
    assert_eq!(std::fs::read(&victim).expect("victim"), b"root's own");
    assert_eq!(std::fs::metadata(&victim).expect("victim").mode() & 0o777, 0o600);
    assert!(!Path::new("/tmp/fwdscope-stolen-kallsyms").exists(), "root's kallsyms copied to the user");

    // The user's empty directory with --share: claimed (marked as root's output), not
    // refused as "replaced by another user's directory".
    if common::perf_allows(common::Need::Sample) {
        let empty = base.join("user-empty");
        std::fs::create_dir(&empty).expect("mkdir");
        std::os::unix::fs::chown(&empty, Some(uid), None).expect("chown");
        let o = fwdscope()
            .args(["record", "--share", "-F", "200", "-o"])
            .arg(&empty)
            .args(["--", "--duration", "0.3", "--routes", "2000", "--no-pin"])
            .output()
            .expect("record");
        assert!(o.status.success(), "{}", stderr_of(&o));
        assert!(empty.join("meta.json").is_file());
    }
    // A dataset the user owns: refused without --share; with it, a planted `.staging`
    // symlink is refused by name rather than followed.
    let ds = base.join("dataset");
    std::fs::create_dir(&ds).expect("mkdir");
    std::os::unix::fs::chown(&ds, Some(uid), None).expect("chown");
    let root_dir = base.join("root-dir");
    std::fs::create_dir(&root_dir).expect("mkdir");
    std::fs::set_permissions(&root_dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let rd = root_dir.display().to_string();
    as_user(user, &ds, &format!("ln -s {rd} .staging && ln -s {rd} host=vm"));
    let o =
        fwdscope().args(["record", "--dataset"]).arg(&ds).args(["--host", "vm", "--", "--duration", "0.3"]).output();
    let err = stderr_of(&o.expect("record"));
    assert!(err.contains("owned by user"), "{err}");
    let o = fwdscope()
        .args(["record", "--share", "--dataset"])
        .arg(&ds)
        .args(["--host", "vm", "--", "--duration", "0.3"])
        .output();
    let err = stderr_of(&o.expect("record"));
    assert!(err.contains(".staging") && err.contains("not followed"), "{err}");
    assert_eq!(std::fs::read_dir(&root_dir).expect("root dir").count(), 0, "nothing written into root's directory");

    // A new -o inside a directory the user owns: the user could rename root's directory
    // and put a symlink in its place, so it is refused without --share, nothing made.
    let parent = base.join("user-parent");
    std::fs::create_dir(&parent).expect("mkdir");
    std::os::unix::fs::chown(&parent, Some(uid), None).expect("chown");
    for verb in [&["record", "-o"][..], &["sweep", "--prefetch", "0,1", "--repeat", "1", "-o"][..]] {
        let o = fwdscope().args(verb).arg(parent.join("out")).args(["--", "--duration", "0.3"]).output();
        let err = stderr_of(&o.expect("run"));
        assert!(err.contains(&format!("is owned by user {uid}")) && err.contains("--share"), "{verb:?}: {err}");
        assert!(!parent.join("out").exists(), "{verb:?} made its directory before refusing");
    }
    // Higher up the path: the user's symlink to root's directory, and a root-owned
    // directory inside the user's. Refused for an output directory and for single files
    // (a page, an export) alike; nothing lands in root's directory.
    let rd = root_dir.display().to_string();
    as_user(user, &parent, &format!("ln -s {rd} lnk"));
    // The user's symlink in a directory root owns (made by root, handed over with lchown).
    let lnk2 = base.join("lnk2");
    std::os::unix::fs::symlink(&root_dir, &lnk2).expect("symlink");
    std::os::unix::fs::lchown(&lnk2, Some(uid), None).expect("lchown");
    let rootsub = parent.join("rootsub");
    std::fs::create_dir(&rootsub).expect("mkdir");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("analyzer/tests/data/forwarder-recording");
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["record".into(), "-o".into(), parent.join("lnk/recx").display().to_string()],
            format!("{} is owned by user {uid}", parent.display()),
        ),
        (
            vec!["record".into(), "-o".into(), lnk2.join("recx").display().to_string()],
            format!("{} is a symlink user {uid} owns", lnk2.display()),
        ),
        // `..` through the user's directory: the path as written passes through it.
        (
            vec!["record".into(), "-o".into(), rootsub.join("../../root-dir/recdd").display().to_string()],
            format!("{} is owned by user {uid}", parent.display()),
        ),
        // Refused before anything is made where the path leads.
        (
            vec!["record".into(), "-o".into(), lnk2.join("newsub/deeper/rec").display().to_string()],
            format!("{} is a symlink user {uid} owns", lnk2.display()),
        ),
        (
            vec!["record".into(), "-o".into(), rootsub.join("out").display().to_string()],
            format!("{} is owned by user {uid}", parent.display()),
        ),
        (
            vec![
                "export".into(),
                "-i".into(),
                golden.display().to_string(),
                "-f".into(),
                "folded".into(),
                "-o".into(),
                lnk2.join("y").display().to_string(),
            ],
            format!("is a symlink user {uid} owns"),
        ),
        (
            vec![
                "report".into(),
                "-i".into(),
                golden.display().to_string(),
                "--html".into(),
                lnk2.join("y.html").display().to_string(),
            ],
            format!("is a symlink user {uid} owns"),
        ),
    ];
    for (args, want) in cases {
        let mut a = args.clone();
        if a[0] == "record" {
            a.extend(["--".into(), "--duration".into(), "0.3".into()]);
        }
        let o = fwdscope().args(&a).output().expect("run");
        let err = stderr_of(&o);
        assert!(!o.status.success() && err.contains(&want), "{args:?}: {err}");
    }
    // --share waives who owns a directory, never another user's symlink on the path.
    for args in [
        vec!["record".to_string(), "--share".into(), "-o".into(), lnk2.join("recs").display().to_string()],
        vec![
            "export".into(),
            "--share".into(),
            "-i".into(),
            golden.display().to_string(),
            "-f".into(),
            "folded".into(),
            "-o".into(),
            lnk2.join("ys").display().to_string(),
        ],
    ] {
        let mut a = args.clone();
        if a[0] == "record" {
            a.extend(["--".into(), "--duration".into(), "0.3".into()]);
        }
        let o = fwdscope().args(&a).output().expect("run");
        let err = stderr_of(&o);
        assert!(
            !o.status.success()
                && err.contains(&format!("is a symlink user {uid} owns"))
                && err.contains("give the path it leads to instead"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(&root_dir).expect("root dir").count(), 0, "written into root's directory");
    assert!(!rootsub.join("out").exists());
    // The user's symlink at the name itself, to a FIFO of root's: not written through.
    let pipes = base.join("pipes");
    std::fs::create_dir(&pipes).expect("mkdir");
    let fifo = pipes.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("path");
    // SAFETY: a valid C string path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let pp = base.join("pp");
    std::os::unix::fs::symlink(&fifo, &pp).expect("symlink");
    std::os::unix::fs::lchown(&pp, Some(uid), None).expect("lchown");
    let o = fwdscope().args(["export", "-f", "folded", "-i"]).arg(&golden).arg("-o").arg(&pp).output().expect("export");
    let err = stderr_of(&o);
    assert!(!o.status.success() && err.contains("is a symlink user") && err.contains("pipe or device"), "{err}");
    // Root's own symlink to root's FIFO, in the user's directory with --share: the user
    // could swap it for their own between the look and the open, so it is not followed.
    let rootlnk = parent.join("rootlnk");
    std::os::unix::fs::symlink(&fifo, &rootlnk).expect("symlink");
    let o = fwdscope()
        .args(["export", "--share", "-f", "folded", "-i"])
        .arg(&golden)
        .arg("-o")
        .arg(&rootlnk)
        .output()
        .expect("export");
    let err = stderr_of(&o);
    assert!(!o.status.success() && err.contains("in a shared path") && err.contains("not followed"), "{err}");
    // The user's own FIFO in a world-writable sticky directory of root's (as /tmp): not
    // written (it is opened only after its owner is seen, so no reader is needed here).
    let sticky = base.join("sticky");
    std::fs::create_dir(&sticky).expect("mkdir");
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    as_user(user, &sticky, "mkfifo ff");
    let o = fwdscope()
        .args(["export", "-f", "folded", "-i"])
        .arg(&golden)
        .arg("-o")
        .arg(sticky.join("ff"))
        .output()
        .expect("export");
    let err = stderr_of(&o);
    assert!(!o.status.success() && err.contains(&format!("a pipe or device user {uid} owns")), "{err}");
    // A trailing slash on the user's symlink to a directory fwdscope made: with --share
    // and --force, still a symlink, never followed, nothing of root's removed.
    let made = base.join("made");
    std::fs::create_dir(&made).expect("mkdir");
    std::fs::write(made.join(MARKER), b"").expect("marker");
    std::fs::write(made.join("keep.txt"), b"root's").expect("keep");
    let lnk3 = parent.join("lnk3");
    as_user(user, &parent, &format!("ln -s {} lnk3", made.display()));
    let o = fwdscope()
        .args(["record", "--share", "--force", "-o"])
        .arg(format!("{}/", lnk3.display()))
        .args(["--", "--duration", "0.3"])
        .output()
        .expect("record");
    let err = stderr_of(&o);
    assert!(!o.status.success() && err.contains("symlink"), "{err}");
    assert!(made.join("keep.txt").exists(), "root's directory was replaced through the user's symlink");
    // sweep --dataset into the user's directory: refused before the sweep's own directory
    // is made.
    let o = fwdscope()
        .args(["sweep", "--prefetch", "0,1", "--repeat", "1", "-o"])
        .arg(base.join("sw-ds"))
        .arg("--dataset")
        .arg(parent.join("ds"))
        .args(["--", "--duration", "0.3"])
        .output()
        .expect("sweep");
    let err = stderr_of(&o);
    assert!(!o.status.success() && err.contains(&format!("is owned by user {uid}")), "{err}");
    assert!(!base.join("sw-ds").exists(), "the sweep's directory was made before the dataset was refused");
    std::fs::remove_dir_all(&base).expect("cleanup");
}

/// Every file under `dir` whose name ends in `.tmp`.
fn temporaries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(temporaries(&p));
        } else if p.to_string_lossy().ends_with(".tmp") {
            out.push(p);
        }
    }
    out
}

/// A full disk, as a file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored: writes past it
/// fail with EFBIG as they would with ENOSPC): 6 KiB holds meta.json (about 4 KiB), the
/// maps and a counters part, not the kallsyms copy (megabytes) nor half a second of
/// samples with callchains (about 16 KiB).
#[test]
fn a_write_that_fails_leaves_no_temporaries_and_says_why_in_the_recording() {
    if !common::perf_allows(common::Need::Sample) {
        return;
    }
    let base = tmpdir("diskfull");
    std::fs::create_dir_all(&base).expect("base");
    let out = base.join("rec");
    let o = std::process::Command::new("sh")
        .arg("-c")
        // dash and bash (as sh) count -f in 512-byte blocks.
        .arg("ulimit -f 12; trap '' XFSZ; exec \"$0\" \"$@\"")
        .arg(common::BIN)
        .args(["record", "-g", "-F", "4000", "--chunk-ms", "500", "-o"])
        .arg(&out)
        .args(["--", "--duration", "3", "--routes", "2000", "--no-pin"])
        .output()
        .expect("record");
    let err = stderr_of(&o);
    assert!(!o.status.success(), "every write fit: {err}");
    assert!(temporaries(&out).is_empty(), "temporaries left: {:?}", temporaries(&out));
    let rec = collector::recording::Recording::open(&out).expect("meta.json written before the failure");
    assert!(
        rec.meta.notes.iter().any(|n| n.contains("no kallsyms snapshot") && n.contains("too large")),
        "{:?}",
        rec.meta.notes
    );
    assert_eq!(rec.meta.status, "failed", "{err}");
    // The error names the file it failed on (a Parquet part's error may come through the
    // Parquet writer's own words rather than the system's).
    let ended = rec.meta.ended_by.clone().unwrap_or_default();
    assert!(ended.starts_with("error: ") && ended.contains(&out.display().to_string()), "{ended}");
    let report = fwdscope().args(["report", "-i"]).arg(&out).output().expect("report");
    let text = format!("{}{}", String::from_utf8_lossy(&report.stdout), stderr_of(&report));
    assert!(text.contains("stopped on an error"), "{text}");
    std::fs::remove_dir_all(&base).expect("cleanup");
}
