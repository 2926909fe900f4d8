import { PROXY_METADATA_AUTH } from './icecast-callbacks.js';

/**
 * An encoder's title update through HAProxy (ICECAST_PROXY=haproxy): `GET /admin/metadata?mount=…&mode=updinfo&song=…`
 * with the service's source credentials, as BUTT, Mixxx or an ffmpeg script send it. Icecast's mounts have no
 * authentication in that mode, so it is decided like a source: the mount, the Authorization as sent and the address go
 * to serve (`/icecast/proxy_metadata_auth`); admitted, the request goes on with Icecast's own source credentials in
 * place of the buyer's, refused, it gets Icecast's 401 and Icecast never sees it. No other /admin request passes
 * (haproxy-config.ts).
 *
 * Icecast 2.4.4 decodes a query value's %XX and its `+` (a space), never a key, and of a key given twice takes the
 * last: so each key may come once, the mount is decoded here as Icecast decodes it, and the request line Icecast gets
 * is rebuilt with that mount alone (encoded again), so that Icecast acts on the mount serve was asked about.
 */
export const ADMIT_METADATA = 'icecast_admit_metadata';
export const SET_METADATA_HEAD = 'icecast_set_metadata_head';

/** The Lua of the two actions; it uses admission.lua's form_escape, serve_decides and SOURCE_AUTHORIZATION. */
export function metadataLua(callbackBase: string): string {
  return `local METADATA_URL = ${JSON.stringify(callbackBase + PROXY_METADATA_AUTH)}

-- A title update's head: its lines, the mount it names (decoded), the rest of its query, its Authorization.
local function metadata_request(txn)
  local data = txn.req:data()
  local stop = data and data:find("\\r\\n\\r\\n", 1, true)
  if not stop then return end
  local lines, authorization = {}, ""
  for line in (data:sub(1, stop + 1)):gmatch("(.-)\\r\\n") do
    local value = line:match("^[Aa][Uu][Tt][Hh][Oo][Rr][Ii][Zz][Aa][Tt][Ii][Oo][Nn]%s*:%s*(.-)%s*$")
    if value then authorization = value else lines[#lines + 1] = line end
  end
  local query, version = (lines[1] or ""):match("^%S+ /admin/metadata%?([^%s#]*) (%S+)$")
  if not query then return end
  local fields, rest = {}, {}
  for pair in query:gmatch("[^&]+") do
    local key, value = pair:match("^([%w_]+)=(.*)$")
    if not key or fields[key] then return end
    fields[key] = value
    if key ~= "mount" and key ~= "mode" then rest[#rest + 1] = pair end
  end
  if fields.mode ~= "updinfo" or not fields.mount then return end
  local mount = fields.mount:gsub("%+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
  if mount:find("%", 1, true) then return end
  return { stop = stop, lines = lines, version = version, mount = mount, rest = rest, authorization = authorization }
end

-- txn.admitted is set only when serve answered that these are the mount's source credentials.
core.register_action("${ADMIT_METADATA}", { "tcp-req" }, function(txn)
  local request = metadata_request(txn)
  if not request then return txn:set_var("txn.refused", true) end
  local body = "action=metadata_auth&mount=" .. form_escape(request.mount)
    .. "&authorization=" .. form_escape(request.authorization)
    .. "&ip=" .. form_escape(txn.f:src())
  serve_decides(txn, METADATA_URL, body)
end)

-- The admitted update rebuilt for Icecast: the mount serve said yes to, Icecast's source credentials.
core.register_action("${SET_METADATA_HEAD}", { "tcp-req" }, function(txn)
  local request = metadata_request(txn)
  if not request then return end
  local target = "/admin/metadata?mount=" .. form_escape(request.mount) .. "&mode=updinfo"
  if #request.rest > 0 then target = target .. "&" .. table.concat(request.rest, "&") end
  request.lines[1] = "GET " .. target .. " " .. request.version
  request.lines[#request.lines + 1] = "Authorization: " .. SOURCE_AUTHORIZATION
  local text = table.concat(request.lines, "\\r\\n") .. "\\r\\n\\r\\n"
  if txn.req:set(text, 0, request.stop + 3) == #text then txn:set_var("txn.metadata_set", true) end
end)`;
}
