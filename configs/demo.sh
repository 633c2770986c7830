#!/usr/bin/env bash
# pacer demo: runs pacerd with configs/demo.yaml between two namespaces it
# creates, sends iperf3 traffic through two classes and one unthrottled
# flow, prints configured vs achieved rates, and removes everything.
# Run as root from the repository root: sudo make demo
set -euo pipefail

PACERD=${PACERD:-bin/pacerd}
CONFIG=${CONFIG:-configs/demo.yaml}
NS_A=pacer-demo-a
NS_B=pacer-demo-b
SECS=${SECS:-6}
LOG=$(mktemp /tmp/pacerd-demo.XXXXXX.log)

if [ "$(id -u)" -ne 0 ]; then
	echo "demo: needs root (TUN devices and namespaces): sudo make demo" >&2
	exit 1
fi
for ns in "$NS_A" "$NS_B"; do
	if ip netns list | grep -qw "$ns"; then
		echo "demo: namespace $ns exists already (an earlier demo still running?)" >&2
		exit 1
	fi
done

pid=""
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		wait "$pid" || true
	fi
	# pacerd removes the namespaces it created; this covers a crash.
	for ns in "$NS_A" "$NS_B"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	done
	[ -n "${DEMO_DEBUG:-}" ] && cat "$LOG" >&2
	rm -f "$LOG"
}
trap cleanup EXIT

echo "== starting pacerd with $CONFIG"
"$PACERD" -config "$CONFIG" 2>"$LOG" &
pid=$!
for _ in $(seq 100); do
	grep -q "pacerd running" "$LOG" && break
	if ! kill -0 "$pid" 2>/dev/null; then cat "$LOG" >&2; exit 1; fi
	sleep 0.1
done
grep "tun device ready" "$LOG" | sed 's/^/   /'

for port in 5201 5202 5203; do
	ip netns exec "$NS_B" iperf3 -s -1 -B 198.18.0.2 -p "$port" >/dev/null 2>&1 &
done
sleep 0.5

# iperf3's receiver goodput (Mbit/s), from its plain-text summary.
goodput() { awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i+1) ~ /bits\/sec/) { v = $i; u = $(i+1) } }
	END { if (u ~ /^K/) v /= 1000; if (u ~ /^G/) v *= 1000; printf "%.2f", v }'; }

echo "== ${SECS}s at once: TCP to :5201 (class bulk-tcp), UDP offered at 40 Mbit/s to :5202 (class video-udp)"
tcp=$(mktemp); udp=$(mktemp); free=$(mktemp)
ip netns exec "$NS_A" iperf3 -c 198.18.0.2 -p 5201 -t "$SECS" -O 1 >"$tcp" 2>&1 & c1=$!
ip netns exec "$NS_A" iperf3 -c 198.18.0.2 -p 5202 -t "$SECS" -O 1 -u -b 40M -l 1400 >"$udp" 2>&1 & c2=$!
sleep $((SECS / 2 + 1))
echo "== pacerctl status, mid-run (achieved: IP bytes over the last second)"
"${PACERCTL:-bin/pacerctl}" -socket /run/pacerd-demo.sock status | sed 's/^/   /'
wait "$c1" "$c2"
echo "== ${SECS}s: TCP to :5203, which matches no class (unthrottled)"
ip netns exec "$NS_A" iperf3 -c 198.18.0.2 -p 5203 -t "$SECS" -O 1 >"$free" 2>&1

t=$(goodput <"$tcp"); u=$(goodput <"$udp"); f=$(goodput <"$free")
# Shaping counts IP bytes; iperf3 counts payload. TCP segments carry 52
# header bytes per 1448 of payload, UDP datagrams of 1400 bytes carry 28.
printf '\n%-12s %-6s %12s %17s %17s\n' class proto configured "goodput" "IP rate"
row() { awk -v c="$1" -v p="$2" -v r="$3" -v g="$4" -v wire="$5" -v payload="$6" \
	'BEGIN { printf "%-12s %-6s %12s %10.2f Mbit/s %10.2f Mbit/s\n", c, p, r, g, g * wire / payload }'; }
row bulk-tcp tcp "5 Mbit/s" "$t" 1500 1448
row video-udp udp "20 Mbit/s" "$u" 1428 1400
row unclassified tcp "unlimited" "$f" 1500 1448
[ -n "${DEMO_DEBUG:-}" ] && cat "$tcp" "$udp" "$free"
rm -f "$tcp" "$udp" "$free"
echo
echo "== stopping pacerd (SIGTERM: drain, remove devices and namespaces)"
