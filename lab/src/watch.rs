//! What `top --lab NAME` (and any observer of a lab) watches: the lab's forwarder by its
//! PID where it is a process of its own (fwdscope's forwarder, DPDK's l3fwd), or every CPU
//! where the forwarding runs in the kernel's softirqs (the kernel, the XDP program).

use crate::netns::{Lab, Mode};
use crate::{Error, Result};

/// Where a lab's forwarding is observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watch {
    /// A forwarder process: sample it (and read its stats segment when it publishes one).
    Pid { pid: i32, what: String },
    /// Every CPU, kernel included: the forwarding runs in softirqs on whichever CPU
    /// delivered each frame.
    AllCpus { what: String },
}

impl Watch {
    /// One line saying what is watched and why.
    pub fn describe(&self) -> &str {
        match self {
            Watch::Pid { what, .. } | Watch::AllCpus { what } => what,
        }
    }
}

/// What to watch of lab `name`: an error when the lab is down or its forwarder has exited
/// (with its log's last lines).
pub fn watch(name: &str) -> Result<Watch> {
    let lab = Lab::new(name)?;
    let Some(mode) = lab.mode() else {
        return Err(Error::Config(format!("lab {name}: not up (fwdscope lab up --name {name})")));
    };
    let process = |what: &str, pid: Option<i32>| match pid {
        Some(pid) => Ok(Watch::Pid { pid, what: format!("lab {name}: {what} pid {pid}") }),
        None => {
            Err(Error::Config(lab.dead_forwarder().unwrap_or_else(|| format!("lab {name}: its {what} is not running"))))
        }
    };
    match mode {
        Mode::Fwdscope => process("fwdscope forwarder", lab.forwarder_pid()),
        // l3fwd is recorded apart (l3fwd.pid), by the module that starts it.
        Mode::Dpdk => process("DPDK l3fwd", crate::dpdk::pid(&lab.dpdk())),
        Mode::Kernel => Ok(Watch::AllCpus {
            what: format!("lab {name}: the kernel forwards in softirqs: every CPU, with the Linux rules"),
        }),
        Mode::Xdp => Ok(Watch::AllCpus {
            what: format!(
                "lab {name}: the XDP program runs in softirqs: every CPU, with the XDP rules (its counters: lab status, \
                 or stat -p of the xdp-forward process)"
            ),
        }),
    }
}
