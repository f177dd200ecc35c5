"""The soak (issue 37): a daemon on a small state filesystem, N users with a mixed workload in
threads, and faults injected at seeded random moments, for a bounded time. Checks its ledger
after every fault (acknowledged writes and finished process records intact, only documented
statuses), the daemon's RSS and descriptors against its own baseline after each phase, and what
each daemon left on the host. Prints a summary; exits 1 on any violation, with the seed.

Usage (tests/soak/run.sh wraps it): soak.py --minutes N [--users U] [--seed S]
"""
import argparse
import os
import pathlib
import random
import re
import secrets
import signal
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))  # conftest's Daemon, Origin and helpers
sys.path.insert(0, str(HERE))

import conftest  # noqa: E402
import faults  # noqa: E402
import leftovers  # noqa: E402
from ledger import KEEP_FINISHED, Ledger  # noqa: E402
from workload import User, start  # noqa: E402

# What a sanitizer or the crash report prints (as tests/e2e/test_daemon_stop.py looks for; its
# "unhandled exception" is, here, a 500 the ledger counts).
REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", ": fatal signal ",
           "terminating on an uncaught exception", "std::terminate called")
# After a phase, RSS may stay above the baseline (taken after the first phase) by what glibc's
# arenas keep of freed memory: 4 MiB request bodies (the full-volume fault) parsed on the file
# threads raised a release build from 31 to 67 MiB once, flat afterwards (seed 2, 3 users), so
# 25% plus 48 MiB; a leak still shows as growth past it over a longer run. Descriptors: sockets
# still closing and boxes' channels, up to 15 above and flat with 6 users (seed 7): 32. Under ASan
# freed memory sits in its quarantine: SOAK_RSS_SLACK_MIB.
RSS_SLACK_KIB = int(os.environ.get("SOAK_RSS_SLACK_MIB", "48")) * 1024
FD_SLACK = 32
# And each account first seen since the baseline may keep, until [accounts] idle_timeout, its
# home and volume descriptors, its network namespace and the listeners the daemon serves there,
# and its box's channels (a stuck start's box is held until its timeout): 20 and 39 measured
# after the first stuck start (4 users seed 4, 6 users seed 7), flat after later ones; 48 allowed.
FD_PER_NEW_ACCOUNT = 48
STATEFS_MIB = 640


class Harness:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.ledger = Ledger()
        self.generation = 0
        self.up = threading.Event()       # set while a daemon serves
        self.running = threading.Event()  # set while workers may run operations
        self._idle = {}
        self._idle_cond = threading.Condition()
        self.disk_mib, self.box_memory_mib, self.start_timeout = 48, 384, 5
        self.rss_slack_kib = RSS_SLACK_KIB
        self.workdir = conftest.new_workdir("soak")
        self.statefs = os.path.join(self.workdir, "statefs")
        os.mkdir(self.statefs)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STATEFS_MIB}M,mode=0700", "soak-state", self.statefs],
                       check=True)
        self.origin = conftest.Origin()
        self.fake, self.agent = None, False
        if os.path.exists(conftest.pathlib.Path(HERE.parent.parent / "deps/claude-code/node_modules/.bin/claude")):
            from fake_anthropic import FakeAnthropic
            self.fake, self.agent = FakeAnthropic(), True
        self.daemon = conftest.Daemon(self.workdir, state_dir=os.path.join(self.statefs, "state"),
                                      config_text=self.config(), api_key=secrets.token_hex(16),
                                      lifetime=args.minutes * 60 + 900,
                                      env={"AGENTBOX_TEST_HOLD_START": "stuck-",
                                           "AGENTBOX_ANTHROPIC_API_KEY": "sk-ant-soak-" + secrets.token_hex(8)})
        self.dead = []      # (pid, tree, box netns) of SIGKILLed daemons, checked after successors ran
        self.baseline = None
        self.verify_due = False
        self.measure_skips = 0  # phases not measured: a restarted daemon's boxes start again first
        self.fault_users = []
        self.accounts = set()  # every user id the soak has sent requests for
        self.fault_log = []
        self.memory_user = None
        self.state_full = (0.0, 0.0)  # monotonic window in which the state disk was full (+2 s)

    def config(self):
        text = f"""
[accounts]
disk = "{self.disk_mib}M"
inodes = 4000
start_timeout = {self.start_timeout}
spare_volumes = 1
[box]
memory = "{self.box_memory_mib}M"
[exec]
output_cap = "1M"
keep_finished = {KEEP_FINISHED}
[policy.default]
allow = ["origin.test"]
allow_addresses = ["127.0.0.1/32"]
[hosts]
"origin.test" = "127.0.0.1"
"""
        if self.agent:
            from agent_support import agent_config
            text += agent_config(self.fake)
        return text

    # ---- the daemon
    def start_daemon(self):
        self.daemon.start(timeout=60)
        self.generation += 1
        self.baseline = None
        self.up.set()

    def kill_daemon(self):
        d = self.daemon
        pid = d.pid
        tree = conftest.descendants(d.proc.pid)
        netns = leftovers.net_namespaces(tree) - leftovers.net_namespaces([os.getpid()])
        self.up.clear()
        self.generation += 1
        os.kill(pid, signal.SIGKILL)
        d.proc.wait(30)
        d.proc = None
        self.dead.append((pid, tree, netns, leftovers.uptime()))

    def restart_daemon(self):
        self.start_daemon()
        self.verify_due = True
        self.measure_skips = 1
        self.fault_user(self.memory_user).sh("true", what="the memory fault's account after a restart")

    def check_alive(self):
        """A daemon that died unasked (the CI mystery) is a violation; the soak restarts it."""
        if self.daemon.proc is not None and self.daemon.proc.poll() is not None:
            self.ledger.violation(f"the daemon exited on its own with {self.daemon.proc.returncode}:\n"
                                  f"{self.daemon.log_tail(3000)}")
            self.up.clear()
            self.daemon.proc = None
            self.generation += 1
            self.restart_daemon()

    # ---- workers
    def idle(self, name, idle):
        with self._idle_cond:
            self._idle[name] = idle
            self._idle_cond.notify_all()

    def pause(self, users):
        self.running.clear()
        with self._idle_cond:
            if not self._idle_cond.wait_for(lambda: all(self._idle.get(u.name) for u in users), 180):
                self.ledger.violation("workers still busy 180 s after the pause")

    def in_full_state(self):
        """True while the state disk is full (and 2 s after): what cannot be recorded then fails
        as documented (503, or an agent turn that says it could not start)."""
        return self.state_full[0] <= time.monotonic() <= self.state_full[1]

    def fault_user(self, name=None):
        """A User (own client, closed after the fault) for one of the soak's accounts."""
        u = User(self, name or self.rng.choice(self.user_names), self.rng.randrange(10**9))
        self.fault_users.append(u)
        return u

    def client_of(self, user):
        return self.daemon.client(user=user)

    # ---- checks between phases
    def settle_and_measure(self, phase):
        """RSS and descriptors back within the baseline's slack (first phase of a daemon: taken
        as its baseline)."""
        pid = self.daemon.pid
        if self.measure_skips:
            self.measure_skips -= 1
            return
        time.sleep(1)
        rss, fds = leftovers.rss_and_fds(pid)
        if self.baseline is None:
            self.baseline = (rss, fds, len(self.accounts))
            print(f"  baseline of daemon {pid}: RSS {rss // 1024} MiB, {fds} fds", flush=True)
            return
        base_rss, base_fds, base_accounts = self.baseline
        limit_rss = base_rss * 5 // 4 + RSS_SLACK_KIB
        limit_fds = base_fds + FD_SLACK + FD_PER_NEW_ACCOUNT * (len(self.accounts) - base_accounts)
        deadline = time.monotonic() + 20
        while (rss > limit_rss or fds > limit_fds) and time.monotonic() < deadline:
            time.sleep(0.5)
            rss, fds = leftovers.rss_and_fds(pid)
        print(f"  after phase {phase}: RSS {rss // 1024} MiB (limit {limit_rss // 1024}), "
              f"{fds} fds (limit {limit_fds})", flush=True)
        if rss > limit_rss:
            self.ledger.violation(f"phase {phase}: RSS {rss // 1024} MiB stayed above {limit_rss // 1024} MiB "
                                  f"(baseline {base_rss // 1024} MiB)")
        if fds > limit_fds:
            self.ledger.violation(f"phase {phase}: {fds} descriptors stayed above {limit_fds} (baseline {base_fds}): "
                                  f"{self.fd_kinds(pid)}")

    @staticmethod
    def fd_kinds(pid):
        kinds = {}
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            kind = target.split(":")[0] if ":" in target else target.rsplit("/", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        return kinds

    def check_dead(self):
        """None of a SIGKILLed daemon's processes, cgroups or namespaces remain once its
        successor has run (it takes the dead one's cgroups over at its start)."""
        if self.dead and self.daemon.proc is not None:
            # The dead daemon's volumes are its successor's now: each mounted once, each image on
            # one loop device (a second would be the dead one's, left attached).
            mounts = leftovers.mounts_under(self.daemon.state_dir)
            images = [image for _, image in leftovers.loops_under(self.daemon.state_dir)]
            twice = sorted({m for m in mounts if mounts.count(m) > 1} | {i for i in images if images.count(i) > 1})
            if twice:
                self.ledger.violation(f"after a SIGKILL and a restart, mounted or attached twice: {twice}")
        for pid, tree, netns, ended in self.dead:
            left = leftovers.left_by(pid, tree, netns, ended)  # its cgroups too: the successor takes them over
            if left:
                self.ledger.violation(f"SIGKILLed daemon {pid} left behind, after its successor ran: {left}")
                for p in left.get("process", []):
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass

    def scan_logs(self):
        errors = {}
        for n in range(1, self.daemon.starts + 1):
            try:
                text = open(os.path.join(self.workdir, f"daemon.{n}.log"), errors="replace").read()
            except OSError:
                continue
            for line in text.splitlines():
                if "] [error] " in line:  # what the 500s were, for the summary
                    key = re.sub(r"[0-9a-f]{6,}|\d+", "N", line.split("] [error] ", 1)[1])[:160]
                    errors[key] = errors.get(key, 0) + 1
            for report in REPORTS:
                if report in text:
                    at = text.index(report)
                    self.ledger.violation(f"daemon.{n}.log reports {report!r}:\n{text[max(0, at - 500):at + 2500]}")
        self.log_errors = errors

    # ---- the run
    def run(self):
        args = self.args
        self.start_daemon()
        self.user_names = [f"soak{i}-{self.rng.randrange(10**6)}" for i in range(args.users)]
        stop = threading.Event()
        users = [User(self, n, self.rng.randrange(10**9)) for n in self.user_names]
        threads = [start(u, stop) for u in users]
        # The memory fault's account has its box before the baseline (its descriptors count).
        self.memory_user = f"soakmem-{self.rng.randrange(10**6)}"
        self.fault_user(self.memory_user).sh("true", what="the memory fault's account")
        schedule = []
        end = time.monotonic() + args.minutes * 60
        phase = 0
        try:
            while time.monotonic() < end:
                phase += 1
                length = min(args.phase, max(5.0, end - time.monotonic()))
                if not schedule:
                    schedule = [f for f in faults.ALL if not args.faults or f.__name__ in args.faults.split(",")]
                    self.rng.shuffle(schedule)
                fault = schedule.pop() if phase > 1 else None  # the first phase makes the baseline
                at = self.rng.uniform(0.2, 0.8) * length
                print(f"phase {phase}: {length:.0f} s, fault {fault.__name__ if fault else '-'} at {at:.1f} s",
                      flush=True)
                began = time.monotonic()
                self.running.set()
                if fault:
                    time.sleep(at)
                    self.check_alive()
                    what = fault(self)
                    for u in self.fault_users:
                        u.close()
                    self.fault_users.clear()
                    self.fault_log.append(f"phase {phase} +{at:.1f}s {fault.__name__}: {what}")
                    print(f"  {fault.__name__}: {what}", flush=True)
                time.sleep(max(0.0, began + length - time.monotonic()))
                self.pause(users)
                self.check_alive()
                if self.verify_due:
                    n = self.ledger.verify(self.client_of, f"after phase {phase}")
                    print(f"  ledger verified: {n} records", flush=True)
                    self.verify_due = False
                self.check_dead()
                self.settle_and_measure(phase)
        finally:
            stop.set()
            self.running.set()
            for t in threads:
                t.join(150)
        self.finish()

    def finish(self):
        d = self.daemon
        n = self.ledger.verify(self.client_of, "before the clean stop")
        print(f"final ledger verified: {n} records", flush=True)
        pid = d.pid
        tree = conftest.descendants(d.proc.pid)
        netns = leftovers.net_namespaces(tree) - leftovers.net_namespaces([os.getpid()])
        rc = d.stop(timeout=60)
        if rc != 0:
            self.ledger.violation(f"the clean stop exited with {rc}")
        if d.leftovers:
            self.ledger.violation(f"processes of the daemon alive after its clean stop: {d.leftovers}")
        left = leftovers.left_by(pid, tree, netns, leftovers.uptime(), workdir=d.state_dir)
        if left:
            self.ledger.violation(f"after the clean stop the daemon left: {left}")
        self.check_dead()
        # And what a clean stop saved: a daemon started again answers the same (a process end
        # the store refused while the state disk was full would read "lost" here).
        d.start(timeout=60)
        self.generation += 1
        n = self.ledger.verify(self.client_of, "after a clean stop and a start")
        print(f"ledger verified after a clean stop and a start: {n} records", flush=True)
        if d.stop(timeout=60) != 0 or d.leftovers:
            self.ledger.violation(f"the second clean stop: leftovers {d.leftovers}")
        self.scan_logs()

    def cleanup(self):
        self.up.clear()
        if self.daemon.proc is not None:
            self.daemon.stop()
        self.origin.close()
        if self.fake:
            self.fake.close()
        conftest.unmount_under(self.statefs)
        subprocess.run(["umount", "-l", self.statefs], check=False)
        if os.environ.get("SOAK_KEEP") != "1":
            conftest.remove_workdir(self.workdir)

    def summary(self):
        args, L = self.args, self.ledger
        print("\n== soak summary")
        print(f"seed {args.seed}, {args.users} users, {args.minutes} min, daemon starts {self.daemon.starts}")
        print("operations: " + ", ".join(f"{k} {v}" for k, v in sorted(L.ops.items())))
        print("statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(L.statuses.items())))
        print("faults:\n  " + "\n  ".join(self.fault_log or ["none"]))
        for line, count in sorted(getattr(self, "log_errors", {}).items(), key=lambda e: -e[1])[:15]:
            print(f"daemon log error x{count}: {line}")
        for note in L.notes:
            print(f"note: {note}")
        if L.violations:
            print(f"{len(L.violations)} VIOLATIONS:")
            for v in L.violations:
                print(f"  - {v[:2000]}")
            print(f"replay: AGENTBOX_BIN={conftest.agentbox_bin()} tests/soak/run.sh --minutes {args.minutes} "
                  f"--users {args.users} --seed {args.seed}")
            return 1
        print("no violations")
        return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--users", type=int, default=4)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--phase", type=float, default=15.0, help="seconds of workload per phase (one fault each)")
    p.add_argument("--faults", default="", help="comma-separated subset of: "
                   + ", ".join(f.__name__ for f in faults.ALL))
    args = p.parse_args()
    if args.seed is None:
        args.seed = random.randrange(10**9)
    if os.geteuid() != 0:
        sys.exit("tests/soak: run as root (boxes use host uids, cgroups and loop devices)")
    print(f"soak: seed {args.seed}, {args.users} users, {args.minutes} min, binary {conftest.agentbox_bin()}",
          flush=True)
    h = Harness(args)
    try:
        h.run()
    except Exception as e:
        import traceback
        traceback.print_exc()
        h.ledger.violation(f"the soak itself failed: {type(e).__name__}: {e}")
    finally:
        h.cleanup()
    sys.exit(h.summary())


if __name__ == "__main__":
    main()
