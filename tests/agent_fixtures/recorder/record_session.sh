#!/bin/sh
# Records session.jsonl: the transcript the real CLI keeps (~/.claude/projects/*/ID.jsonl) of one
# session of four turns, against tests/fakes/fake_anthropic.py's directives, loopback only:
#   unshare -n sh tests/agent_fixtures/recorder/record_session.sh OUT.jsonl
# Turns: thinking then text; a Bash call whose output holds a ``` fence; a Bash call that fails
# (an is_error result); an upstream 529 (the CLI's synthetic error message).
# CLAUDE: the CLI (default: claude on PATH). As uid 0 bypassPermissions needs IS_SANDBOX=1 (set).
set -e
out=$(realpath -m "$1")
here=$(dirname "$(realpath "$0")")
scratch=$(mktemp -d /tmp/cc-session-XXXXXX)
ip link set lo up
mkdir -p "$scratch/work" "$scratch/home"
cd "$scratch/work"
python3 "$here/../../fakes/fake_anthropic.py" --port 18766 > "$scratch/fake.log" 2>&1 & fake=$!
for i in $(seq 1 50); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 18766), 0.2)' 2>/dev/null && break
  sleep 0.1
done
turn() {
  CLAUDE_CODE_MAX_RETRIES=0 HOME="$scratch/home" ANTHROPIC_BASE_URL=http://127.0.0.1:18766 \
    ANTHROPIC_API_KEY=sk-fake CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 IS_SANDBOX=1 \
    timeout 120 "${CLAUDE:-claude}" -p --output-format stream-json --verbose \
    --permission-mode bypassPermissions "$@"
}
turn "ponder the report [[think]]" > "$scratch/t1.out"
sid=$(head -1 "$scratch/t1.out" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["session_id"])')
turn --resume "$sid" 'make it [[bash: printf "a\n\`\`\`\nb\n" > r.md; cat r.md]]' > /dev/null
turn --resume "$sid" '[[bash: ls no-such-file]]' > /dev/null
turn --resume "$sid" 'fail please [[error 529]]' > /dev/null || true
kill $fake
cp "$scratch"/home/.claude/projects/*/"$sid".jsonl "$out"
rm -rf "$scratch"
