-- wrk script of `autobatch-bench --web`: every request is `POST /orders` with one JSON order,
-- on keep-alive connections; at the end one JSON line with the counts and wrk's latency
-- percentiles (microseconds), which the bench parses.
wrk.method = "POST"
wrk.path = "/orders"
wrk.body = '{"customer":"c-42","items":[{"sku":"A-1","quantity":2}]}'
wrk.headers["Content-Type"] = "application/json"

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,' ..
    '"status_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
