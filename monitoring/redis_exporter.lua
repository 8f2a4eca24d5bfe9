#!lua flags=no-writes,allow-stale
-- redis-lockmod's collect script for the Prometheus redis_exporter:
--
--   redis_exporter --script monitoring/redis_exporter.lua ...
--
-- The exporter runs it (EVAL, no keys) on every scrape and exports each pair it returns as
-- redis_script_values{key="..."}. It returns:
--   * every numeric field of INFO lockmod, as lockmod_<field> (lockmod_handoffs, ...);
--   * the wait-time histograms of INFO lockmod (lockmod_waits_<request>:le_...=n,...) as a
--     Prometheus histogram: lockmod_wait_seconds_bucket;request=<r>;le=<bound>,
--     lockmod_wait_seconds_count;request=<r>, lockmod_wait_seconds_sum;request=<r>, and the
--     waits that ended without a grant, lockmod_wait_gave_up;request=<r>;
--   * who waits on what, from LOCK.CONTENDED (the worst names by longest wait and by most
--     waiters): lockmod_contended_<measure>;db=<db>;kind=<kind>;name=<name>, and one
--     lockmod_contended_holds;...;name=<name>;holder=<owner> per holder shown;
--   * lockmod_module_loaded (1 or 0) and lockmod_script_errors (module calls refused, e.g. by
--     the ACL: 0 when all is well).
-- Labels follow the metric name as ;label=value, always in the order db, kind, request, le,
-- name, holder. Names and holders are escaped (\\ for a backslash, \xNN for ';', control bytes
-- and bytes >= 0x80, as redis-cli prints them), so a ';' never appears inside a value.
-- monitoring/prometheus.yml turns these keys into real metric names and labels
-- (metric_relabel_configs); docs/operations.md describes every metric.
--
-- It never raises: a server without the module, or a user refused a call, still scrapes (the
-- exporter would report the whole server down on a script error). Runs on Redis 7+, Valkey
-- and Redis Cluster nodes, on primaries and replicas, and writes nothing.

-- How many names LOCK.CONTENDED lists, for each of its two orders.
local TOP = 10

local out = {}
local function put(key, value)
  out[#out + 1] = key
  out[#out + 1] = tostring(value)
end

local errors = 0

local function esc(s)
  s = string.gsub(s, '\\', '\\\\')
  return (string.gsub(s, '[%z\1-\31;\127-\255]', function(c)
    return string.format('\\x%02x', string.byte(c))
  end))
end

-- INFO lockmod. An empty section: the module is not loaded here.
local ok, info = pcall(redis.call, 'INFO', 'lockmod')
if not ok or type(info) ~= 'string' then
  errors = errors + 1
  info = ''
end
local loaded = 0
for line in string.gmatch(info, '[^\r\n]+') do
  local field, value = string.match(line, '^lockmod_([%w_]+):(.*)$')
  if field then
    loaded = 1
    if string.match(value, '^%-?%d+%.?%d*$') then
      put('lockmod_' .. field, value)
    elseif string.find(value, '=', 1, true) then
      local request = string.match(field, '^waits_(%w+)$')
      local entries = {}
      for k, v in string.gmatch(value, '([^,=]+)=([^,]*)') do
        if string.match(v, '^%-?%d+%.?%d*$') then
          entries[#entries + 1] = { k, v }
        end
      end
      for _, e in ipairs(entries) do
        local k, v = e[1], e[2]
        if request then
          local labels = ';request=' .. request
          local le = string.match(k, '^le_(.+)$')
          if le then
            if le == 'inf' then
              le = '+Inf'
            end
            put('lockmod_wait_seconds_bucket' .. labels .. ';le=' .. le, v)
          elseif k == 'count' then
            put('lockmod_wait_seconds_count' .. labels, v)
          elseif k == 'sum_ms' then
            put('lockmod_wait_seconds_sum' .. labels, tonumber(v) / 1000)
          elseif k == 'gave_up' then
            put('lockmod_wait_gave_up' .. labels, v)
          end
        else
          -- A dictionary field of a later release: each entry on its own.
          put('lockmod_' .. field .. '_' .. string.gsub(k, '[^%w_]', '_'), v)
        end
      end
    end
  end
end
put('lockmod_module_loaded', loaded)

-- Who waits on what: a RESP2 reply, so each name is a flat field/value list.
local function fields(list)
  local m = {}
  for i = 1, #list - 1, 2 do
    m[list[i]] = list[i + 1]
  end
  return m
end

local seen = {}
local function contended(by)
  local ok, reply = pcall(redis.call, 'LOCK.CONTENDED', 'COUNT', TOP, 'BY', by)
  if not ok or type(reply) ~= 'table' then
    errors = errors + 1
    return
  end
  for _, item in ipairs(reply) do
    local c = fields(item)
    local labels = ';db=' .. tostring(c.db) .. ';kind=' .. tostring(c.kind) .. ';name=' .. esc(tostring(c.name))
    if not seen[labels] then
      seen[labels] = true
      put('lockmod_contended_waiters' .. labels, c.waiters)
      put('lockmod_contended_oldest_wait_seconds' .. labels, c.oldest_wait_ms / 1000)
      put('lockmod_contended_holders' .. labels, c.holders_total)
      if type(c.held_ms) == 'number' then
        put('lockmod_contended_held_seconds' .. labels, c.held_ms / 1000)
      end
      if type(c.pttl) == 'number' and c.pttl >= 0 then
        put('lockmod_contended_lease_remaining_seconds' .. labels, c.pttl / 1000)
      end
      for _, h in ipairs(c.holders or {}) do
        local holder = fields(h)
        local count = tonumber(holder.count) or 1
        -- A read-write lock's owner may hold both: its write hold is named as Redisson does.
        local owner = tostring(holder.owner)
        if holder.kind == 'write' then
          owner = owner .. ':write'
        end
        put('lockmod_contended_holds' .. labels .. ';holder=' .. esc(owner), count)
      end
    end
  end
end
if loaded == 1 then
  contended('WAIT')
  contended('WAITERS')
end
put('lockmod_script_errors', errors)
return out
