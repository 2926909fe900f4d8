import { PROXY_LISTENER_ADD, PROXY_STREAM_AUTH } from './icecast-callbacks.js';
import { metadataLua } from './haproxy-metadata.js';

/**
 * HAProxy admits listeners itself, by asking serve (ICECAST_PROXY=haproxy): a Lua action posts the listener's mount
 * (with its query), its signed ticket (haproxy-config.ts: its real address in it), and its user agent to serve's
 * callback server, as Icecast's listener_add would, with HAProxy's `core.httpclient()` (yieldable: every waiting
 * listener is asked at once, where Icecast 2.4.4 asks one callback at a time from its one auth thread). serve answers
 * from its places in memory, one request at a time, so the cap stays exact. Admitted: on to Icecast (which no longer
 * asks listener_add). Refused: the listener gets the 401 Icecast answers a refused listener, byte for byte but for the
 * date. No answer in time: a 503 that says the host is busy (nothing was decided; the listener may come back).
 *
 * Sources the same way: a PUT or SOURCE's Authorization, mount and address go to serve as Icecast's stream_auth would
 * send them; admitted, its Authorization is replaced by Icecast's own source credentials (\`sourceAuth\`, known only
 * to Icecast's and HAProxy's 0600 files), so no source reaches Icecast without serve's yes. When Icecast answers it
 * (200, or 100 Continue: the mount is reserved for it by then), a line \`<secret> + <source id> <mount>\` goes to
 * serve through HAProxy's log, as its end-of-connection line does when it closes (haproxy-close-events.ts). An
 * encoder's title update is asked about the same way (haproxy-metadata.ts).
 */
export interface AdmissionOptions {
  /** serve's callback server, e.g. http://127.0.0.1:4567. */
  callbackBaseUrl: string;
  /** The Basic credentials Icecast's callbacks carry (serve refuses requests without them). */
  callbackAuth: { user: string; password: string };
  /** How long serve has to answer before the listener is refused. */
  timeoutMs: number;
  /** The credentials Icecast takes a source with (its global source password). */
  sourceAuth: { user: string; password: string };
  /** Opens each line to serve through HAProxy's log (HaproxyCloseEvents.secret). */
  logSecret: string;
}

export const ADMIT = 'icecast_admit';
export const REFUSE = 'icecast_refuse';
export const BUSY = 'icecast_busy';
export const ADMIT_SOURCE = 'icecast_admit_source';
export const SET_SOURCE_AUTH = 'icecast_set_source_auth';
export const SOURCE_STARTED = 'icecast_source_started';

// Icecast 2.4.4's answer to a listener its URL auth refused (client_send_401 in client.c), headers in its order.
const REFUSAL_HEAD = ['HTTP/1.0 401 Authentication Required', 'Server: Icecast 2.4.4', 'Connection: Close'];
const REFUSAL_TAIL = [
  'Content-Type: text/plain; charset=utf-8',
  'WWW-Authenticate: Basic realm="Icecast2 Server"',
  'Cache-Control: no-cache, no-store',
  'Expires: Mon, 26 Jul 1997 05:00:00 GMT',
  'Pragma: no-cache',
  '',
  'You need to authenticate',
  '',
];

// serve gave no answer in time (LISTENER_ADMISSION_TIMEOUT_MS) or an error: nothing was decided, so a player or an
// encoder is told to come back, not that its credentials are wrong (a 401 makes some players ask for a password).
const BUSY_ANSWER = [
  'HTTP/1.0 503 Service Unavailable',
  'Retry-After: 2',
  'Connection: Close',
  'Content-Type: text/plain; charset=utf-8',
  'Cache-Control: no-cache, no-store',
  '',
  "The stream's host is busy: try again in a few seconds.",
  '',
].join('\r\n');

const lua = (s: string) => JSON.stringify(s);

const basicOf = ({ user, password }: { user: string; password: string }) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

// A source's admission by serve, its credentials swapped for Icecast's own, and serve told when Icecast took it.
const SOURCE_ACTIONS = `-- A source's request head split into its target and its Authorization lines, the rest kept in order.
local function source_head(txn)
  local data = txn.req:data()
  local stop = data and data:find("\\r\\n\\r\\n", 1, true)
  if not stop then return end
  local kept, authorization = {}, ""
  for line in (data:sub(1, stop + 1)):gmatch("(.-)\\r\\n") do
    local value = line:match("^[Aa][Uu][Tt][Hh][Oo][Rr][Ii][Zz][Aa][Tt][Ii][Oo][Nn]%s*:%s*(.-)%s*$")
    if value then authorization = value else kept[#kept + 1] = line end
  end
  return { stop = stop, target = kept[1]:match("^%S+ (%S+)"), authorization = authorization, kept = kept }
end

core.register_action("${ADMIT_SOURCE}", { "tcp-req" }, function(txn)
  local head = source_head(txn)
  if not head or not head.target then return txn:set_var("txn.refused", true) end
  local body = "action=stream_auth&mount=" .. form_escape(head.target)
    .. "&authorization=" .. form_escape(head.authorization)
    .. "&ip=" .. form_escape(txn.f:src())
  serve_decides(txn, SOURCE_URL, body)
end)

-- The admitted source's head with Icecast's source credentials in place of the buyer's.
core.register_action("${SET_SOURCE_AUTH}", { "tcp-req" }, function(txn)
  local head = source_head(txn)
  if not head then return end
  head.kept[#head.kept + 1] = "Authorization: " .. SOURCE_AUTHORIZATION
  local text = table.concat(head.kept, "\\r\\n") .. "\\r\\n\\r\\n"
  if txn.req:set(text, 0, head.stop + 3) == #text then txn:set_var("txn.source_auth_set", true) end
end)

-- Icecast took the source (200, or 100 Continue: the mount is reserved by then): serve is told at once.
core.register_action("${SOURCE_STARTED}", { "tcp-res" }, function(txn)
  local data = txn.res:data() or ""
  if data:find("^HTTP/1%.%d 200") or data:find("^HTTP/1%.%d 100") then
    txn:Info(LOG_SECRET .. " + " .. txn:get_var("sess.source_id") .. " " .. txn:get_var("sess.source_mount"))
  end
end)`;

export function buildAdmissionLua(o: AdmissionOptions): string {
  const base = `${o.callbackBaseUrl.replace(/\/+$/, '')}/icecast/`;
  return `-- Generated by serve (src/provisioning/haproxy-admission.ts) at each start; edits are lost.
local URL, SOURCE_URL = ${lua(base + PROXY_LISTENER_ADD)}, ${lua(base + PROXY_STREAM_AUTH)}
local AUTHORIZATION, TIMEOUT = ${lua(basicOf(o.callbackAuth))}, ${o.timeoutMs}
local SOURCE_AUTHORIZATION, LOG_SECRET = ${lua(basicOf(o.sourceAuth))}, ${lua(o.logSecret)}
local REFUSAL_HEAD, REFUSAL_TAIL = ${lua(`${REFUSAL_HEAD.join('\r\n')}\r\n`)}, ${lua(REFUSAL_TAIL.join('\r\n'))}
local BUSY_ANSWER = ${lua(BUSY_ANSWER)}

local function form_escape(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

local function header(res, name)
  for k, v in pairs(res.headers or {}) do
    if k:lower() == name then return type(v) == "table" and (v[0] or v[1]) or v end
  end
end

-- The request line's target and the User-Agent of a listener's head (txn.req holds the whole head by now).
local function target_and_agent(txn)
  local data = txn.req:data()
  local stop = data and data:find("\\r\\n\\r\\n", 1, true)
  if not stop then return end
  local head = data:sub(1, stop + 1)
  local agent = ""
  for line in head:gmatch("(.-)\\r\\n") do
    local value = line:match("^[Uu][Ss][Ee][Rr]%-[Aa][Gg][Ee][Nn][Tt]%s*:%s*(.-)%s*$")
    if value then agent = value end
  end
  return head:match("^%S+ (%S+)"), agent
end

-- serve's answer to this form: txn.admitted when it says yes, txn.refused when it says no. Neither (no answer in
-- time, an error, or this action cut short by the inspect-delay) is no decision: the client hears the host is busy.
local function serve_decides(txn, url, body)
  local ok, res = pcall(function()
    return core.httpclient():post{ url = url, body = body, timeout = TIMEOUT, headers = {
      ["content-type"] = { "application/x-www-form-urlencoded" },
      ["authorization"] = { AUTHORIZATION },
    } }
  end)
  if not (ok and res and res.status == 200) then return end
  txn:set_var(header(res, "icecast-auth-user") == "1" and "txn.admitted" or "txn.refused", true)
end

core.register_action("${ADMIT}", { "tcp-req" }, function(txn)
  local target, agent = target_and_agent(txn)
  if not target then return txn:set_var("txn.refused", true) end
  local body = "action=listener_add&mount=" .. form_escape(target)
    .. "&user=" .. form_escape(txn:get_var("txn.ticket_user"))
    .. "&pass=" .. form_escape(txn:get_var("txn.ticket_pass"))
    .. "&ip=" .. form_escape(txn:get_var("txn.src"))
    .. "&agent=" .. form_escape(agent)
  serve_decides(txn, URL, body)
end)

${SOURCE_ACTIONS}

${metadataLua(base)}

core.register_service("${REFUSE}", "tcp", function(applet)
  applet:send(REFUSAL_HEAD .. os.date("!Date: %a, %d %b %Y %H:%M:%S GMT\\r\\n") .. REFUSAL_TAIL)
end)

core.register_service("${BUSY}", "tcp", function(applet)
  applet:send(BUSY_ANSWER)
end)
`;
}
