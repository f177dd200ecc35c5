# The notebook bridge: runs one Jupyter kernel (ipykernel) in the user's box, as the user, and
# speaks JSON lines on stdin/stdout to agentbox (exec/notebook_kernels.hpp), so the daemon never
# talks ZMQ into a box. Compiled into agentbox and run as `python3 -c SCRIPT CELL_TIMEOUT`.
#
# In:  {"code": "..."}                    one line per cell, answered in order
# Out: {"ready": true, "kernel": NAME}    once, when the kernel answers
#      {"failed": "why"}                  instead, when it does not start
#      {"status": "ok"|"error", "execution_count": N, "outputs": [nbformat outputs]}
# A cell running past CELL_TIMEOUT seconds is interrupted (SIGINT to the kernel) and answered
# with status "error" and an error output naming the timeout; the kernel is kept. End of input
# or SIGTERM shuts the kernel down.
import json
import os
import queue
import signal
import sys
import time

CELL_TIMEOUT = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
# An answer stays well inside the daemon's output log (16 MiB of a command's newest output): a
# cell's outputs past this many bytes of JSON are cut, and a note says so.
MAX_ANSWER = 8 << 20
INTERRUPT_GRACE = 10.0  # after the interrupt, how long the kernel has to come back idle
# Nothing but our lines on the protocol stream: it moves to a descriptor of its own (not
# inherited), and fd 1 becomes stderr for everything else, the kernel and what a cell's
# subprocesses write to their fd 1 (os.system("printf x") must not glue "x" to an answer).
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr


def send(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()


try:
    from jupyter_client.manager import KernelManager
except Exception as e:  # noqa: BLE001 - any import failure means no kernel
    send({"failed": "jupyter_client is not installed in the box: %s" % e})
    sys.exit(1)

km = KernelManager(kernel_name="python3")


def stop(*_):
    try:
        km.shutdown_kernel(now=True)
    finally:
        os._exit(0)


signal.signal(signal.SIGTERM, stop)

try:
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
except Exception as e:  # noqa: BLE001
    send({"failed": "the kernel did not start: %s" % e})
    try:
        km.shutdown_kernel(now=True)
    except Exception:  # noqa: BLE001
        pass
    sys.exit(1)


def add_output(outputs, msg):
    kind = msg["header"]["msg_type"]
    c = msg["content"]
    if kind == "stream":
        if outputs and outputs[-1]["output_type"] == "stream" and outputs[-1]["name"] == c["name"]:
            outputs[-1]["text"] += c["text"]
        else:
            outputs.append({"output_type": "stream", "name": c["name"], "text": c["text"]})
    elif kind == "execute_result":
        outputs.append({"output_type": "execute_result", "execution_count": c.get("execution_count"),
                        "data": c.get("data", {}), "metadata": c.get("metadata", {})})
    elif kind == "display_data":
        outputs.append({"output_type": "display_data", "data": c.get("data", {}),
                        "metadata": c.get("metadata", {})})
    elif kind == "error":
        outputs.append({"output_type": "error", "ename": c.get("ename", ""), "evalue": c.get("evalue", ""),
                        "traceback": c.get("traceback", [])})
    elif kind == "clear_output":
        outputs.clear()


def run_cell(code):
    # stop_on_error=False: a failed cell must not make the kernel abort the next one sent while it
    # still "aborts the queue" (ipykernel answers that one "aborted", with no output); cells here
    # are sent one at a time anyway.
    msg_id = kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
    outputs = []
    deadline = time.monotonic() + CELL_TIMEOUT
    timed_out = False
    idle = False
    while not idle:
        left = deadline - time.monotonic()
        if left <= 0:
            if timed_out:
                break  # not idle even after the interrupt: answer anyway
            timed_out = True
            km.interrupt_kernel()
            deadline = time.monotonic() + INTERRUPT_GRACE
            continue
        try:
            msg = kc.get_iopub_msg(timeout=left)
        except queue.Empty:
            continue
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if msg["header"]["msg_type"] == "status":
            idle = msg["content"].get("execution_state") == "idle"
        else:
            add_output(outputs, msg)
    status, count = "error", None
    try:
        while True:
            reply = kc.get_shell_msg(timeout=1 if idle else 0.1)
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                status = reply["content"].get("status", "error")
                count = reply["content"].get("execution_count")
                break
    except queue.Empty:
        pass
    if timed_out:
        status = "error"
        outputs.append({"output_type": "error", "ename": "TimeoutError",
                        "evalue": "Cell execution exceeded the cell timeout of %g s and was interrupted" % CELL_TIMEOUT,
                        "traceback": ["TimeoutError: cell execution exceeded the cell timeout of %g s "
                                      "([notebooks] cell_timeout); the kernel was interrupted and kept" % CELL_TIMEOUT]})
        if not idle:  # the interrupt did not stop it: a fresh kernel rather than a stuck one
            km.restart_kernel(now=True)
            kc.wait_for_ready(timeout=60)
    return {"status": "ok" if status == "ok" else "error", "execution_count": count, "outputs": bounded(outputs)}


def bounded(outputs):
    """The outputs, cut to MAX_ANSWER bytes of JSON with a note saying how much was left out."""
    kept, size, dropped = [], 0, 0
    for o in outputs:
        n = len(json.dumps(o))
        if dropped or size + n > MAX_ANSWER:
            room = MAX_ANSWER - size
            if not dropped and o["output_type"] == "stream" and room > 1024:
                cut = dict(o, text=o["text"][: room // 2])  # JSON escapes can double a character
                kept.append(cut)
                size += len(json.dumps(cut))
            dropped += n
            continue
        kept.append(o)
        size += n
    if dropped:
        kept.append({"output_type": "stream", "name": "stderr",
                     "text": "\n[agentbox: output truncated, about %d bytes of this cell's outputs left out]\n" % dropped})
    return kept


send({"ready": True, "kernel": km.kernel_name})
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    try:
        request = json.loads(line)
        send(run_cell(str(request.get("code", ""))))
    except Exception as e:  # noqa: BLE001 - the daemon waits for one answer per line
        send({"status": "error", "execution_count": None,
              "outputs": [{"output_type": "error", "ename": type(e).__name__, "evalue": str(e), "traceback": []}]})
stop()
