import Router from '@koa/router';
import {
  handleIcecastCallback,
  hasBasicCredentials,
  icecastResponseHeaders,
  readCallbackForm,
  type MountDecider,
} from '../provisioning/index.js';

export const ICECAST_CALLBACK_PREFIX = '/internal';

/** Icecast's URL-authentication callbacks; only Icecast knows the credentials. A failure answers 500, which Icecast treats as a refusal. */
export function icecastCallbackRoutes(decider: MountDecider, credentials: { user: string; password: string }): Router {
  const router = new Router({ prefix: ICECAST_CALLBACK_PREFIX });
  router.post('/icecast/:action', async (ctx) => {
    if (!hasBasicCredentials(ctx.get('Authorization') || undefined, credentials)) {
      ctx.status = 401;
      ctx.body = 'unauthorized';
      return;
    }
    const decision = await handleIcecastCallback(ctx.params.action, await readCallbackForm(ctx.req), decider);
    ctx.set(icecastResponseHeaders(decision));
    ctx.body = '';
  });
  return router;
}
