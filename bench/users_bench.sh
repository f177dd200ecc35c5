#!/usr/bin/env bash
# Many users on one node (issue 37): the memory, volumes and first-command trend of USERS active
# users, the cost of KNOWN known users of whom ACTIVE are active (bench/users_bench.py), and the
# machine's floor of one user (bench/user_floor.c: the kernel's part of a process in a box's
# namespaces, cgroups and mounts; and of its volume, made and mounted by hand).
#
#   bench/users_bench.sh [BUILD_DIR]      (run as root)
# Environment: USERS (10000), BATCH (500), KNOWN (100000), ACTIVE (1000), FLOOR_USERS (500),
# FLOOR_VOLUMES (300),
# ONLY (active, known or floor: that part alone), NO_BUILD=1 uses BUILD_DIR as it is, JOBS.
# A node of this many users raises kernel.pid_max (a box is at least two processes; put back
# after) and the descriptor limit.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-bench}
users=${USERS:-10000} known=${KNOWN:-100000} active=${ACTIVE:-1000} only=${ONLY:-}

[[ $(id -u) -eq 0 ]] || { echo "users_bench.sh: run as root" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
build_bench "$build" agentbox agentbox-serve agentbox-init oneshot_floor user_floor
build=$(cd "$build" && pwd)

pid_max=$(cat /proc/sys/kernel/pid_max)
trap 'echo "$pid_max" > /proc/sys/kernel/pid_max' EXIT
(( pid_max >= 4 * users )) || echo $((4 * users > 4194304 ? 4194304 : 4 * users)) > /proc/sys/kernel/pid_max
# As many descriptors as allowed (raising the hard limit needs CAP_SYS_RESOURCE, which a
# container may lack: then its hard limit, printed, bounds the run).
ulimit -n "$(cat /proc/sys/fs/nr_open)" 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"

echo "reproduce: USERS=$users KNOWN=$known ACTIVE=$active bench/users_bench.sh ${1:-}; $(nproc) cores, $(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1048576 )) GiB, $(uname -r), descriptors $(ulimit -n)"
if [[ -z $only || $only == floor ]]; then
  "$build/user_floor" "${FLOOR_USERS:-500}" 3 -- "$build/oneshot_floor" -- /bin/sleep 1d
  /usr/bin/python3 "$here/users_bench.py" "$build/agentbox" volumes --volumes "${FLOOR_VOLUMES:-300}"
fi
if [[ -z $only || $only == active ]]; then
  /usr/bin/python3 "$here/users_bench.py" "$build/agentbox" active --users "$users" --batch "${BATCH:-500}"
  /usr/bin/python3 "$here/users_bench.py" "$build/agentbox" active --users "$users" --batch "${BATCH:-500}" --quotas off
fi
if [[ -z $only || $only == known ]]; then
  /usr/bin/python3 "$here/users_bench.py" "$build/agentbox" known --known "$known" --active "$active"
fi
