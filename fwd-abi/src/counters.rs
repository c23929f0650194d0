//! Counter indices and names of a worker block in the stats segment. Readers use the names
//! published in the segment itself; this list is the writer's (and the default reader's)
//! order.

macro_rules! define_counters {
    ($($id:ident => $name:literal,)*) => {
        /// Counter indices of a worker block.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum Ctr { $($id,)* }
        /// Counter names, in index order, as published in the segment.
        pub const COUNTER_NAMES: &[&str] = &[$($name,)*];
    };
}

define_counters! {
    RxPackets => "rx_packets",
    RxBytes => "rx_bytes",
    TxPackets => "tx_packets",
    TxBytes => "tx_bytes",
    Bursts => "bursts",
    IdlePolls => "idle_polls",
    DropRunt => "drop_runt",
    DropNotIpv4 => "drop_not_ipv4",
    DropBadVersion => "drop_bad_version",
    DropBadIhl => "drop_bad_ihl",
    DropIpOptions => "drop_ip_options",
    DropBadTotalLength => "drop_bad_total_length",
    DropBadChecksum => "drop_bad_checksum",
    DropTtlExceeded => "drop_ttl_exceeded",
    DropMartianSrc => "drop_martian_src",
    DropMartianDst => "drop_martian_dst",
    DropMulticast => "drop_multicast",
    DropBroadcast => "drop_broadcast",
    DropNoRoute => "drop_no_route",
    DropDstOverflow => "drop_dst_overflow",
    DropNoDst => "drop_no_dst",
    DropTxRingFull => "drop_tx_ring_full",
    DropOversize => "drop_oversize",
    DropTxError => "drop_tx_error",
    RxMissed => "rx_missed",
    RxNoBuffer => "rx_no_buffer",
    DevPackets => "dev_packets",
    RtEntries => "rt_entries",
    RtInHit => "rt_in_hit",
    RtInSlowTot => "rt_in_slow_tot",
    RtInSlowMc => "rt_in_slow_mc",
    RtInNoRoute => "rt_in_no_route",
    RtInBrd => "rt_in_brd",
    RtInMartianDst => "rt_in_martian_dst",
    RtInMartianSrc => "rt_in_martian_src",
    RtOutHit => "rt_out_hit",
    RtOutSlowTot => "rt_out_slow_tot",
    RtOutSlowMc => "rt_out_slow_mc",
    RtGcTotal => "rt_gc_total",
    RtGcIgnored => "rt_gc_ignored",
    RtGcGoalMiss => "rt_gc_goal_miss",
    RtGcDstOverflow => "rt_gc_dst_overflow",
    RtInHlistSearch => "rt_in_hlist_search",
    RtOutHlistSearch => "rt_out_hlist_search",
    RtFlushes => "rt_flushes",
    RtExpired => "rt_expired",
    SlabBufAlloc => "slab_buf_alloc",
    SlabBufFree => "slab_buf_free",
    SlabBufAllocFail => "slab_buf_alloc_fail",
    SlabDstAlloc => "slab_dst_alloc",
    SlabDstFree => "slab_dst_free",
    SlabDstAllocFail => "slab_dst_alloc_fail",
    SlabDepotGet => "slab_depot_get",
    SlabDepotPut => "slab_depot_put",
    ClkDriverRx => "clk_driver_rx",
    ClkIp => "clk_ip",
    ClkLookup => "clk_lookup",
    ClkGc => "clk_gc",
    ClkSlab => "clk_slab",
    ClkDriverTx => "clk_driver_tx",
    ClkNic => "clk_nic",
    ClkIdle => "clk_idle",
    PrefetchDepth => "prefetch_depth",
    CacheMode => "cache_mode",
    ClkCalib => "clk_calib",
    CallsDriverRx => "calls_driver_rx",
    CallsIp => "calls_ip",
    CallsLookup => "calls_lookup",
    CallsGc => "calls_gc",
    CallsSlab => "calls_slab",
    CallsDriverTx => "calls_driver_tx",
    CallsCalib => "calls_calib",
    CallsNic => "calls_nic",
    CallsIdle => "calls_idle",
    PktsDriverRx => "pkts_driver_rx",
    PktsIp => "pkts_ip",
    PktsLookup => "pkts_lookup",
    PktsGc => "pkts_gc",
    PktsSlab => "pkts_slab",
    PktsDriverTx => "pkts_driver_tx",
    PktsCalib => "pkts_calib",
    PktsNic => "pkts_nic",
    PktsIdle => "pkts_idle",
    StageClockOn => "stage_clock_on",
    SpinNs => "spin_ns",
    Setting => "setting",
    CtrlGeneration => "ctrl_generation",
    SchedRunNs => "sched_run_ns",
    SchedWaitNs => "sched_wait_ns",
    Polls => "polls",
    ClockedPolls => "clocked_polls",
    PublishMonoNs => "publish_mono_ns",
    SwitchMonoNs => "switch_mono_ns",
    SwitchTsc => "switch_tsc",
    DropXdpRxDropped => "drop_xdp_rx_dropped",
    DropXdpRxRingFull => "drop_xdp_rx_ring_full",
    DropXdpTxInvalid => "drop_xdp_tx_invalid",
    XdpFillRingEmpty => "xdp_fill_ring_empty",
    XdpFillInvalid => "xdp_fill_invalid",
    SwitchGcGoalMiss => "switch_gc_goal_miss",
    DropNoNeighbour => "drop_no_neighbour",
    DropFibOther => "drop_fib_other",
    DropRedirectFailed => "drop_redirect_failed",
}

/// Number of counters per worker block.
pub const N_COUNTERS: usize = COUNTER_NAMES.len();

/// Names of the drop counters (every reason a packet can be dropped for).
pub fn drop_counters() -> impl Iterator<Item = (usize, &'static str)> {
    COUNTER_NAMES.iter().enumerate().filter(|(_, n)| n.starts_with("drop_") || **n == "rx_missed").map(|(i, n)| (i, *n))
}

/// One clocked stage's counters: `calls` (bursts in which the stage ran; for idle, empty
/// polls), `packets` (packets those calls handled) and `clocks` (TSC cycles), as VPP's
/// `show runtime` keeps calls, vectors and clocks per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageClock {
    /// The clock's name (`driver_rx`, ...).
    pub name: &'static str,
    /// The stage the analyzer's rules call it (`driver` for both driver clocks).
    pub stage: &'static str,
    pub calls: Ctr,
    pub packets: Ctr,
    pub clocks: Ctr,
}

const fn clock(name: &'static str, stage: &'static str, calls: Ctr, packets: Ctr, clocks: Ctr) -> StageClock {
    StageClock { name, stage, calls, packets, clocks }
}

/// The clocked stages in burst order. `nic` is the synthetic device (simulated hardware,
/// not forwarding work) and `idle` the rx polls that found nothing: both are kept apart
/// from the forwarder's own stages in every total.
pub const STAGE_CLOCKS: [StageClock; 9] = [
    clock("driver_rx", "driver", Ctr::CallsDriverRx, Ctr::PktsDriverRx, Ctr::ClkDriverRx),
    clock("ip", "ip", Ctr::CallsIp, Ctr::PktsIp, Ctr::ClkIp),
    clock("lookup", "lookup", Ctr::CallsLookup, Ctr::PktsLookup, Ctr::ClkLookup),
    clock("gc", "gc", Ctr::CallsGc, Ctr::PktsGc, Ctr::ClkGc),
    clock("slab", "slab", Ctr::CallsSlab, Ctr::PktsSlab, Ctr::ClkSlab),
    clock("driver_tx", "driver", Ctr::CallsDriverTx, Ctr::PktsDriverTx, Ctr::ClkDriverTx),
    clock("calib", "calib", Ctr::CallsCalib, Ctr::PktsCalib, Ctr::ClkCalib),
    clock("nic", "nic", Ctr::CallsNic, Ctr::PktsNic, Ctr::ClkNic),
    clock("idle", "idle", Ctr::CallsIdle, Ctr::PktsIdle, Ctr::ClkIdle),
];

/// Whether a clocked stage is forwarding work (not the device, not waiting).
pub fn is_forwarding_stage(stage: &str) -> bool {
    stage != "nic" && stage != "idle"
}
