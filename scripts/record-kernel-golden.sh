#!/usr/bin/env bash
# How analyzer/tests/data/kernel-forwarding.perf.data was made: the Linux kernel forwards
# UDP between two network namespaces (sender -> fwd -> sink over veth pairs, every address
# inside 198.18.0.0/15, the sink owning the range), while `perf record -a -g` samples
# every CPU. Also writes the kallsyms the file needs (text symbols, gzipped) and perf's own
# report of it (results/).
# Usage (root): scripts/record-kernel-golden.sh OUTDIR
set -euo pipefail
out="$(mkdir -p "$1" && cd "$1" && pwd)"
tag="fsg$$"
snd="${tag}-snd" fwd="${tag}-fwd" sink="${tag}-sink"
cleanup() {
  for n in "$snd" "$fwd" "$sink"; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
for n in "$snd" "$fwd" "$sink"; do ip netns add "$n"; done
ip link add "${tag}a" netns "$snd" type veth peer name "${tag}b" netns "$fwd"
ip link add "${tag}c" netns "$fwd" type veth peer name "${tag}d" netns "$sink"
ip -n "$snd" addr add 198.18.0.1/30 dev "${tag}a"
ip -n "$fwd" addr add 198.18.0.2/30 dev "${tag}b"
ip -n "$fwd" addr add 198.18.0.5/30 dev "${tag}c"
ip -n "$sink" addr add 198.18.0.6/30 dev "${tag}d"
for n in "$snd" "$fwd" "$sink"; do ip -n "$n" link set lo up; done
ip -n "$snd" link set "${tag}a" up
ip -n "$fwd" link set "${tag}b" up
ip -n "$fwd" link set "${tag}c" up
ip -n "$sink" link set "${tag}d" up
ip netns exec "$fwd" sysctl -qw net.ipv4.ip_forward=1
ip -n "$snd" route add 198.19.0.0/16 via 198.18.0.2
ip -n "$fwd" route add 198.19.0.0/16 via 198.18.0.6
ip -n "$sink" route add local 198.18.0.0/15 dev lo
# Drop at the sink's input so the sink does not answer with ICMP.
ip netns exec "$sink" nft add table ip fsg 2>/dev/null && \
  ip netns exec "$sink" nft add chain ip fsg in '{ type filter hook input priority 0; policy accept; }' && \
  ip netns exec "$sink" nft add rule ip fsg in udp dport 9 counter drop || true
ip netns exec "$snd" python3 - <<'PY' &
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.time() + 4
i = 0
payload = b"x" * 18
while time.time() < end:
    s.sendto(payload, ("198.19.%d.%d" % ((i >> 8) & 255, i & 255), 9))
    i += 1
print("sent", i)
PY
sleep 1
perf record -q -a -g -e cpu-clock -F 1000 -o "$out/kernel-forwarding.perf.data" -- sleep 1.5
wait
grep -E ' [tT] ' /proc/kallsyms | gzip -9 > "$out/kernel-forwarding.kallsyms.gz"
# perf's own report, made now (same boot: /proc/kallsyms still matches the samples).
perf report -i "$out/kernel-forwarding.perf.data" --stdio --sort sym -g none --no-children \
  > "$out/results/kernel-forwarding.perf-report.txt" 2>/dev/null
chmod 644 "$out/kernel-forwarding.perf.data"
