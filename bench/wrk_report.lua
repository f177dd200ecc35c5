-- wrk script of bench/egress_small_bench.sh. With ORIGIN set (http://HOST:PORT/PATH), every
-- request is in absolute form (GET http://HOST:PORT/PATH HTTP/1.1, Host: HOST:PORT), as a client
-- speaks to an HTTP proxy, and the URL given to wrk is the proxy's; without it, wrk's own
-- origin-form requests. At the end one line of exact figures (latencies in microseconds) for
-- the script to parse.
local origin = os.getenv("ORIGIN")
if origin and origin ~= "" then
  wrk.path = origin
  wrk.headers["Host"] = origin:match("^http://([^/]+)")
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "wrk-result requests %d duration_us %d p50_us %d p90_us %d p99_us %d non2xx %d connect %d read %d write %d timeout %d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    e.status, e.connect, e.read, e.write, e.timeout))
end
