# Shared by the bench scripts (sourced): ports, the daemon's start, medians.

# The daemons started here get a uid range of their own (a running daemon holds its range
# exclusively; slots 12288-16383 of tests/support/uid_range.hpp's scheme, by this shell's pid), so a
# bench runs beside the tests or a daemon on the default range.
export AGENTBOX_UID_BASE=$((2000000 + 65536 * (12288 + $$ % 4096)))

# A TCP port free on 127.0.0.1 right now.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Waits for the program PID, writing LOG, to log the port it listens on (the sed expression
# PATTERN prints it); prints the port, or the log and fails naming CALLER.
logged_port() {
  local pid=$1 log=$2 caller=$3 pattern=$4 port=
  for _ in $(seq 150); do
    port=$(sed -n "$pattern" "$log")
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if [[ -z $port ]]; then
    echo "$caller: pid $pid did not come up; its output:" >&2
    cat "$log" >&2
    return 1
  fi
  echo "$port"
}

# Waits for `agentbox serve` (PID, writing LOG) to print its address; prints the port, or the
# log and fails naming CALLER.
daemon_port() { logged_port "$1" "$2" "$3" 's|.* serving on http://127\.0\.0\.1:\([0-9]*\) .*|\1|p'; }

# The median of the numbers on stdin, one per line.
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# Builds TARGETs in BUILD (configured as a Release build the first time); NO_BUILD=1 uses BUILD
# as it is, JOBS sets the build's parallelism.
build_bench() {
  local build=$1 root
  shift
  [[ ${NO_BUILD:-0} == 1 ]] && return 0
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  [[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target "$@" ${JOBS:+-j "$JOBS"} >/dev/null
}
