#!/usr/bin/env bash
# WebDAV side by side: Apache httpd + mod_dav, nginx + dav/dav-ext, and
# berth, all over HTTPS on loopback, measured one after the other in one run.
#
#   sudo bench/webdav.sh                      # about 5 minutes
#   BENCH_BIG_MIB=256 sudo bench/webdav.sh    # a smaller large file
#   BERTH_GOMAXPROCS=3 sudo bench/webdav.sh   # berth alone with 3 Ps
#
# Needs root (the peers drop to www-data), Go, curl, openssl and
# `apt-get install -y apache2 nginx-extras wrk`. The peers run from their
# own config files in a temp dir (bench/webdav/*.conf), never the system
# services. Apache and nginx have no auth and never fsync; berth uses Basic
# auth (cached after the first check) and acknowledges a PUT only once it is
# durable, so the script also measures the disk's own fsynced write rate.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
export PATH="$PATH:/usr/local/go/bin"

BIG_MIB="${BENCH_BIG_MIB:-1024}"
SMALL_N="${BENCH_SMALL_N:-2000}" # 4 KiB PUTs, 8 clients
CYCLE_N="${BENCH_CYCLE_N:-1000}" # MKCOL+PUT+MOVE+DELETE cycles, 4 clients
LIST_N="${BENCH_LIST_N:-10000}" # files in the PROPFIND folder
PW="bench-password-1"

die() { echo "webdav.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (Apache and nginx switch to www-data)"
for t in apache2 nginx wrk openssl curl go; do
	command -v "$t" >/dev/null || die "$t is missing: apt-get install -y apache2 nginx-extras wrk openssl curl (Go in /usr/local/go)"
done
[ -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ] || die "nginx dav-ext module missing: apt-get install -y nginx-extras"

TMP="$(mktemp -d /tmp/berth-webdav-bench.XXXXXX)"
chmod 755 "$TMP" # www-data must reach the peers' trees
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START="$(load)"
log() { echo "[$(date +%T) load $(load)] $*" >&2; }

# free_port prints a loopback TCP port nobody listens on.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 40000))
		if ! ss -Htln "sport = :$p" | grep -q .; then echo "$p"; return; fi
	done
	die "no free port"
}

# wait_up URL: until the server answers anything over HTTPS (10 s at most).
wait_up() {
	for _ in $(seq 100); do
		curl -ks -o /dev/null --max-time 2 "$1" && return 0
		sleep 0.1
	done
	die "$1 did not come up"
}

# vmhwm PID...: the sum of the processes' peak resident sets, in MiB.
vmhwm() {
	local kb=0 v
	for p in "$@"; do
		v="$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)"
		kb=$((kb + ${v:-0}))
	done
	awk -v kb="$kb" 'BEGIN {printf "%.1f", kb / 1024}'
}

# kv OUTPUT KEY: the value of KEY=... in davload's output.
kv() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

# secs: wall clock in seconds with nanoseconds.
secs() { date +%s.%N; }

log "building berth and davload"
(cd "$REPO" && go build -o "$TMP/berth" . && go build -o "$TMP/davload" ./bench/webdav/davload)
DAVLOAD="$TMP/davload"

log "certificate, ${BIG_MIB} MiB of random data"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
	-keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
chmod 644 "$TMP/key.pem"
head -c "$((BIG_MIB << 20))" /dev/urandom >"$TMP/big.bin"
BIG_BYTES="$((BIG_MIB << 20))"

# --- the disk's own rate, in the same run --------------------------------
log "disk: dd ${BIG_MIB} MiB, O_DIRECT + fsync, then buffered + fsync"
sync
t0="$(secs)"
dd if=/dev/zero of="$TMP/dd.bin" bs=1M count="$BIG_MIB" oflag=direct conv=fsync status=none
t1="$(secs)"
DISK_DIRECT="$(awk -v b="$BIG_BYTES" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.1f", b / (z - a) / 1e6}')"
rm -f "$TMP/dd.bin"
t0="$(secs)"
dd if=/dev/zero of="$TMP/dd.bin" bs=1M count="$BIG_MIB" conv=fsync status=none
t1="$(secs)"
DISK_BUFFERED="$(awk -v b="$BIG_BYTES" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.1f", b / (z - a) / 1e6}')"
rm -f "$TMP/dd.bin"
log "disk: $SMALL_N files of 4 KiB, each fdatasynced, 8 writers"
sync
DISK_SMALL="$(kv "$("$DAVLOAD" fsync -dir "$TMP/fsync" -n "$SMALL_N" -c 8 -size 4096)" per_second)"
rm -rf "$TMP/fsync"

# --- start the three servers ---------------------------------------------
fill() { sed -e "s|@DIR@|$1|g" -e "s|@PORT@|$2|g" -e "s|@CERT@|$TMP/cert.pem|g" -e "s|@KEY@|$TMP/key.pem|g" "$3" >"$1/server.conf"; }

# The PROPFIND folder of the peers is written straight to disk.
for s in apache nginx; do
	mkdir -p "$TMP/$s/www" "$TMP/$s/lock" "$TMP/$s/tmp"
	"$DAVLOAD" files -dir "$TMP/$s/www/list" -n "$LIST_N" -size 4096
	chown -R www-data:www-data "$TMP/$s/www" "$TMP/$s/lock" "$TMP/$s/tmp"
done

APORT="$(free_port)"
fill "$TMP/apache" "$APORT" "$HERE/webdav/apache.conf"
apache2 -f "$TMP/apache/server.conf" -DFOREGROUND 2>"$TMP/apache/stderr" &
APID=$!
PIDS+=("$APID")

NPORT="$(free_port)"
fill "$TMP/nginx" "$NPORT" "$HERE/webdav/nginx.conf"
nginx -c "$TMP/nginx/server.conf" -g 'daemon off;' 2>"$TMP/nginx/stderr" &
NPID=$!
PIDS+=("$NPID")

# berth logs at warn, without its line per request, as the peers run with
# access_log off and no CustomLog: a line per request is a write system
# call per request, 15-20% of the small GETs' rate here.
# berth starts twice: the first start creates the data directory and the
# administrator (an argon2id hash of 64 MiB), which a running server has
# long left behind; the second is the one measured. GOGC and GOMEMLIMIT in
# the environment pass through.
BPORT="$(free_port)"
MPORT="$(free_port)"
mkdir -p "$TMP/berthd"
start_berth() {
	env BERTH_ADMIN_PASSWORD="$PW" ${BERTH_GOMAXPROCS:+GOMAXPROCS="$BERTH_GOMAXPROCS"} "$TMP/berth" serve --data "$TMP/berthd/data" \
		--listen "127.0.0.1:$BPORT" --metrics-listen "127.0.0.1:$MPORT" --log-level warn >>"$TMP/berthd/log" 2>&1 &
	BPID=$!
	PIDS+=("$BPID")
}
start_berth
wait_up "https://127.0.0.1:$BPORT/webdav/"
kill "$BPID"
for _ in $(seq 100); do kill -0 "$BPID" 2>/dev/null || break; sleep 0.1; done
start_berth

wait_up "https://127.0.0.1:$APORT/"
wait_up "https://127.0.0.1:$NPORT/"
wait_up "https://127.0.0.1:$BPORT/webdav/"
# berth's resident memory at rest after its start (target < 40 MiB):
# after a wait_up (one request), before any transfer.
sleep 2
BERTH_IDLE="$(awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$BPID/status")"

# berth's WebDAV folder for the administrator's root: the first child of /webdav/.
ROOTHREF="$(curl -ks --max-time 30 -u "admin:$PW" -X PROPFIND -H 'Depth: 1' "https://127.0.0.1:$BPORT/webdav/" |
	grep -o '<[A-Za-z]*:*href>[^<]*</[A-Za-z]*:*href>' | sed -e 's/<[^>]*>//g' | grep -v '^/webdav/$' | head -1)"
[ -n "$ROOTHREF" ] || die "berth: no root under /webdav/ (log: $(tail -5 "$TMP/berthd/log"))"
log "berth root at $ROOTHREF"

log "berth: $LIST_N PUTs of 4 KiB (8 clients) for the PROPFIND folder"
BERTH_LIST_PUTS="$("$DAVLOAD" put -url "https://127.0.0.1:$BPORT${ROOTHREF}list/" -user admin -pass "$PW" -n "$LIST_N" -c 8 -size 4096)"
log "berth: $BERTH_LIST_PUTS"

declare -A R

# sync_stats: berth's group-commit counters now (kv/badger's SyncStats via
# /metrics): commits, rounds, round seconds, wait seconds.
sync_stats() {
	curl -s --max-time 10 "http://127.0.0.1:$MPORT/metrics" | awk '
		/^berth_kv_sync_commits_total / {c = $2}
		/^berth_kv_sync_rounds_total / {r = $2}
		/^berth_kv_sync_round_seconds_total / {rs = $2}
		/^berth_kv_sync_wait_seconds_total / {ws = $2}
		END {printf "%s %s %s %s\n", c, r, rs, ws}'
}
# sync_delta BEFORE AFTER OPS: what durability cost berth between two
# sync_stats: sync rounds per operation, a round's mean length and a
# commit's mean wait for its round, in microseconds. A commit that
# arrives during a round waits for the rest of it and all of the next.
sync_delta() {
	awk -v b="$1" -v a="$2" -v n="$3" 'BEGIN {
		split(b, x, " "); split(a, y, " ")
		c = y[1] - x[1]; r = y[2] - x[2]
		if (c <= 0 || r <= 0) { print "no synced commits"; exit }
		printf "%.2f rounds per operation, a round %.0f us, a commit waited %.0f us\n", r / n, (y[3] - x[3]) / r * 1e6, (y[4] - x[4]) / c * 1e6
	}'
}

# measure NAME BASE_URL [user]: every figure for one server, into R[NAME.*].
measure() {
	local name="$1" base="$2" user="${3:-}"
	local -a cauth=() dauth=() wauth=()
	if [ -n "$user" ]; then
		cauth=(-u "$user:$PW")
		dauth=(-user "$user" -pass "$PW")
		wauth=(-H "Authorization: Basic $(printf '%s:%s' "$user" "$PW" | base64 -w0)")
	fi
	R[$name.load]="$(load)"
	local out code t

	log "$name: PUT ${BIG_MIB} MiB"
	sync
	out="$(curl -ks --max-time 900 "${cauth[@]}" -o /dev/null -w '%{http_code} %{time_total}' -T "$TMP/big.bin" "${base}big.bin")"
	read -r code t <<<"$out"
	case "$code" in 200 | 201 | 204) ;; *) die "$name: PUT big answered $code" ;; esac
	R[$name.put]="$(awk -v b="$BIG_BYTES" -v t="$t" 'BEGIN {printf "%.1f", b / t / 1e6}')"

	log "$name: GET ${BIG_MIB} MiB"
	out="$(curl -ks --max-time 900 "${cauth[@]}" -o /dev/null -w '%{http_code} %{time_total} %{size_download}' "${base}big.bin")"
	local size
	read -r code t size <<<"$out"
	[ "$code" = 200 ] && [ "$size" = "$BIG_BYTES" ] || die "$name: GET big: $out"
	R[$name.get]="$(awk -v b="$BIG_BYTES" -v t="$t" 'BEGIN {printf "%.1f", b / t / 1e6}')"

	log "$name: $SMALL_N PUTs of 4 KiB, 8 clients"
	sync
	local before=""
	if [ "$name" = berth ]; then before="$(sync_stats)"; fi
	out="$("$DAVLOAD" put -url "${base}small/" "${dauth[@]}" -n "$SMALL_N" -c 8 -size 4096)"
	R[$name.small]="$(kv "$out" per_second)"
	if [ "$name" = berth ]; then R[berth.small_sync]="$(sync_delta "$before" "$(sync_stats)" "$SMALL_N")"; fi

	log "$name: wrk 4 KiB GETs (2 threads, 32 connections, 10 s)"
	out="$(wrk -t2 -c32 -d10s --timeout 5s "${wauth[@]}" "${base}small/f00000.bin")"
	if grep -q 'Non-2xx' <<<"$out"; then die "$name: wrk saw errors: $out"; fi
	R[$name.wrk]="$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out")"

	log "$name: $CYCLE_N cycles of MKCOL, PUT 4 KiB, MOVE, DELETE, 4 clients"
	sync
	if [ "$name" = berth ]; then before="$(sync_stats)"; fi
	out="$("$DAVLOAD" cycle -url "${base}cycles/" "${dauth[@]}" -n "$CYCLE_N" -c 4 -size 4096)"
	R[$name.cycle]="$(kv "$out" per_second)"
	if [ "$name" = berth ]; then R[berth.cycle_sync]="$(sync_delta "$before" "$(sync_stats)" "$((CYCLE_N * 4))")"; fi

	# The two requests alternate on one connection, 9 runs each, so that a
	# change of load on this shared machine falls on both; the ratio is the
	# median of the 9 runs' own allprop / named.
	log "$name: PROPFIND Depth 1 of $LIST_N files, named properties and allprop alternating, median of 9 each"
	out="$("$DAVLOAD" propfind -url "${base}list/" "${dauth[@]}" -runs 9)"
	[ "$(kv "$out" entries)" = "$((LIST_N + 1))" ] || die "$name: PROPFIND listed $(kv "$out" entries) entries, want $((LIST_N + 1))"
	[ "$(kv "$out" allprop_entries)" = "$((LIST_N + 1))" ] || die "$name: PROPFIND allprop listed $(kv "$out" allprop_entries) entries, want $((LIST_N + 1))"
	R[$name.propfind]="$(kv "$out" named_ms)"
	R[$name.allprop]="$(kv "$out" allprop_ms)"
	R[$name.propfind_ratio]="$(kv "$out" ratio)"
	R[$name.propfind_spread]="named $(kv "$out" named_min_ms)-$(kv "$out" named_max_ms) ms, allprop $(kv "$out" allprop_min_ms)-$(kv "$out" allprop_max_ms) ms"

	# The first GET above reads a file just written: berth writes its
	# chunks past the page cache (O_DIRECT), so that read comes off the
	# device, where nginx and Apache find the file in the page cache. A
	# file downloaded often is read from memory by every server: the
	# third read shows that (berth's second fills the page cache).
	log "$name: GET ${BIG_MIB} MiB twice more, the third read timed"
	local i
	for i in 2 3; do
		out="$(curl -ks --max-time 900 "${cauth[@]}" -o /dev/null -w '%{http_code} %{time_total} %{size_download}' "${base}big.bin")"
		read -r code t size <<<"$out"
		[ "$code" = 200 ] && [ "$size" = "$BIG_BYTES" ] || die "$name: GET big, read $i: $out"
	done
	R[$name.get3]="$(awk -v b="$BIG_BYTES" -v t="$t" 'BEGIN {printf "%.1f", b / t / 1e6}')"
}

measure apache "https://127.0.0.1:$APORT/"
measure nginx "https://127.0.0.1:$NPORT/"
measure berth "https://127.0.0.1:$BPORT$ROOTHREF" admin

# A bare Go HTTPS server with the same Basic check, serving from memory:
# the ceiling of a Go server for the GET figures on this machine.
log "bare Go HTTPS server: wrk 4 KiB GETs (2 threads, 32 connections, 10 s)"
: >"$TMP/serve.out"
mkdir -p "$TMP/durable"
"$DAVLOAD" serve -listen "127.0.0.1:$(free_port)" -cert "$TMP/cert.pem" -key "$TMP/key.pem" \
	-user admin -pass "$PW" -size 4096 -big "$BIG_BYTES" -dir "$TMP/durable" >"$TMP/serve.out" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do grep -q '^listen=' "$TMP/serve.out" && break; sleep 0.1; done
GADDR="$(sed -n 's/^listen=//p' "$TMP/serve.out")"
[ -n "$GADDR" ] || die "davload serve did not start: $(cat "$TMP/serve.out")"
out="$(wrk -t2 -c32 -d10s --timeout 5s -H "Authorization: Basic $(printf '%s:%s' admin "$PW" | base64 -w0)" "https://$GADDR/f00000.bin")"
if grep -q 'Non-2xx' <<<"$out"; then die "bare Go server: wrk saw errors: $out"; fi
GO_WRK="$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out")"
# Its large transfers are the denominators of berth's ratios, and one run
# of each swung from 571 to 811 MB/s between two quiet runs: the median
# of three is taken. (The servers' own GET is their first read of a file
# just written, as a client's first download is, so it is run once.)
median3() { sort -n | sed -n 2p; }
log "bare Go HTTPS server: GET ${BIG_MIB} MiB, median of 3"
GO_GET="$(for _ in 1 2 3; do
	out="$(curl -ks --max-time 900 -u "admin:$PW" -o /dev/null -w '%{http_code} %{time_total} %{size_download}' "https://$GADDR/big.bin")"
	read -r code t size <<<"$out"
	[ "$code" = 200 ] && [ "$size" = "$BIG_BYTES" ] || die "bare Go server: GET big: $out"
	awk -v b="$BIG_BYTES" -v t="$t" 'BEGIN {printf "%.1f\n", b / t / 1e6}'
done | median3)"
log "bare Go HTTPS server: PUT ${BIG_MIB} MiB (read and discarded), median of 3"
GO_PUT="$(for _ in 1 2 3; do
	out="$(curl -ks --max-time 900 -u "admin:$PW" -o /dev/null -w '%{http_code} %{time_total}' -T "$TMP/big.bin" "https://$GADDR/big.bin")"
	read -r code t <<<"$out"
	[ "$code" = 201 ] || die "bare Go server: PUT big: $out"
	awk -v b="$BIG_BYTES" -v t="$t" 'BEGIN {printf "%.1f\n", b / t / 1e6}'
done | median3)"
# berth's wrk run and the bare server's are minutes apart, at other load
# averages, and one run of either swung by a fifth between two quiet runs
# of this script. So the two also take turns while both run, 5 s each,
# three times; the ratio of the medians is the steadier figure.
log "4 KiB GETs, berth and the bare Go server taking turns, 3 x 5 s each"
wrk_rate() {
	local out
	out="$(wrk -t2 -c32 -d5s --timeout 5s -H "Authorization: Basic $(printf '%s:%s' admin "$PW" | base64 -w0)" "$1")"
	if grep -q 'Non-2xx' <<<"$out"; then die "wrk $1: $out"; fi
	awk '/^Requests\/sec:/ {printf "%.0f\n", $2}' <<<"$out"
}
TURNS_BERTH="" TURNS_GO=""
for _ in 1 2 3; do
	TURNS_BERTH+="$(wrk_rate "https://127.0.0.1:$BPORT${ROOTHREF}small/f00000.bin")"$'\n'
	TURNS_GO+="$(wrk_rate "https://$GADDR/f00000.bin")"$'\n'
done
TURN_BERTH="$(printf '%s' "$TURNS_BERTH" | median3)"
TURN_GO="$(printf '%s' "$TURNS_GO" | median3)"

# The same server storing what it is sent, durably and with nothing else
# (davload's durableHandler): the floor under every durable server here,
# for the figures where nginx and Apache, which sync nothing, set the
# targets.
log "bare Go HTTPS server, durable: PUT ${BIG_MIB} MiB (median of 3), $SMALL_N PUTs of 4 KiB, $CYCLE_N cycles"
GO_DPUT="$(for _ in 1 2 3; do
	out="$(curl -ks --max-time 900 -u "admin:$PW" -o /dev/null -w '%{http_code} %{time_total}' -T "$TMP/big.bin" "https://$GADDR/durable/big.bin")"
	read -r code t <<<"$out"
	[ "$code" = 201 ] || die "bare Go server: durable PUT big: $out"
	awk -v b="$BIG_BYTES" -v t="$t" 'BEGIN {printf "%.1f\n", b / t / 1e6}'
done | median3)"
cmp -s "$TMP/big.bin" "$TMP/durable/big.bin" || die "bare Go server: the durable PUT stored other bytes"
rm -f "$TMP/durable/big.bin"
GO_DSMALL="$(kv "$("$DAVLOAD" put -url "https://$GADDR/durable/small/" -user admin -pass "$PW" -n "$SMALL_N" -c 8 -size 4096)" per_second)"
GO_DCYCLE="$(kv "$("$DAVLOAD" cycle -url "https://$GADDR/durable/cycles/" -user admin -pass "$PW" -n "$CYCLE_N" -c 4 -size 4096)" per_second)"
# The same server appending each request to one log, with one fdatasync
# for every request that arrives while the last one runs (group commit,
# davload's loggedHandler): the most a durable server reaches on this
# machine for these two figures, as the floor above is the least.
log "bare Go HTTPS server, group commit to one log: $SMALL_N PUTs of 4 KiB, $CYCLE_N cycles"
GO_LSMALL="$(kv "$("$DAVLOAD" put -url "https://$GADDR/logged/small/" -user admin -pass "$PW" -n "$SMALL_N" -c 8 -size 4096)" per_second)"
GO_LCYCLE="$(kv "$("$DAVLOAD" cycle -url "https://$GADDR/logged/cycles/" -user admin -pass "$PW" -n "$CYCLE_N" -c 4 -size 4096)" per_second)"
rm -rf "$TMP/durable"

R[apache.rss]="$(vmhwm "$APID" $(pgrep -P "$APID" || true))"
R[nginx.rss]="$(vmhwm "$NPID" $(pgrep -P "$NPID" || true))"
R[berth.rss]="$(vmhwm "$BPID")"

# --- the table -----------------------------------------------------------
best() { awk -v a="$1" -v b="$2" -v hi="$3" 'BEGIN {print (hi ? (a > b ? a : b) : (a < b ? a : b))}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
row() { # label key higher-is-better
	local bp
	bp="$(best "${R[apache.$2]}" "${R[nginx.$2]}" "$3")"
	printf '| %s | %s | %s | %s | %s |\n' "$1" "${R[apache.$2]}" "${R[nginx.$2]}" "${R[berth.$2]}" "$(ratio "${R[berth.$2]}" "$bp")"
}
echo
echo "WebDAV over HTTPS on loopback, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average at start $LOAD_START, at end $(load)"
echo "(load at the start of each server's turn: apache ${R[apache.load]}, nginx ${R[nginx.load]}, berth ${R[berth.load]})"
echo
echo "| figure | Apache | nginx | berth | berth / better peer |"
echo "|---|---|---|---|---|"
row "PUT ${BIG_MIB} MiB, MB/s" put 1
row "GET ${BIG_MIB} MiB, MB/s" get 1
row "GET ${BIG_MIB} MiB, third read (page cache), MB/s" get3 1
row "$SMALL_N PUTs of 4 KiB, 8 clients, files/s" small 1
row "GET 4 KiB under wrk -t2 -c32, requests/s" wrk 1
row "MKCOL+PUT+MOVE+DELETE cycles, 4 clients, per s" cycle 1
row "PROPFIND Depth 1, $LIST_N files, named properties, ms, median of 9 (lower is better)" propfind 0
row "PROPFIND Depth 1, $LIST_N files, allprop, ms, median of 9 (lower is better)" allprop 0
row "peak RSS, MiB (lower is better)" rss 0
echo "| berth idle RSS after start, MiB (target < 40) | | | $BERTH_IDLE | |"
echo
echo "| disk, ${BIG_MIB} MiB of writes | MB/s | berth PUT / this |"
echo "|---|---|---|"
echo "| dd oflag=direct conv=fsync | $DISK_DIRECT | $(ratio "${R[berth.put]}" "$DISK_DIRECT") |"
echo "| dd conv=fsync (page cache, one fsync at the end) | $DISK_BUFFERED | $(ratio "${R[berth.put]}" "$DISK_BUFFERED") |"
echo
echo "| this machine's own limit, same run | figure | berth / this |"
echo "|---|---|---|"
echo "| $SMALL_N files of 4 KiB, each fdatasynced (directory not), 8 writers, files/s | $DISK_SMALL | $(ratio "${R[berth.small]}" "$DISK_SMALL") |"
echo "| bare Go HTTPS server, ${BIG_MIB} MiB PUT read and discarded, MB/s, median of 3 | $GO_PUT | $(ratio "${R[berth.put]}" "$GO_PUT") |"
echo "| bare Go HTTPS server, ${BIG_MIB} MiB GET from memory, MB/s, median of 3 | $GO_GET | $(ratio "${R[berth.get]}" "$GO_GET") |"
echo "| the same, against berth's third read of the file (page cache) | $GO_GET | $(ratio "${R[berth.get3]}" "$GO_GET") |"
echo "| bare Go HTTPS server, 4 KiB from memory, same Basic check, wrk -t2 -c32, requests/s | $GO_WRK | $(ratio "${R[berth.wrk]}" "$GO_WRK") |"
echo "| the same, berth and the bare server taking turns, 3 x 5 s each, median requests/s (berth's: $TURN_BERTH) | $TURN_GO | $(ratio "$TURN_BERTH" "$TURN_GO") |"
echo "| bare Go HTTPS server, durable, ${BIG_MIB} MiB PUT written and fdatasynced, MB/s, median of 3 | $GO_DPUT | $(ratio "${R[berth.put]}" "$GO_DPUT") |"
echo "| bare Go HTTPS server, durable, $SMALL_N PUTs of 4 KiB, 8 clients, each fdatasynced with its folder, files/s | $GO_DSMALL | $(ratio "${R[berth.small]}" "$GO_DSMALL") |"
echo "| bare Go HTTPS server, durable, MKCOL+PUT+MOVE+DELETE cycles, 4 clients, each step synced, per s | $GO_DCYCLE | $(ratio "${R[berth.cycle]}" "$GO_DCYCLE") |"
echo "| bare Go HTTPS server, group commit to one log, $SMALL_N PUTs of 4 KiB, 8 clients, files/s | $GO_LSMALL | $(ratio "${R[berth.small]}" "$GO_LSMALL") |"
echo "| bare Go HTTPS server, group commit to one log, MKCOL+PUT+MOVE+DELETE cycles, 4 clients, per s | $GO_LCYCLE | $(ratio "${R[berth.cycle]}" "$GO_LCYCLE") |"
echo
echo "berth's group commit (berth_kv_sync_* on its /metrics), during its $SMALL_N small PUTs: ${R[berth.small_sync]}; during its cycles (per request): ${R[berth.cycle_sync]}."
echo
echo "| berth's allprop / its named-property PROPFIND, median of 9 alternating pairs (target <= 1.3) | ${R[berth.propfind_ratio]} | ratio of the medians $(ratio "${R[berth.allprop]}" "${R[berth.propfind]}"); ${R[berth.propfind_spread]} |"
echo
echo "berth, $LIST_N PUTs of 4 KiB for the PROPFIND folder: $BERTH_LIST_PUTS"
