"""A notebook cell's round trip (issue 33): `1+1` through agentbox (POST /notebooks/{id}/execute
over one keep-alive connection: HTTP, the daemon, the bridge's stdin and stdout, the kernel in
the user's box) vs the same cell through jupyter_client against a kernel on the host (the
client's execute, the iopub messages up to idle, the shell reply): what Open Terminal does in its
own process. Alternating blocks, after a warm-up on each; medians and p90. Target: <= 1.5x.

    /usr/bin/python3 bench/notebook_bench.py AGENTBOX_BIN [CELLS]

Debian's python3 (python3-jupyter-client, python3-ipykernel: scripts/install-deps.sh).
"""
import http.client
import os as _os

_os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # the kernels' debugpy: no banner

import json
import os
import queue
import statistics
import sys
import time
import uuid

from jupyter_client.manager import KernelManager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402

KEY = "bench-" + uuid.uuid4().hex
BLOCK = 50


class Agentbox:
    def __init__(self, binary):
        self.daemon = bench_util.Daemon(binary, KEY, who="notebook_bench")
        host, port = self.daemon.url[len("http://"):].split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=300)
        self.headers = {"Authorization": f"Bearer {KEY}", "X-User-Id": "nb-bench",
                        "Content-Type": "application/json"}
        nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
              "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                         "source": "1+1"}]}
        self.call("POST", "/files/write", {"path": "bench.ipynb", "content": json.dumps(nb)})
        self.id = self.call("POST", "/notebooks", {"path": "bench.ipynb"})["id"]

    def call(self, method, path, body):
        self.conn.request(method, path, body=json.dumps(body), headers=self.headers)
        r = self.conn.getresponse()
        data = r.read()
        assert r.status == 200, (r.status, data)
        return json.loads(data)

    def cell(self):
        out = self.call("POST", f"/notebooks/{self.id}/execute", {"cell_index": 0})
        assert out["status"] == "ok" and out["outputs"][0]["data"]["text/plain"] == "2", out

    def stop(self):
        self.conn.close()
        self.daemon.stop()


class Local:
    def __init__(self):
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def cell(self):
        msg_id = self.kc.execute("1+1")
        result = None
        while True:
            msg = self.kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["header"]["msg_type"] == "execute_result":
                result = msg["content"]["data"]["text/plain"]
            if msg["header"]["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        while True:
            reply = self.kc.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        assert result == "2" and reply["content"]["status"] == "ok"

    def stop(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def timed(run, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        out.append(time.perf_counter() - t0)
    return out


def main():
    binary = sys.argv[1]
    cells = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    load = bench_util.wait_quiet("notebook_bench")
    box, local = Agentbox(binary), Local()
    try:
        for side in (box, local):
            timed(side.cell, 30)  # warm-up: imports, caches, the box's first cells
        times = {"agentbox": [], "local": []}
        for _ in range(max(1, cells // BLOCK)):
            times["agentbox"] += timed(box.cell, BLOCK)
            times["local"] += timed(local.cell, BLOCK)
    finally:
        box.stop()
        local.stop()
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    p90 = {k: bench_util.percentile(v, 90) * 1000 for k, v in times.items()}
    print(f"notebook_bench: load before {load}, after {bench_util.loadavg()} (1/5/15 min); "
          f"{len(times['local'])} cells each")
    for k in ("local", "agentbox"):
        print(f"  {k:9s} median {med[k]:.2f} ms  p90 {p90[k]:.2f} ms")
    print(f"  agentbox / local: median {med['agentbox'] / med['local']:.2f}x (target <= 1.5x), "
          f"p90 {p90['agentbox'] / p90['local']:.2f}x")


if __name__ == "__main__":
    main()
