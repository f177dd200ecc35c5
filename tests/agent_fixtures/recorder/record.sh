#!/bin/sh
# Records one stream-json fixture from the real CLI against recorder/fake_upstream.py, with
# loopback only (nothing the CLI tries on its own leaves the machine):
#   unshare -n sh tests/agent_fixtures/recorder/record.sh SCENARIO OUT.jsonl [claude args...] PROMPT
# SCENARIO: text | thinking | bash* | maxturns | denied | error529 (see fake_upstream.py).
# CLAUDE: the CLI (default: claude on PATH). MAXR: CLAUDE_CODE_MAX_RETRIES (1 for error529).
# As uid 0, --permission-mode bypassPermissions needs IS_SANDBOX=1 (set here).
set -e
scen=$1; out=$(realpath -m "$2"); shift 2
here=$(dirname "$(realpath "$0")")
scratch=$(mktemp -d /tmp/cc-record-XXXXXX)
ip link set lo up
mkdir -p "$scratch/work" "$scratch/home"
cd "$scratch/work"
python3 "$here/fake_upstream.py" 18765 "$scen" "$scratch/requests.log" & fake=$!
for i in $(seq 1 50); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 18765), 0.2)' 2>/dev/null && break
  sleep 0.1
done
status=0
CLAUDE_CODE_MAX_RETRIES=${MAXR:-10} HOME="$scratch/home" ANTHROPIC_BASE_URL=http://127.0.0.1:18765 \
  ANTHROPIC_API_KEY=sk-fake CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 IS_SANDBOX=1 \
  timeout 120 "${CLAUDE:-claude}" -p --output-format stream-json --verbose "$@" > "$out" || status=$?
kill $fake
echo "claude exit status $status; upstream requests:"; cat "$scratch/requests.log"
rm -rf "$scratch"
