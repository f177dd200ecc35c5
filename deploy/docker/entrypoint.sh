#!/bin/sh
# The node image's entrypoint: derives this node's uid range from its StatefulSet ordinal
# (POD_NAME or HOSTNAME "agentbox-N"), unless AGENTBOX_UID_BASE is set already, then execs the
# daemon. Two nodes on one machine must not share uids (per-uid kernel limits, file owners);
# each pod's lock in /run/agentbox cannot see the other's, so the ranges are disjoint by
# construction: base + N * stride with a stride of at least [accounts] uid_count.
set -eu
if [ -z "${AGENTBOX_UID_BASE:-}" ]; then
  name=${POD_NAME:-${HOSTNAME:-}}
  ordinal=${name##*-}
  case $ordinal in
    ''|*[!0-9]*) echo "entrypoint: no ordinal in pod name '$name'; set AGENTBOX_UID_BASE" >&2; exit 2 ;;
  esac
  base=${AGENTBOX_UID_BASE_START:-1000000}
  stride=${AGENTBOX_UID_STRIDE:-65536}
  AGENTBOX_UID_BASE=$((base + ordinal * stride))
  export AGENTBOX_UID_BASE
fi
echo "entrypoint: ${POD_NAME:-${HOSTNAME:-node}}: uid range from $AGENTBOX_UID_BASE" >&2
exec "${AGENTBOX_BIN:-/opt/agentbox/build/agentbox}" serve "$@"
