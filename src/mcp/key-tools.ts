import { ApiError } from '../errors/index.js';
import type { SelfServiceKeys } from '../identity/index.js';
import type { ToolCall, ToolOutcome, McpDeps } from './tools.js';
import type { ToolName } from './tool-schemas.js';

/** What the key tools use besides the tools' own: self-service keys, as POST /keys issues them. */
export type KeyToolDeps = McpDeps & { selfServiceKeys?: SelfServiceKeys };

export interface KeyTool {
  name: ToolName;
  title: string;
  description: string;
  readOnly: boolean;
  run(call: ToolCall, deps: KeyToolDeps): Promise<ToolOutcome>;
}

const CREATE_DESCRIPTION =
  'Sign in once, then use a key: turns one wallet sign-in into an agent API key bound to that wallet, so every later ' +
  "call needs no signature. Call it with a SIGN-IN-WITH-X header on the MCP connection's HTTP requests; " +
  'without one the ' +
  'result is an error whose structuredContent is a PaymentRequired carrying extensions["sign-in-with-x"], ' +
  'the message ' +
  'to sign (nothing is charged). Returns api_key, shown only once: send it as the "Authorization: Bearer <api_key>" ' +
  'header of the connection for quote, order, extend_service, stop_service and every other tool. The key expires ' +
  'after expires_in_hours (default 24) and has the limits of keys a wallet gets over REST (POST /api/v1/keys): keys ' +
  'per wallet per hour and live keys per wallet. revoke_api_key (or DELETE /api/v1/keys/{id}) revokes it.';

const REVOKE_DESCRIPTION =
  'Revokes the agent API key this call is made with (its "Authorization: Bearer <key>" header): every instance ' +
  'refuses it from then on. Services it bought keep running; the wallet that paid can still manage them by signing ' +
  'in. Returns the revoked key id.';

export const keyTools: KeyTool[] = [
  {
    name: 'create_api_key',
    title: 'Sign in once and get an API key',
    readOnly: false,
    description: CREATE_DESCRIPTION,
    run: async ({ args, caller }, deps) => {
      const keys = deps.selfServiceKeys;
      if (!keys) throw noSignUp();
      keys.assertEnabled();
      const address = await caller.signedInWallet('A new agent API key bound to this wallet, for the MCP tools');
      const hours: number = args.expires_in_hours;
      const expiresAt = new Date(Date.now() + hours * 3_600_000);
      const name: string = args.name ?? `wallet ${address} over MCP`;
      const { key, token } = await keys.issue(address, caller.clientAddress, name, expiresAt);
      return {
        body: {
          ok: true,
          api_key: token,
          key: {
            id: key.id,
            name: key.name,
            wallet_address: address,
            created_at: key.created_at.toISOString(),
            expires_at: (key.expires_at ?? expiresAt).toISOString(),
          },
          note:
            'The api_key is shown only now: keep it. Send it as the "Authorization: Bearer <api_key>" header ' +
            "of the MCP connection's HTTP requests.",
        },
      };
    },
  },
  {
    name: 'revoke_api_key',
    title: 'Revoke the API key of this call',
    readOnly: false,
    description: REVOKE_DESCRIPTION,
    run: async ({ caller }, deps) => {
      const key = await caller.keyForWrite();
      await deps.keys.revoke(key.id);
      return { body: { ok: true, revoked: key.id } };
    },
  },
];

function noSignUp(): ApiError {
  return new ApiError(
    403,
    'agent_signup_disabled',
    'This deployment issues no keys to wallets (wallet sign-in is not set up). Ask the operator for an agent API key.',
  );
}
