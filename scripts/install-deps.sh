#!/usr/bin/env bash
# Installs everything agentbox needs to build, test and benchmark on Debian 12.
# Idempotent and quiet: safe to run on every CI run and every README command.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config git mold
  # libraries (DESIGN §10)
  libboost1.81-dev libboost-url1.81-dev nlohmann-json3-dev libseccomp-dev libsqlite3-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev libre2-dev libssl-dev libzip-dev zlib1g-dev libwslay-dev
  libgtest-dev libgmock-dev
  # skills' YAML front matter (fs/front_matter.cpp)
  libyaml-dev
  # fuzzers (scripts/fuzz.sh): clang and its libFuzzer runtime
  clang libclang-rt-14-dev
  # the style every C++ file follows (.clang-format; scripts/check-format.sh in CI)
  clang-format
  # runtime tools the tests and the box use
  iproute2 procps util-linux python3 bash coreutils tmux curl
  # what the real-workload tests run in boxes (gcc and make come with build-essential)
  python3-venv
  # black-box tests (Debian's interpreter, not the pyenv one on PATH)
  python3-pytest python3-httpx python3-websockets
  # peers for bench/
  bubblewrap tinyproxy socat ripgrep hyperfine websocketd nginx-light wrk rsync
  # the scale-out router (tests/cluster): Debian nginx with set-misc (percent-decodes ?user_id=)
  libnginx-mod-http-set-misc
  # the browser test (tests/e2e/test_browser.py): a real headless Chromium
  chromium
  # notebooks: the kernel every box runs (src/exec/notebook_bridge.py drives it, inside the box)
  python3-ipykernel python3-jupyter-client python3-matplotlib
  # matplotlib needs fonttools, which needs scipy or munkres: scipy pulls libboost1.74-dev, which
  # conflicts with the libboost1.81-dev above, so name munkres and apt takes it
  python3-munkres
  # office previews (GET /files/view?preview=true): LibreOffice headless, run in the box
  libreoffice-writer-nogui libreoffice-impress-nogui libreoffice-calc-nogui
  # tests of previews: pdfinfo reads what they return; python-docx makes a .docx
  poppler-utils python3-docx
  # metrics (tests/e2e/test_metrics.py): a real Prometheus scrapes the daemon; promtool lints the page
  prometheus
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  [[ $(id -u) -eq 0 ]] || { echo "install-deps: run as root to apt-get install: ${missing[*]}" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Claude Code, the agent every box runs (DESIGN §7), into deps/claude-code (git-ignored), pinned:
# the e2e tests run this very CLI in boxes, and a new version may change what it sends. The
# check first keeps a run with it installed instant (npm would take seconds to say so).
claude_code_version=2.1.197
if [[ ${AGENTBOX_SKIP_NPM:-0} != 1 ]]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  prefix=$here/deps/claude-code
  installed=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' \
    "$prefix/node_modules/@anthropic-ai/claude-code/package.json" 2>/dev/null || true)
  if [[ $installed != "$claude_code_version" || ! -x $prefix/node_modules/.bin/claude ]]; then
    command -v npm >/dev/null || { echo "install-deps: npm is needed for @anthropic-ai/claude-code" >&2; exit 1; }
    mkdir -p "$prefix"
    [[ -f $prefix/package.json ]] || echo '{"private": true}' >"$prefix/package.json"
    npm install --prefix "$prefix" --silent --no-audit --no-fund --save-exact \
      "@anthropic-ai/claude-code@$claude_code_version" >/dev/null
    "$prefix/node_modules/.bin/claude" --version >/dev/null \
      || { echo "install-deps: $prefix/node_modules/.bin/claude does not run" >&2; exit 1; }
  fi
fi

# npm peers for benchmarks (srt); optional for tests, so a failure here is reported, not fatal.
if [[ ${AGENTBOX_SKIP_NPM:-0} != 1 ]] && command -v npm >/dev/null; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  if [[ ! -x $here/bench/node_modules/.bin/srt ]]; then
    (cd "$here/bench" && npm install --silent --no-audit --no-fund @anthropic-ai/sandbox-runtime >/dev/null 2>&1) \
      || echo "install-deps: npm install of @anthropic-ai/sandbox-runtime failed (bench only)" >&2
  fi
fi

# JavaScript the tests run, each set pinned in its package.json, into node_modules beside it
# (git-ignored): Kubernetes schemas and a YAML parser for the offline manifest check
# (tests/deploy), the official OpenAI client for /v1 (tests/e2e/openai_client), the official MCP
# client and Ajv for /mcp (tests/e2e/mcp_client). The copy of the
# package.json they were installed from keeps a run with them present instant.
if [[ ${AGENTBOX_SKIP_NPM:-0} != 1 ]]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  for tests_dir in "$here/tests/deploy" "$here/tests/e2e/openai_client" "$here/tests/e2e/mcp_client"; do
    if ! cmp -s "$tests_dir/package.json" "$tests_dir/node_modules/.installed-from.json"; then
      command -v npm >/dev/null || { echo "install-deps: npm is needed for $tests_dir" >&2; exit 1; }
      npm install --prefix "$tests_dir" --silent --no-audit --no-fund --no-save >/dev/null
      cp "$tests_dir/package.json" "$tests_dir/node_modules/.installed-from.json"
    fi
  done
fi

# The browser test's JavaScript (tests/e2e/browser: puppeteer-core drives Debian's chromium,
# xterm.js renders the terminal), pinned in its package.json, the same way.
if [[ ${AGENTBOX_SKIP_NPM:-0} != 1 ]]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  tests_dir=$here/tests/e2e/browser
  if ! cmp -s "$tests_dir/package.json" "$tests_dir/node_modules/.installed-from.json"; then
    command -v npm >/dev/null || { echo "install-deps: npm is needed for $tests_dir" >&2; exit 1; }
    npm install --prefix "$tests_dir" --silent --no-audit --no-fund --no-save >/dev/null
    cp "$tests_dir/package.json" "$tests_dir/node_modules/.installed-from.json"
  fi
fi
