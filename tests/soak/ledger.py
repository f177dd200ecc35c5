"""The soak's own ledger: what the daemon acknowledged (file bytes, finished process records),
every status it answered, and every violation, so that each restart can be checked against it.

Runs on: every worker thread and the main thread; one lock guards it all (held briefly).
"""
import collections
import hashlib
import threading

# Statuses README.md and docs/API.md document for the routes the soak calls: success (206 for a
# Range), the request's own faults (400/401/403/404/409/413/415/422), limits (429), the proxy's
# box side (502/504), a box that cannot start or a daemon that cannot store (503), a full account
# (507). 101 is the terminal's WebSocket upgrade. 500 is never one.
DOCUMENTED = frozenset({101, 200, 201, 204, 206, 400, 401, 403, 404, 409, 413, 415, 422, 429,
                        502, 503, 504, 507})


def digest(data):
    return hashlib.sha256(data).hexdigest()


# The daemon keeps an account's newest [exec] keep_finished finished processes (soak.py sets it),
# whatever started them: the ledger counts every process the soak starts in an account (its
# commands, egress probes, servers, faults' commands) and checks the commands among the newest
# KEEP_CHECKED of them, which must stay queryable. The margin covers what the ledger cannot see
# (a start whose answer was lost with a SIGKILLed daemon, an agent turn's CLI) and the order the
# client saw them finish against the daemon's (end second, start, insertion).
KEEP_FINISHED = 1000
KEEP_CHECKED = KEEP_FINISHED - 200


class Ledger:
    def __init__(self):
        self._lock = threading.Lock()
        self.statuses = collections.Counter()
        self.ops = collections.Counter()         # op name -> completed count
        self.violations = []
        self.notes = []                          # what a reader should know, not failing
        self.files = collections.defaultdict(dict)  # user -> path -> {sha256 acceptable}
        # user -> id -> (status, exit_code, stdout), or None for a process started but not checked;
        # oldest first
        self.procs = collections.defaultdict(dict)

    # ---- recording
    def status(self, what, r):
        """Counts an HTTP answer; one outside DOCUMENTED is a violation. Returns its code."""
        with self._lock:
            self.statuses[r.status_code] += 1
        if r.status_code not in DOCUMENTED:
            body = r.text[:300] if hasattr(r, "text") else ""
            self.violation(f"{what} answered {r.status_code}: {body}")
        return r.status_code

    def op(self, name):
        with self._lock:
            self.ops[name] += 1

    def violation(self, text):
        with self._lock:
            self.violations.append(text)
        print(f"VIOLATION: {text}", flush=True)

    def note(self, text):
        with self._lock:
            self.notes.append(text)
        print(f"note: {text}", flush=True)

    def wrote(self, user, path, data, *, certain):
        """A write answered 200 (certain) replaces what the path may hold; one whose answer was
        lost (the daemon died) may or may not have landed, so both versions stay acceptable."""
        with self._lock:
            if certain:
                self.files[user][path] = {digest(data)}
            else:
                # A first write that did not land leaves nothing at all.
                self.files[user].setdefault(path, {None}).add(digest(data))

    def started(self, user, pid):
        """A process the soak started in user's account (checked or not): it counts towards the
        account's keep_finished."""
        with self._lock:
            mine = self.procs[user]
            mine.setdefault(pid, None)
            while len(mine) > KEEP_CHECKED:
                del mine[next(iter(mine))]  # the oldest: the daemon may have let it go

    def finished(self, user, proc, stdout):
        """A command whose record must stay as it answered."""
        with self._lock:
            mine = self.procs[user]
            if proc["id"] in mine:  # not yet among those the daemon may let go
                mine[proc["id"]] = (proc["status"], proc["exit_code"], stdout)

    def snapshot(self):
        with self._lock:
            return ({u: dict(p) for u, p in self.files.items()}, {u: dict(p) for u, p in self.procs.items()})

    # ---- checking
    def verify(self, client_of, when):
        """Every acknowledged write is there with the same bytes and every finished process record
        answers the same, through the API of the daemon running now."""
        files, procs = self.snapshot()
        clients = {}

        def client(user):  # one per user for this pass, closed after it
            if user not in clients:
                clients[user] = client_of(user)
            return clients[user]
        try:
            return self._verify(client, files, procs, when)
        finally:
            for c in clients.values():
                c.close()

    def _verify(self, client_of, files, procs, when):
        from conftest import text_of  # tests/e2e on sys.path (soak.py)
        checked = 0
        for user, paths in files.items():
            c = client_of(user)
            for path, wanted in paths.items():
                r = c.get("/files/view", params={"path": path})
                self.status(f"{when}: view {path}", r)
                got = digest(r.content) if r.status_code == 200 else (None if r.status_code == 404 else "?")
                if got not in wanted:
                    self.violation(f"{when}: {user}'s {path}: answered {r.status_code}, bytes "
                                   f"{got} not one acknowledged ({sorted(map(str, wanted))})")
                checked += 1
        for user, records in procs.items():
            c = client_of(user)
            for pid, record in records.items():
                if record is None:
                    continue  # started, not checked
                status, code, stdout = record
                r = c.get(f"/execute/{pid}/status")
                self.status(f"{when}: status of {pid}", r)
                if r.status_code != 200:
                    self.violation(f"{when}: {user}'s finished process {pid} answered {r.status_code}")
                    continue
                p = r.json()
                if (p["status"], p["exit_code"], text_of(p, ("stdout",))) != (status, code, stdout):
                    self.violation(f"{when}: {user}'s process {pid} changed: was {(status, code, stdout)!r}, "
                                   f"now {(p['status'], p['exit_code'], text_of(p, ('stdout',)))!r}")
                checked += 1
        return checked
