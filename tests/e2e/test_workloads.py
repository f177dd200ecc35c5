"""Real workloads in a box, under the seccomp allowlist, the masked /proc and the reduced /etc
(issue 17): what an agent does all day must keep working. Each runs offline, from files the test
gives the box: a compiler, a parallel build, a Python venv installing a local wheel, Node with a
worker thread, git cloning a local repository, and Claude Code itself."""
import base64
import hashlib
import io
import zipfile

import pytest

from conftest import sh

SLOW = {"timeout": 120}


@pytest.fixture(scope="module")
def box(daemon):
    c = daemon.client(user="workloads", timeout=180)
    yield c
    c.close()


def upload(client, name, data, directory="."):
    r = client.post("/files/upload", params={"directory": directory}, files={"file": (name, data)})
    assert r.status_code == 200, r.text


def ok(client, command):
    code, out, err = sh(client, command)
    assert code == 0, f"{command!r} exited {code}\nstdout: {out}\nstderr: {err}"
    return out


def test_gcc_builds_and_runs_a_c_program(box):
    upload(box, "hello.c", b'#include <stdio.h>\nint main(void) { printf("sum=%d\\n", 40 + 2); return 0; }\n')
    assert ok(box, "gcc -O2 -Wall -o hello hello.c && ./hello") == "sum=42\n"


def test_make_j4_builds_in_parallel(box):
    units = {f"u{i}.c": f"int u{i}(void) {{ return {i}; }}\n".encode() for i in range(8)}
    main = "#include <stdio.h>\n" + "".join(f"int u{i}(void);\n" for i in range(8))
    main += "int main(void) { printf(\"total=%d\\n\", " + " + ".join(f"u{i}()" for i in range(8)) + "); return 0; }\n"
    makefile = ("OBJS = main.o " + " ".join(f"u{i}.o" for i in range(8)) + "\n"
                "app: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n%.o: %.c\n\t$(CC) -O1 -c -o $@ $<\n")
    ok(box, "mkdir -p proj")
    for name, data in {**units, "main.c": main.encode(), "Makefile": makefile.encode()}.items():
        upload(box, name, data, "proj")
    assert ok(box, "cd proj && make -j4 -s app && ./app") == "total=28\n"


def wheel(name, version, module_source):
    """A pure-Python wheel made by hand: the module, METADATA, WHEEL and a RECORD with hashes."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": module_source,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: agentbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    record += f"{dist}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{dist}/RECORD", record)
    return f"{name}-{version}-py3-none-any.whl", buf.getvalue()


def test_a_venv_installs_a_local_wheel_with_pip(box):
    name, data = wheel("abx_local_pkg", "1.0", b"VALUE = 6 * 7\n")
    upload(box, name, data)
    out = ok(box, f"python3 -m venv venv && PIP_DISABLE_PIP_VERSION_CHECK=1 venv/bin/pip install -q --no-index "
                  f"--no-cache-dir ./{name} && venv/bin/python -c 'import abx_local_pkg; print(abx_local_pkg.VALUE)'")
    assert out.strip().endswith("42"), out


def test_node_runs_a_worker_thread(box):
    script = (b"const { Worker } = require('worker_threads');\n"
              b"const w = new Worker(\"require('worker_threads').parentPort.postMessage(6 * 7)\", { eval: true });\n"
              b"w.on('message', (m) => { console.log('worker says ' + m); });\n")
    upload(box, "worker.js", script)
    assert ok(box, "node worker.js") == "worker says 42\n"


def test_git_clones_a_local_repository(box):
    out = ok(box, "rm -rf origin copy && git init -q origin && cd origin && printf 'hello\\n' > README && "
                  "git add README && git -c user.name=t -c user.email=t@example.invalid commit -qm first && cd .. && "
                  "git clone -q origin copy && git -C copy log --format=%s && cat copy/README")
    assert out == "first\nhello\n"


def test_claude_code_runs(box):
    out = ok(box, "claude --version")
    assert "Claude Code" in out, out
