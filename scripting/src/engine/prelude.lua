-- The sandbox and the Lua half of the `redis` table, loaded once per
-- interpreter as the chunk "=cinnabar" (frames from it are skipped when an
-- error is attributed to a script line).
local G, dbg, R = ...
local error, type, tostring, select, unpack, rawset, rawget, setmetatable =
  error, type, tostring, select, unpack, rawset, rawget, setmetatable
local native_pcall, xpcall = pcall, xpcall

local function readonly()
  error("Attempt to modify a readonly table", 2)
end

local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end

-- A read-only view of `t`: reads go through, writes fail.
local real_of
local function protect(t)
  local p = setmetatable({}, { __index = t, __newindex = readonly, __metatable = false })
  real_of(p, t)
  return p
end

-- Runtime `redis` API (filled below) and the one FUNCTION LOAD code sees:
-- two tables, as in Redis, so a library that keeps the one it loaded with
-- cannot reach the runtime API through it, nor register functions later.
local full = {}
local loading = {}
local redis_proxy = setmetatable({}, { __index = full, __newindex = readonly, __metatable = false })
local loading_proxy = setmetatable({}, { __index = loading, __newindex = readonly, __metatable = false })

-- redis.call and redis.pcall are replaced by the engine's C functions
-- (they reach the running script's host).
local function not_running()
  error({ err = "ERR redis.call is not available now" })
end
full.call = not_running
full.pcall = not_running
for k, f in pairs(R.helpers) do
  full[k] = f
end
full.error_reply = R.error_reply
full.status_reply = R.status_reply
for k, v in pairs(R.consts) do
  full[k] = v
  loading[k] = v
end
loading.log = full.log

-- redis.register_function, only while a library loads.
local pending
-- A string argument as Lua's C API reads one: numbers are converted.
local function as_string(v)
  if type(v) == "number" then return tostring(v) end
  if type(v) == "string" then return v end
end
loading.register_function = function(...)
  if pending == nil then
    error({ err = "ERR redis.register_function can only be called on FUNCTION LOAD command" })
  end
  local argc, a, b = select("#", ...), ...
  local name, fn, flags, desc
  if argc == 0 or argc > 2 then
    error({ err = "ERR wrong number of arguments to redis.register_function" })
  end
  if argc == 1 then
    if type(a) ~= "table" then
      error({ err = "ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)." })
    end
    for k, v in pairs(a) do
      if k == "function_name" then
        name = as_string(v)
        if name == nil then
          error({ err = "ERR function_name argument given to redis.register_function must be a string" })
        end
      elseif k == "callback" then
        if type(v) ~= "function" then
          error({ err = "ERR callback argument given to redis.register_function must be a function" })
        end
        fn = v
      elseif k == "flags" then
        if type(v) ~= "table" then
          error({ err = "ERR flags argument to redis.register_function must be a table representing function flags" })
        end
        flags = v
      elseif k == "description" then
        desc = as_string(v)
        if desc == nil then
          error({ err = "ERR description argument given to redis.register_function must be a string" })
        end
      else
        error({ err = "ERR unknown argument given to redis.register_function" })
      end
    end
    if name == nil then
      error({ err = "ERR redis.register_function must get a function name argument" })
    end
    if fn == nil then
      error({ err = "ERR redis.register_function must get a callback argument" })
    end
  else
    name = as_string(a)
    if name == nil then
      error({ err = "ERR first argument to redis.register_function must be a string" })
    end
    if type(b) ~= "function" then
      error({ err = "ERR second argument to redis.register_function must be a function" })
    end
    fn = b
  end
  local fl = {}
  if flags then
    for _, f in ipairs(flags) do
      if type(f) ~= "string" then error({ err = "ERR unknown flag given" }) end
      fl[#fl + 1] = f
    end
  end
  for _, p in ipairs(pending) do
    if p.name == name then
      error({ err = "ERR Function already exists in the library" })
    end
  end
  local ok, e = R.check_function(name, fl)
  if not ok then error({ err = e }) end
  pending[#pending + 1] = { name = name, fn = fn, flags = fl, desc = desc }
end

-- Lua's pcall, but an error table is caught as its message (as Redis 7.0);
-- a host error (SCRIPT KILL) is never caught.
local function pack(...) return { n = select("#", ...), ... } end
G.pcall = function(...)
  local r = pack(native_pcall(...))
  if not r[1] then
    local e = r[2]
    if type(e) == "table" and e.err ~= nil then
      r[2] = e.err
    elseif R.is_host_error(e) then
      if R.is_kill(e) then error(e, 0) end
      r[2] = R.host_error(e)
    end
  end
  return unpack(r, 1, r.n)
end

-- pairs(), rawget() and rawset() see through the read-only views; rawset
-- cannot write into one (a view is an empty table whose new keys would
-- shadow the library for every later script).
local real = setmetatable({}, { __mode = "k" })
real_of = function(p, t) real[p] = t end
G.rawget, G.rawset, G.setmetatable = R.raw_access(real)
local native_pairs = pairs
G.pairs = function(t)
  local o = real[t]
  if o then return next, o, nil end
  return native_pairs(t)
end

-- The message handler: the error as a table with the script line it came from.
local function handler(e)
  local level, info = 2, nil
  repeat
    info = dbg.getinfo(level, "Sl")
    level = level + 1
  until info == nil or (info.what ~= "C" and info.source:sub(1, 1) == "@")
  local src, line = "?", -1
  if info then src, line = info.source, info.currentline end
  local msg
  if type(e) == "table" then
    if e.err == nil then
      msg = "ERR unknown error"
    else
      msg = tostring(e.err)
    end
  elseif type(e) == "string" then
    msg = "ERR " .. e
  elseif R.is_host_error(e) then
    msg = R.host_error(e)
  else
    msg = "ERR " .. tostring(e)
  end
  local counted = type(e) == "table" and rawequal(rawget(e, "ignore_error_stats_update"), true) or nil
  return { err = msg, source = src, line = line, ignore_error_stats_update = counted }
end

setmetatable(loading, { __index = missing, __newindex = readonly, __metatable = false })

-- getmetatable(_G) is a read-only table in Redis; a stand-in keeps the
-- real one out of reach.
local env_mt = {
  __index = G,
  __newindex = readonly,
  __metatable = setmetatable({}, { __newindex = readonly, __metatable = false }),
}
local env = setmetatable({}, env_mt)
-- A library's top-level code sees no globals but its `redis`.
local load_globals = setmetatable({ redis = loading_proxy }, { __index = missing, __metatable = false })
real[env] = G
real[redis_proxy] = full

setmetatable(G, { __index = missing, __newindex = readonly, __metatable = false })
for _, name in ipairs({ "string", "math", "table", "coroutine", "bit", "cjson", "cmsgpack", "struct" }) do
  local t = rawget(G, name)
  if type(t) == "table" then rawset(G, name, protect(t)) end
end
rawset(G, "redis", redis_proxy)
rawset(G, "_G", env)
rawset(G, "__redis__err__handler", handler)

local api = {}
api.env = env
api.full = full
-- Every run goes under it: it makes the error table with the script line.
api.handler = handler
-- Runs a library's top-level code: true, registrations or false, error table.
api.load = function(f)
  pending = {}
  env_mt.__index = load_globals
  local ok, e = xpcall(f, handler)
  env_mt.__index = G
  local p = pending
  pending = nil
  if ok then return true, p end
  return false, e
end
return api
