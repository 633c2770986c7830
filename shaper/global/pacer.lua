#!lua name=pacer

-- pacer's Redis Function library: leases of global limits.
--
-- pacer_lease(KEYS = {ledger, hosts},
--             ARGV = {host, rate, burst, period_us, lease_us, demand, returned})
--
-- One call is one host's refresh of its lease on one global limit. It runs
-- atomically and takes its time from Redis (TIME), never from the host.
--
--   ledger  hash: tokens (bytes, may be fractional), at (us of the last
--           refill), shared (us of the last share computation).
--           Missing: it starts EMPTY (tokens 0), so that a Redis restart
--           or a flush cannot release a burst.
--   hosts   hash: host -> "demand seen share grant" (bytes/s, us, bytes/s,
--           bytes). An entry not seen for one lease is removed.
--
-- The ledger fills at rate up to burst. Max-min fair shares (water-filling
-- over the demands, with a floor of a tenth of an equal share for idle
-- hosts; capacity left over is split in proportion to the demands) are
-- computed again once per
-- period, when a host comes or goes, or when a demand rises above its
-- share. A host's grant is min(share x period, ledger), taken from the
-- ledger, less a reserve for newcomers when the host already had a lease;
-- the bytes it returns (unused, at most its last grant) go back.
-- So the grants minus the returns never exceed rate x elapsed + burst.
--
-- When new shares let other hosts send more (a host's share grew by more
-- than a tenth, and is more than a tenth over its last grant), the call
-- publishes on the channel
-- <hosts key>:shares the time of the share computation and those hosts'
-- names, one a line, so that they refresh at once instead of at their
-- next period: a host that stops sending is replaced within the time it
-- takes to see it stop. At most one message per quarter period.
--
-- Reply: {grant bytes, lease us, hosts, fleet demand bytes/s, rate bytes/s,
--         share bytes/s, shares computed at us}.

local function num(s)
  local n = tonumber(s)
  if n == nil or n ~= n or n < 0 or n == math.huge then
    return nil
  end
  return n
end

local function fmt(n)
  return string.format('%.17g', n)
end

local function lease(keys, args)
  if #keys ~= 2 or #args ~= 7 then
    return redis.error_reply('ERR pacer_lease: want 2 keys and 7 arguments')
  end
  local ledger, hostsKey, host = keys[1], keys[2], args[1]
  local rate, burst, period = num(args[2]), num(args[3]), num(args[4])
  local leaseUs, demand, returned = num(args[5]), num(args[6]), num(args[7])
  if not (rate and burst and period and leaseUs and demand and returned)
      or rate <= 0 or burst <= 0 or period <= 0 or leaseUs < period or host == '' then
    return redis.error_reply('ERR pacer_lease: bad arguments')
  end

  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

  local l = redis.call('HMGET', ledger, 'tokens', 'at', 'shared', 'published')
  local tokens, at, shared, published = num(l[1]), num(l[2]), num(l[3]), num(l[4])
  if tokens == nil or at == nil then
    tokens, at, shared = 0, now, nil
  end
  if now > at then
    tokens = tokens + (now - at) * rate / 1e6
  end

  -- The hosts, without the expired ones.
  local raw = redis.call('HGETALL', hostsKey)
  local hosts, me, changed = {}, nil, false
  for i = 1, #raw, 2 do
    local f = {}
    for w in string.gmatch(raw[i + 1], '%S+') do
      f[#f + 1] = num(w) or 0
    end
    local h = { name = raw[i], demand = f[1] or 0, seen = f[2] or 0, share = f[3] or 0, grant = f[4] or 0 }
    if raw[i] == host then
      me = h
    elseif now - h.seen > leaseUs or h.seen > now + leaseUs then
      redis.call('HDEL', hostsKey, raw[i])
      changed = true
    else
      hosts[#hosts + 1] = h
    end
  end
  local new = me == nil
  if new then
    me = { name = host, share = 0, grant = 0 }
    changed = true
  end
  local prev = me.demand
  me.demand, me.seen = demand, now
  hosts[#hosts + 1] = me

  -- Unused bytes come back, at most what was last granted.
  tokens = math.min(burst, tokens + math.min(returned, me.grant))

  local before = me.share -- its share before this call
  for _, h in ipairs(hosts) do
    h.was = h.share
  end
  local n = #hosts
  local fleet = 0
  for _, h in ipairs(hosts) do
    fleet = fleet + h.demand
  end
  -- A demand that rises above its share (it was at or below it), or that
  -- moves by more than a quarter of the share (a host stopped or started),
  -- makes the shares new at once; otherwise they hold for the period, so
  -- that the grants of one period come from one set of shares (their sum
  -- the rate).
  local crossed = prev == nil or (demand > me.share and prev <= me.share)
      or math.abs(demand - prev) > me.share / 4
  local recompute = changed or shared == nil or now - shared >= period or now < shared or crossed
  if recompute then
    local floor = rate / n / 10
    local order = {}
    for i, h in ipairs(hosts) do
      h.want = math.max(h.demand, floor)
      order[i] = h
    end
    table.sort(order, function(a, b) return a.want < b.want end)
    local left = rate
    for i, h in ipairs(order) do
      local eq = left / (n - i + 1)
      h.share = math.min(h.want, eq)
      left = left - h.share
    end
    if left > 0 then
      -- Capacity the demands leave over goes to the hosts in proportion
      -- to their demands, so that a host whose demand is its lease (a TCP
      -- sender held at its rate) can grow, and an idle one gets little.
      local wants = 0
      for _, h in ipairs(hosts) do
        wants = wants + h.want
      end
      for _, h in ipairs(hosts) do
        h.share = h.share + left * h.want / wants
      end
    end
    shared = now
  end

  -- Hosts that may now send more than their last grant: tell them.
  local grown = {}
  if recompute then
    for _, h in ipairs(hosts) do
      if h ~= me and h.share > h.was * 1.1 and h.share > h.grant * 1e6 / period * 1.1 then
        grown[#grown + 1] = h.name
      end
    end
  end
  if #grown > 0 and (published == nil or now - published >= period / 4 or now < published) then
    redis.call('PUBLISH', hostsKey .. ':shares', fmt(shared) .. '\n' .. table.concat(grown, '\n'))
    published = now
  end

  -- A newcomer's first grant is its share at once, so the ledger keeps a
  -- reserve that hosts already holding a lease do not draw, unless their
  -- share grew by more than a quarter in this call (an idle host that
  -- starts sending) or is more than a quarter above their last grant (a
  -- host told that another stopped): one period of an equal share (at most a quarter of
  -- the burst, so that the hosts' grants still fit under it). The
  -- ledger fills at the rate while the shares add up to it, so in steady
  -- state it sits at about the reserve plus one grant and the reserve
  -- costs no rate; a newcomer that empties it is paid back, at the old
  -- hosts' expense, within about a period.
  local avail = tokens
  if not new and me.share <= before * 1.25 and me.share <= me.grant * 1e6 / period * 1.25 then
    avail = tokens - math.min(rate * period / 1e6 / n, burst / 4)
  end
  local grant = math.floor(math.min(me.share * period / 1e6, avail))
  if grant < 0 then
    grant = 0
  end
  tokens = tokens - grant
  me.grant = grant

  local set = {}
  for _, h in ipairs(hosts) do
    if recompute or h == me then
      set[#set + 1] = h.name
      set[#set + 1] = fmt(h.demand) .. ' ' .. fmt(h.seen) .. ' ' .. fmt(h.share) .. ' ' .. fmt(h.grant)
    end
  end
  redis.call('HSET', hostsKey, unpack(set))
  local fields = { 'tokens', fmt(tokens), 'at', fmt(now), 'shared', fmt(shared) }
  if published ~= nil then
    fields[#fields + 1] = 'published'
    fields[#fields + 1] = fmt(published)
  end
  redis.call('HSET', ledger, unpack(fields))
  -- An idle limit's state goes after a while: it starts empty again.
  local ttl = math.max(60000, math.floor(10 * leaseUs / 1000))
  redis.call('PEXPIRE', ledger, ttl)
  redis.call('PEXPIRE', hostsKey, ttl)
  return { grant, math.floor(leaseUs), n, math.floor(fleet), math.floor(rate), math.floor(me.share), math.floor(shared) }
end

redis.register_function('pacer_lease', lease)
